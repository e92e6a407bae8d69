# Types for the compiled build (compiled.py): Cython compiles switch.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
from rocelab.fabric.model.forwarding cimport Forwarding
from rocelab.fabric.model.ports cimport PortState
from rocelab.labs.sim.engine cimport Engine, Handler, to_ps
from rocelab.labs.sim.link cimport Wire

cdef class PortWake

cdef class SimSwitch:
    cdef public Engine engine
    cdef public Forwarding switch
    cdef public object name, ifaces, trace, _tick_at
    cdef public dict wires
    cdef public long long _tick_gen, _trace_gen, _events, _sampled_events
    cdef public bint _sampling
    cpdef arrive(self, port, bytes frame)
    cpdef arrive_on(self, PortState state, bytes frame)
    cpdef _send(self, list out)
    cpdef _arm_touched(self, PortState state)
    cpdef PortWake _wake_of(self, PortState state)
    cpdef _arm_one(self, PortWake wake)
    cpdef _arm_backlogged(self)
    cpdef _wake(self, PortWake wake)
    cpdef _arm_tick(self)

cdef class PortWake(Handler):
    cdef public SimSwitch shell
    cdef public PortState state
    cdef public Wire wire
    cdef public bint armed
    cdef public long long at, seq
    cpdef fire(self, arg)

cdef class PortIn(Handler):
    cdef public SimSwitch shell
    cdef public PortState state
    cpdef fire(self, frame)
