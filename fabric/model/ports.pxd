# Types for the compiled build (compiled.py): Cython compiles ports.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
from rocelab.fabric.model.counters cimport PortCounters
from rocelab.fabric.model.egress cimport EgressPort

cdef class PortState:
    cdef public object name, role, native_vlan, interface, qos
    cdef public list by_dscp, by_prio, queue_of  # classify.PortClassifier's (by_dscp: or None)
    cdef public bint admin_up, link_up, up, touched
    cdef public long long mtu
    cdef public dict vlans
    cdef public PortCounters counters
    cdef public EgressPort egress
    cdef public list pgs, pfc, pfc_tx
    cdef public PortState next_touched
    cdef public object runtime
