# Types for the compiled build (compiled.py): Cython compiles egress_buffers.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cdef class EgressPool:
    cdef public object name
    cdef public long long size, used, peak

cdef class QueueBuffer:
    cdef public object profile, pool, port_pool, static_th
    cdef public long long reserved, shift, used, reserved_used, port_reserved_used, shared, pooled
    cpdef threshold(self)
    cpdef bint take(self, long long nbytes, bint counted=*)
    cpdef long long release(self, long long nbytes, bint counted=*)
