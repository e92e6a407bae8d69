# Types for the compiled build (compiled.py): Cython compiles buffers.py, unchanged, with
# these declarations; the pure-Python module ignores this file. Byte counts are C 64-bit
# integers, locals too: at most 2**48 (config_fields.MAX_BYTES).
cimport cython
from rocelab.fabric.model.pools cimport SharedPool

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
    @cython.locals(free=cython.longlong)
    cpdef long long threshold(self)
    @cython.locals(room=cython.longlong, used=cython.longlong, spill=cython.longlong,
                   shared_room=cython.longlong, to_port=cython.longlong,
                   to_shared=cython.longlong, beyond=cython.longlong)
    cpdef admit(self, long long nbytes, now)
    @cython.locals(pool=SharedPool, take=cython.longlong)
    cpdef release(self, long long nbytes)
    @cython.locals(threshold=cython.longlong, resume_at=cython.longlong)
    cpdef bint try_xon(self, now)
    cpdef _into_shared(self, long long reserved_bytes, long long shared_bytes,
                       long long port_bytes=*)
    cpdef long long _headroom_room(self)
    cpdef _into_headroom(self, long long nbytes)
    cpdef _start_xoff(self, now)
    cpdef _past_xoff(self, long long nbytes)
    cpdef _drop(self, long long nbytes, admission)
    cpdef _watermark(self)
