# Types for the compiled build (compiled.py): Cython compiles cable.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
from libc.math cimport rint

cpdef double whole(double x)

cdef class Cable:
    cdef public double per_byte, delay, free, start
    cdef public bint whole
    cpdef double send(self, Py_ssize_t nbytes, double now)
