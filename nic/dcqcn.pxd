# Types for the compiled build (compiled.py): Cython compiles dcqcn.py, unchanged, with
# these declarations; the pure-Python module ignores this file. The NIC calls a reaction
# point's methods in C (nic/qp.pxd types SendFlow.rp). Timers that are None, inf or an
# integer stay Python objects, so both builds compare the same values. So do the rates:
# ``rate`` hands out the float it holds, which a sender's rate series keeps for each point
# (a C double made a new float per point: 42 MB more in sizing-256's all-to-all of 8 KiB).

cdef class NotificationPoint:
    cdef public double interval_s
    cdef public object last_cnp
    cdef public long long cnps_sent
    cpdef bint on_packet(self, now, ce)

cdef class ReactionPoint:
    cpdef on_cnp(self, now)
    cpdef on_bytes_sent(self, n, now)
    cpdef advance(self, now)
    cpdef rate(self, now)
    cpdef next_event(self, now)

cdef class PaperReactionPoint(ReactionPoint):
    cdef public object params, _last_cnp, rc, rt
    cdef public double alpha
    cdef public long long i, j, byte_count, cnps, _alpha_updates
    cpdef on_cnp(self, now)
    cpdef on_bytes_sent(self, n, now)
    cpdef advance(self, now)
    cpdef rate(self, now)
    cpdef next_event(self, now)
    cpdef _next_alpha(self)
    cpdef _next_increase(self)
    cpdef _increase(self)

cdef class FirmwareReactionPoint(ReactionPoint):
    cdef public object params, _origin, _cut_due, _cut_at, _next, rc, rt
    cdef public double alpha
    cdef public long long i, j, byte_count, cnps, _rtt, _period, _timer, _alphas, _done
    cdef public bint _alpha_cnp
    cpdef on_cnp(self, now)
    cpdef on_bytes_sent(self, n, now)
    cpdef advance(self, now)
    cpdef rate(self, now)
    cpdef next_event(self, now)
    cpdef _at(self, now)
    cpdef _next_increase(self)
    cpdef _refresh(self)
    cpdef _run(self, until)
    cpdef _update_alpha(self, until)
    cpdef _cut(self, at)
    cpdef _increase(self)
