# Types for the compiled build (compiled.py): Cython compiles buffers.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cdef class Pool:
    cdef public object name
    cdef public long long size, used, peak

cdef class SharedPool(Pool):
    cdef public long long headroom_size, headroom_used, headroom_peak
    cdef public dict in_xoff

cdef class PgBuffer:
    cdef public object port, profile, priorities, static_th, port_pool
    cdef public Py_ssize_t pg
    cdef public bint lossless, shares_headroom, xoff
    cdef public SharedPool pool
    cdef public long long reserved, headroom, shift, xon, xon_offset
    cdef public long long reserved_used, port_reserved_used, shared, headroom_used
    cdef public long long peak, shared_peak, headroom_peak, after_xoff, after_xoff_max
    cdef public long long xoff_count, drops, dropped_bytes
    cdef public double xoff_since, xoff_seconds
    cpdef long long in_use(self)
    cpdef threshold(self)
    cpdef admit(self, long long nbytes, now)
    cpdef release(self, long long nbytes)
    cpdef bint try_xon(self, now)
    cpdef _into_shared(self, long long reserved_bytes, long long shared_bytes,
                       long long port_bytes=*)
    cpdef long long _headroom_room(self)
    cpdef _into_headroom(self, long long nbytes)
    cpdef _start_xoff(self, now)
    cpdef _past_xoff(self, long long nbytes)
    cpdef _drop(self, long long nbytes, admission)
    cpdef _watermark(self)
