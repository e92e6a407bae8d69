cimport cython
from cpython cimport array as c_array
from rocelab.fabric.model.cable cimport whole
from rocelab.nic.dcqcn cimport NotificationPoint, ReactionPoint
from rocelab.nic.rc cimport Requester, Responder

cdef class SendFlow:
    cdef public object name
    cdef public long long qpn
    cdef public long long peer_qpn
    cdef public Requester rc
    cdef public object headers
    cdef public ReactionPoint rp
    cdef public double line_bps
    cdef public object after
    cdef public long long index
    cdef public double next_at
    cdef public double unblocked_at
    cdef public object last_sent
    cdef public long long last_bits
    cdef public double paced_bps
    cdef public object started
    cdef public object finished
    cdef public long long cnps
    cdef public c_array.array rate_series
    cdef public long long queued
    cdef public object rc_timer
    cdef public object rp_timer
    @cython.locals(series=c_array.array)
    cpdef add_rate_point(self, double at, double rate)
    @cython.locals(series="double[::1]", i=Py_ssize_t, out=list)
    cpdef list rate_series_since(self, double t0)
    cpdef double rate(self, double now)
    cpdef bint retime(self, double now)

cdef class ReceiveFlow:
    cdef public object name
    cdef public long long qpn
    cdef public long long peer_qpn
    cdef public Responder rc
    cdef public long long count
    cdef public object ack_headers
    cdef public object cnp_headers
    cdef public NotificationPoint np
    cdef public long long ce_marked
    cdef public object finished
    cdef public object ack_timer
