# Types for the compiled build (compiled.py): Cython compiles link.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
from rocelab.labs.sim.engine cimport Engine, Handler
from rocelab.fabric.model.cable cimport Cable

cdef class Deliver(Handler):
    cdef public object deliver

cdef class Wire(Handler):
    cdef public Engine engine
    cdef public object src, dst
    cdef public double rate_bps
    cdef public Cable cable
    cdef public Handler deliver
    cdef public bint up
    cdef public list tx_taps, rx_taps
    cdef public long long frames
    cdef public double jitter_rate
    cdef public object rng
    cdef public double last_arrival
    cpdef send(self, bytes frame)
    cpdef fire(self, frame)
