# Types for the compiled build (compiled.py): Cython compiles router.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cimport cython
from rocelab.fabric.model.ecmp cimport packet_flow_hash
from rocelab.fabric.model.frames cimport routed_ipv4
from rocelab.fabric.model.neighbors cimport Neighbor
from rocelab.fabric.model.ports cimport PortState
from rocelab.fabric.model.router_base cimport RouterBase

cdef class Router(RouterBase):
    cpdef l3_in(self, iface, PortState ingress, bytes frame, int ethertype, Py_ssize_t off,
                int prio, cls, list out, now)
    @cython.locals(nh=Neighbor, port=PortState, size=Py_ssize_t, vihl=int, total=Py_ssize_t,
                   frag=int, ttl=int, proto=int, ihl=Py_ssize_t, hops=object,
                   tos=int, src=cython.longlong, dst=cython.longlong, address=object)
    cpdef ipv4_in(self, iface, PortState ingress, bytes frame, Py_ssize_t off, int prio, cls,
                  list out, now)
