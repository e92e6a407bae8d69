# Types for the compiled build (compiled.py): Cython compiles switch.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
from rocelab.fabric.model.buffers cimport PgBuffer, SharedPool
from rocelab.fabric.model.counters cimport PortCounters
from rocelab.fabric.model.egress cimport EgressPort
from rocelab.fabric.model.egress_buffers cimport QueueBuffer
from rocelab.fabric.model.ports cimport PortState
from rocelab.fabric.model.scheduler cimport PortScheduler

cdef class Charge:
    cdef public PgBuffer buffer
    cdef public long long nbytes, copies
