# Types for the compiled build (compiled.py): Cython compiles engine.py, unchanged, with
# these declarations; the pure-Python module ignores this file. TupleHeap, the
# interpreter's heap, stays an ordinary class.
cdef extern from *:
    void __builtin_prefetch(const void *address) nogil
cdef extern from "Python.h":
    void *PyList_GET_ITEM_PTR "PyList_GET_ITEM"(object, Py_ssize_t)  # borrowed, untouched

cdef class Handler:
    cpdef fire(self, arg)

cdef class Call(Handler):
    cdef public object handler
    cdef public tuple args

cdef class ArrayHeap:
    cdef long long[::1] _keys, _free
    cdef list _handlers, _args
    cdef Py_ssize_t _size
    cdef public long long firing
    cpdef long long earliest(self)
    cpdef push(self, long long when, long long seq, Handler handler, arg)
    cpdef _grow(self)
    cpdef fire_next(self)

cdef class Engine:
    cdef public long long now_ps  # below LAST_PS (2**62): to_ps refuses later times
    cdef ArrayHeap _heap
    cdef long long _seq
    cdef public object events
    cdef bint _halted
    cpdef long long later(self, long long when_ps, Handler handler, arg) except? -1
    cpdef long long firing(self)
    cpdef double seconds(self)

cpdef long long to_ps(double seconds) except? -1
