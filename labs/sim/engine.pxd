# Types for the compiled build (compiled.py): Cython compiles engine.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cdef class Engine:
    cdef public object now_ps
    cdef public list _heap
    cdef object _seq
    cdef public object events
    cpdef later(self, object when_ps, object handler, tuple args)

cpdef object to_ps(double seconds)
