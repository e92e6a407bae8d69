# Types for the compiled build (compiled.py): Cython compiles neighbors.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
from rocelab.fabric.model.interfaces cimport L3Interface
from rocelab.fabric.model.ports cimport PortState

cdef class Neighbor:
    # read per routed frame: the ready header, the MAC, where it goes out
    cdef public bytes mac, head
    cdef public L3Interface iface
    cdef public PortState port
    cdef public object ip, ethertype, state, expires, tries, next_retry
    cdef public list pending
