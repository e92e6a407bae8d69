# Types for the compiled build (compiled.py): Cython compiles host.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
from rocelab.labs.sim.engine cimport Engine, Handler, to_ps
from rocelab.labs.sim.link cimport Wire
from rocelab.nic.core cimport Nic

cdef class SimHost(Handler):
    cdef public Engine engine
    cdef public object name, config, macs, arp_retry_ps, nic_iface
    cdef public Nic nic
    cdef public Wire nic_wire
    cdef public dict wires, neighbours, _waiting, replies, _mine6, _groups6
    cdef public long long _seq, seen, _wake_at
    cdef public bint _wake_armed
    cpdef arrive(self, iface, bytes frame)
    cpdef kick(self)
    cpdef fire(self, arg)

cdef class IfaceIn(Handler):
    cdef public SimHost host
    cdef public object iface
    cpdef fire(self, frame)
