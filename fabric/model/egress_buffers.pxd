# Types for the compiled build (compiled.py): Cython compiles egress_buffers.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cimport cython
from rocelab.fabric.model.pools cimport Pool

cdef class QueueBuffer:
    cdef public object profile, port_pool, static_th
    cdef public Pool pool
    cdef public long long reserved, shift, used, reserved_used, port_reserved_used, shared, pooled
    @cython.locals(free=cython.longlong)
    cpdef long long threshold(self)
    @cython.locals(pool=Pool, room=cython.longlong, rest=cython.longlong,
                   to_port=cython.longlong)
    cpdef bint take(self, long long nbytes, bint counted=*)
    @cython.locals(shared=cython.longlong, to_port=cython.longlong, given=cython.longlong)
    cpdef long long release(self, long long nbytes, bint counted=*)
