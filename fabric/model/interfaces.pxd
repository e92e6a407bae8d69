# Types for the compiled build (compiled.py): Cython compiles interfaces.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cdef class L3Interface:
    cdef public object name, port, vlan, addresses, ips, addresses6, ips6, link_local6
    cdef public bytes router_mac
    cpdef send(self, bytes dst, long long ethertype, bytes payload, long long prio, cls,
               list out, now)
