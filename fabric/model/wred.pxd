# Types for the compiled build (compiled.py): Cython compiles wred.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cdef class Wred:
    cdef public object name
    cdef public long long min_bytes, max_bytes
    cdef public double max_probability
    cdef public bint marks, drops
    cpdef double probability(self, long long depth_bytes)
    cpdef mark_or_drop(self, long long depth_bytes, bint ect, double rand)
