# Types for the compiled build (compiled.py): Cython compiles bridge.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cimport cython
from rocelab.fabric.model.frames cimport routed_ipv4
from rocelab.fabric.model.ports cimport PortState

cdef class VlanBridge:
    cdef public object name, svi, age_s
    cdef public long long vid
    cdef public list members
    cdef public dict mode_of, fdb, _tags
    cpdef learn(self, bytes mac, PortState port, now)
    cpdef lookup(self, bytes mac, now)
    cpdef bytes _tag(self, long long mode, long long prio)
    cpdef bytes retag(self, bytes frame, Py_ssize_t off, long long prio, long long mode)
    cpdef bytes encapsulate(self, bytes dst, bytes src, long long ethertype, bytes payload,
                            long long prio, long long mode)
    cpdef forward(self, PortState ingress, bytes dst, bytes frame, Py_ssize_t off,
                  long long prio, cls, list out, now)
    cpdef flood(self, ingress, bytes frame, Py_ssize_t off, long long prio, cls, list out)
    @cython.locals(port=PortState, mode=cython.longlong, short=Py_ssize_t)
    cpdef send_routed(self, bytes dst, bytes head, bytes frame, Py_ssize_t off,
                      Py_ssize_t total, long long prio, cls, list out, now)
    @cython.locals(port=PortState)
    cpdef send(self, bytes dst, bytes src, long long ethertype, bytes payload, long long prio,
               cls, list out, now)
