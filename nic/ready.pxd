# Types for the compiled build (compiled.py): Cython compiles ready.py, unchanged, with
# these declarations; the pure-Python module ignores this file. TupleReady, the
# interpreter's form, stays an ordinary class.
cdef class ArrayReady:
    cdef double[::1] _at
    cdef long long[::1] _keys, _free
    cdef list _items
    cdef Py_ssize_t _size
    cpdef push(self, double at_, long long index, long long token, item)
    cpdef first(self)
    cpdef long long first_token(self)
    cpdef double first_at(self)
    cpdef pop(self)
    cpdef _grow(self)
