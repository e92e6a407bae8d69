# Types for the compiled build (compiled.py): Cython compiles pools.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cdef class Pool:
    cdef public object name
    cdef public long long size, used, peak

cdef class SharedPool(Pool):
    cdef public long long headroom_size, headroom_used, headroom_peak
    cdef public dict in_xoff

cdef class EgressPool(Pool):
    pass
