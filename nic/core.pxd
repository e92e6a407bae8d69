# Types for the compiled build (compiled.py): Cython compiles core.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
from rocelab.nic.pause cimport PauseTimer
from rocelab.nic.qp cimport ReceiveFlow, SendFlow
from rocelab.nic.rc cimport Requester, Responder

cdef class Nic:
    cdef public object settings, params, _seq, max_rate_points, cnp_queue, ack_queue
    cdef public double line_bps, time_scale, rate_sample_s, wire_free, _next_sample
    cdef public long long _unfinished
    cdef public bint late_credit, started
    cdef public PauseTimer pause
    cdef public list senders, _sampling, _ready, _timers
    cdef public dict receivers, by_qpn, gated
