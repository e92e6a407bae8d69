# Types for the compiled build (compiled.py): Cython compiles interfaces.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cimport cython
from rocelab.fabric.model.bridge cimport VlanBridge
from rocelab.fabric.model.ports cimport PortState

cdef class L3Interface:
    cdef public object name, addresses, ips, addresses6, ips6, link_local6
    cdef public PortState port
    cdef public VlanBridge vlan
    cdef public bytes router_mac
    @cython.locals(port=PortState)
    cpdef send(self, bytes dst, long long ethertype, bytes payload, long long prio, cls,
               list out, now)
