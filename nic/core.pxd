# Types for the compiled build (compiled.py): Cython compiles core.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
from rocelab.nic.codec cimport Incoming, ack_frame, data_frame, parse
from rocelab.nic.pause cimport PauseTimer
from rocelab.nic.qp cimport ReceiveFlow, SendFlow
from rocelab.nic.ready cimport ArrayReady
from rocelab.nic.rc cimport Reply, Requester, Responder, Segment

cdef class Nic:
    cdef public object settings, params, _seq, cnp_queue, ack_queue
    cdef public long long max_rate_points
    cdef public double line_bps, time_scale, rate_sample_s, wire_free, _next_sample
    cdef public long long _unfinished
    cdef public bint late_credit, started
    cdef public PauseTimer pause
    cdef public list senders, _sampling
    cdef public ArrayReady _ready, _timers
    cdef public dict receivers, by_qpn, gated
    # the per-frame methods, called in C from each other and from the simulator's host
    cpdef bint receive(self, frame, double now)
    cpdef _on_data(self, ReceiveFlow flow, Incoming incoming, double now)
    cpdef _reply(self, ReceiveFlow flow, double now, Reply reply)
    cpdef dequeue(self, double now)
    cpdef bytes _occupy(self, bytes frame, double now, double earliest)
    cpdef _offer(self, SendFlow flow)
    cpdef _first_ready(self)
    cpdef _after_rc(self, SendFlow flow, double now)
    cpdef _arm(self, flow, long long kind, due)
    cpdef double _first_timer(self, double now) except? -1
    cpdef _follow_rate(self, SendFlow flow, double now)
    cpdef _arm_rp(self, SendFlow flow, double now)
    cpdef poll(self, double now)
    cpdef next_wake(self, double now)
    cpdef double wake_at(self, double now) except? -1
    cpdef bint _sample_rate(self, SendFlow flow, double now)
