# Types for the compiled build (compiled.py): Cython compiles cable.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cdef class Cable:
    cdef public object per_byte, delay, duration, free
    cpdef tuple send(self, object nbytes, object now)
