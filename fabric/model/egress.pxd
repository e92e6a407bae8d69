# Types for the compiled build (compiled.py): Cython compiles egress.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cimport cython
from rocelab.fabric.model.pause cimport PauseState
from rocelab.fabric.model.scheduler cimport PortScheduler, _Queue
from rocelab.fabric.model.wred cimport Wred

cdef class EgressPort:
    cdef public object name, rand
    cdef public double rate_bps
    cdef public PauseState pause
    cdef public PortScheduler scheduler
    cdef public list wred, _prios, _watchdog_of, _queues, ecn_marked, buffers
    cdef public dict watchdogs
    cdef public object dropped  # a test swaps in a defective one
    cdef public bint mark_at_dequeue, tx_enabled
    @cython.locals(wred=Wred, q=_Queue, depth=cython.longlong)
    cpdef admit(self, Py_ssize_t queue, bytes frame)
    @cython.locals(wred=Wred, q=_Queue, depth=cython.longlong)
    cpdef bytes depart(self, Py_ssize_t queue, bytes frame)
    cpdef count_drop(self, reason, Py_ssize_t queue, n=*)
