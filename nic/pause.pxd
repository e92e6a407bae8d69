# Types for the compiled build (compiled.py): Cython compiles pause.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
from rocelab.nic.roce cimport mac_control

cdef class PauseTimer:
    cdef public object priority
    cdef public double quantum_s, until, began, paused_s
    cdef public dict received
    cpdef bint on_frame(self, bytes frame, double now)
    cpdef settle(self, double now)
