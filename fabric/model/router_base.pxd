# Types for the compiled build (compiled.py): Cython compiles router_base.py, unchanged,
# with these declarations; the pure-Python module ignores this file.
from rocelab.fabric.model.neighbors cimport Neighbor

cdef class RouterBase:
    cdef public bint kernel_stack, timers_moved
    cdef public bytes router_mac
    cdef public unsigned int ecmp_salt  # the ECMP hash seed: 32 bits, as crc32 takes it
    cdef public frozenset local_ips
    cdef public object cpu, table, _resolve_at, _next_timer
    cdef public dict interfaces, neighbors, _learned, _cache, _to_resolve
    cdef public list warnings, _statics
    cpdef _send_ip(self, Neighbor nh, bytes packet, prio, cls, owner, list out, now)
