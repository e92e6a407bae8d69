# Types for the compiled build (compiled.py): Cython compiles engine.py, unchanged, with
# these declarations; the pure-Python module ignores this file. TupleHeap, the
# interpreter's heap, stays an ordinary class.
cdef class ArrayHeap:
    cdef long long[::1] _keys, _free
    cdef list _calls
    cdef Py_ssize_t _size
    cpdef long long earliest(self)
    cpdef push(self, long long when, long long seq, handler, tuple args)
    cpdef _grow(self)
    cpdef tuple pop(self)

cdef class Engine:
    cdef public long long now_ps  # below LAST_PS (2**62): to_ps refuses later times
    cdef ArrayHeap _heap
    cdef long long _seq
    cdef public object events
    cdef bint _halted
    cpdef later(self, object when_ps, object handler, tuple args)
    cpdef double seconds(self)

cpdef object to_ps(double seconds)
