"""DCQCN as pure state machines, in two modes: the notification point (NP, receiver NIC) that
turns CE marks into CNPs, and the reaction point (RP, sender NIC) that cuts and recovers the
sending rate.

- ``paper``: the algorithm of Zhu et al., "Congestion Control for Large-Scale RDMA
  Deployments", SIGCOMM 2015 (``PaperReactionPoint``): a CNP cuts at once, alpha decays
  every K without a CNP, timer and byte stages as published.
- ``firmware``: DCQCN as ConnectX firmware runs it (``FirmwareReactionPoint``), parameters
  named as ``mlxconfig`` names them. Cuts are merged to at most one per
  ``rate_reduce_monitor_period``, alpha is updated every ``dce_tcp_rtt`` (up if a CNP came
  in that period, down otherwise), the target rate is clamped to the current one only after
  a timer increase, and the increase phases follow the stage counters
  (docs/concepts.md, "DCQCN: the paper and the firmware"; the HPCC simulator's
  ``*Mlx`` functions in rdma-hw.cc are the public model of it that the unit tests compare
  with, event by event).

``reaction_point(params)`` builds the RP of the params' mode and ``NotificationPoint(params)``
takes either, so the NIC does not care which mode runs.

The parameters of both modes, and how they follow the lab's time scale, are in
``nic.dcqcn_params``.

Times are seconds on the caller's clock (monotonic); nothing here reads a clock, sleeps or
touches a socket (principle 4). The event loop asks ``ReactionPoint.next_event`` when the
rate may next change and feeds in CNPs and sent bytes as they happen.
"""
from __future__ import annotations

import math

from .dcqcn_params import DcqcnParams, FirmwareParams


class NotificationPoint:
    """The receiver side of one flow: when to send a CNP (opcode 0x81) to the sender's QP.

    If CE-marked packets arrived and no CNP was sent for the flow in the last interval (the
    paper's N, the firmware's ``min_time_between_cnps``), send one now. So the first CE
    packet sends at once, later ones within the interval of that CNP are covered by it, and
    the first CE packet at the interval or later sends the next one. Unmarked packets never
    do.
    """

    __slots__ = ("interval_s", "last_cnp", "cnps_sent")

    def __init__(self, params: DcqcnParams | FirmwareParams) -> None:
        self.interval_s = params.cnp_interval_s
        self.last_cnp: float | None = None  # when this flow last sent a CNP
        self.cnps_sent = 0

    def on_packet(self, now: float, ce: bool) -> bool:
        """A packet of the flow arrived at ``now``; True: send a CNP now."""
        if not ce or (self.last_cnp is not None and now - self.last_cnp < self.interval_s):
            return False
        self.last_cnp = now
        self.cnps_sent += 1
        return True


class ReactionPoint:
    """The sender side of one flow: current rate ``rc``, target rate ``rt`` and ``alpha``.

    ``reaction_point(params)`` is a ``PaperReactionPoint`` for ``DcqcnParams`` and a
    ``FirmwareReactionPoint`` for ``FirmwareParams``. Both answer the calls below, and count
    ``cnps``. (A base class rather than a protocol: the compiled NIC calls them in C.)
    """

    __slots__ = ()

    def on_cnp(self, now: float) -> None:
        """A CNP arrived at ``now``."""
        raise NotImplementedError

    def on_bytes_sent(self, n: int, now: float) -> None:
        """``n`` bytes left at ``now``."""
        raise NotImplementedError

    def advance(self, now: float) -> None:
        """Apply the timer events due at or before ``now``."""
        raise NotImplementedError

    def rate(self, now: float) -> float:
        """The rate (b/s) to pace at from ``now``."""
        raise NotImplementedError

    def next_event(self, now: float) -> float | None:
        """When the rate may change next; None: not until a CNP."""
        raise NotImplementedError


def reaction_point(params: DcqcnParams | FirmwareParams) -> ReactionPoint:
    """The RP of the params' mode."""
    if isinstance(params, FirmwareParams):
        return FirmwareReactionPoint(params)
    return PaperReactionPoint(params)


class PaperReactionPoint(ReactionPoint):
    """The paper's RP.

    The flow starts unlimited at line rate with alpha = 1 (paper) and the RP stays idle
    until the first CNP, so neither timer runs nor bytes count before congestion was ever
    signalled. From then on two timers run from the last CNP:

    - every K without a CNP, alpha = (1 - g) * alpha;
    - every T, a timer increase event (stage i); and every B bytes sent, a byte increase
      event (stage j).

    A CNP restarts both timers and clears i, j and the byte counter (paper, Fig. 7). An
    increase event checks the stages *before* counting itself (as the authors' and HPCC's
    simulators do), so the first F events after a CNP are fast recovery. Rates stay within
    [min rate, line rate].
    """

    __slots__ = ("params", "rc", "rt", "alpha", "i", "j", "byte_count", "cnps",
                 "_last_cnp", "_alpha_updates")

    def __init__(self, params: DcqcnParams) -> None:
        self.params = params
        self.rc = params.line_rate_bps  # current rate
        self.rt = params.line_rate_bps  # target rate
        self.alpha = 1.0
        self.i = 0  # timer stages since the last CNP
        self.j = 0  # byte stages since the last CNP
        self.byte_count = 0  # bytes sent towards the next byte stage
        self.cnps = 0
        self._last_cnp: float | None = None  # None: idle, no CNP yet
        self._alpha_updates = 0  # alpha decays applied since the last CNP

    def on_cnp(self, now: float) -> None:
        """A CNP arrived: cut the rate with the current alpha, then raise alpha.

        Paper: RT = RC; RC = RC * (1 - alpha/2); alpha = (1 - g) * alpha + g. Events due
        before ``now`` are applied first so that the cut uses the alpha of that moment.
        """
        self.advance(now)
        p = self.params
        self.rt = self.rc
        self.rc = max(self.rc * (1 - self.alpha / 2), p.min_rate_bps)
        self.alpha = (1 - p.g) * self.alpha + p.g
        self.i = self.j = self.byte_count = 0
        self._last_cnp = now
        self._alpha_updates = 0
        self.cnps += 1

    def on_bytes_sent(self, n: int, now: float) -> None:
        """``n`` bytes left at ``now``: every B bytes since the last CNP is a byte stage."""
        self.advance(now)
        if self._last_cnp is None:
            return
        self.byte_count += n
        while self.byte_count >= self.params.b_bytes:
            self.byte_count -= self.params.b_bytes
            self._increase()
            self.j += 1

    def advance(self, now: float) -> None:
        """Apply, in time order, every alpha decay and timer increase due at or before ``now``.

        Event times are computed from the last CNP (last + n * period), not accumulated, so
        long runs do not drift. At equal times the alpha decay goes first; the two commute.
        """
        if self._last_cnp is None:
            return
        while True:
            alpha_at = self._next_alpha()
            increase_at = self._next_increase()
            if min(alpha_at, increase_at) > now:
                return
            if alpha_at <= increase_at:
                self.alpha *= 1 - self.params.g
                self._alpha_updates += 1
            else:
                self._increase()
                self.i += 1

    def rate(self, now: float) -> float:
        """The rate (b/s) to pace at from ``now``: RC after the events due by ``now``."""
        self.advance(now)
        return self.rc

    def next_event(self, now: float) -> float | None:
        """When the next timer fires after ``now`` (None while idle), for the event loop."""
        self.advance(now)
        if self._last_cnp is None:
            return None
        return min(self._next_alpha(), self._next_increase())

    def _next_alpha(self) -> float:
        assert self._last_cnp is not None
        return self._last_cnp + (self._alpha_updates + 1) * self.params.k_s

    def _next_increase(self) -> float:
        assert self._last_cnp is not None
        return self._last_cnp + (self.i + 1) * self.params.t_s

    def _increase(self) -> None:
        """One increase event, by the stages reached so far (paper, Section 4.2).

        Hyper increase when both i and j reached F: RT += R_HAI * (min(i, j) - F + 1);
        additive when exactly one did: RT += R_AI; fast recovery otherwise, RT unchanged.
        In every case RC moves halfway to RT. RT is capped at line rate, and RC never
        exceeds RT (a cut starts from RC = RT, and halving the gap keeps it below), so RC
        never exceeds line rate either.
        """
        p = self.params
        if min(self.i, self.j) >= p.f:
            self.rt += p.rhai_bps * (min(self.i, self.j) - p.f + 1)
        elif max(self.i, self.j) >= p.f:
            self.rt += p.rai_bps
        self.rt = min(self.rt, p.line_rate_bps)
        self.rc = (self.rt + self.rc) / 2


_PS = 1e12  # the firmware RP keeps its timers in integer picoseconds
_NEVER = math.inf


class FirmwareReactionPoint(ReactionPoint):
    """The firmware's RP (the HPCC simulator's ``*Mlx`` functions, plus the byte counter).

    Idle at line rate until the first CNP, which starts two periodic grids from its arrival
    t0 and cuts nothing by itself:

    - alpha, every ``dce_tcp_rtt`` (t0 + n * rtt): alpha = (1 - g) * alpha + g if a CNP
      arrived since the previous update, (1 - g) * alpha otherwise. alpha starts at
      ``initial_alpha_value`` / 1024, and the first CNP does not count as a raise;
    - the decrease check, every ``rate_reduce_monitor_period`` (t0 + n * period): if a CNP
      arrived since the previous check, cut once: RT = RC when clamping applies (see
      ``FirmwareParams``), RC = max(min rate, RC * cut factor), the stages and the byte
      counter cleared and the increase timer restarted. CNPs within one period merge.

    From the first cut on, the increase timer fires every ``rpg_time_reset`` after the last
    cut (time stage i), and every ``rpg_byte_reset`` bytes sent is a byte stage (j). An
    increase event looks at the stages reached *before* it counts itself: fast recovery
    while max(i, j) < F (RC = (RC + RT) / 2), additive once one counter reached F (RT += ai
    rate), hyper only once both did (RT += hai rate x (min(i, j) - F + 1)), the paper's
    two-counter rule, which the firmware's parameters keep; RT capped at line rate and RC
    halfway to it after either. With the byte counter off the timer decides alone, as in
    the reference simulator: additive at i = F, hyper (RT += hai rate) above. (Hyper on
    the byte counter alone, as this model once had it, is what an independent reading,
    ``nic.dcqcn_reference``, found: ``bench/dcqcn_compare.py``.) The grids never stop once
    started, as in the reference simulator.

    At equal times the order is alpha, increase, decrease (HPCC offsets the decrease check
    by 1 ns so it follows the alpha update, and the increase timer was scheduled first), and
    a CNP at ``now`` counts for every timer event at ``now``. Timer arithmetic runs in
    integer picoseconds from the first CNP, so grids that coincide tie exactly.
    """

    __slots__ = ("params", "rc", "rt", "alpha", "i", "j", "byte_count", "cnps", "_origin",
                 "_rtt", "_period", "_timer", "_alphas", "_alpha_cnp", "_cut_due", "_cut_at",
                 "_next", "_done")

    def __init__(self, params: FirmwareParams) -> None:
        self.params = params
        self.rc = params.line_rate_bps
        self.rt = params.line_rate_bps
        self.alpha = params.initial_alpha
        self.i = 0  # timer stages since the last cut
        self.j = 0  # byte stages since the last cut
        self.byte_count = 0
        self.cnps = 0
        self._origin: float | None = None  # the first CNP's time; None: idle
        self._rtt = _ps(params.dce_tcp_rtt_s)
        self._period = _ps(params.rate_reduce_monitor_period_s)
        self._timer = _ps(params.rpg_time_reset_s)
        self._alphas = 0  # alpha updates applied (the next is at (n + 1) * rtt)
        self._alpha_cnp = False  # a CNP arrived since the last alpha update
        self._cut_due: float = _NEVER  # the decrease check that will cut (a CNP is pending)
        self._cut_at: int | None = None  # the last cut; None: none yet, no increase timer
        self._next: float = _NEVER  # earliest timer event, ps from the origin
        self._done = -1  # every event at or before this time (ps) has run

    # -- the interface ----------------------------------------------------------------------

    def on_cnp(self, now: float) -> None:
        """A CNP arrived: marked for the next alpha update and the next decrease check."""
        self.cnps += 1
        if self._origin is None:
            self._origin = now
            self._alpha_cnp = False
            self._cut_due = self._period
            self._refresh()
            return
        # events before the CNP see the state without it; if those at ``now`` already ran
        # (an earlier call at the same time), the CNP counts for the next ones
        at = max(self._at(now), self._done + 1)
        self._run(at - 1)
        self._alpha_cnp = True
        if self._cut_due == _NEVER:
            self._cut_due = max(1, -(-at // self._period)) * self._period
            self._refresh()

    def on_bytes_sent(self, n: int, now: float) -> None:
        """``n`` bytes left at ``now``: every ``rpg_byte_reset`` bytes since the last cut is
        a byte stage (none before the first cut, or with the counter off)."""
        self.advance(now)
        reset = self.params.rpg_byte_reset
        if self._cut_at is None or not reset:
            return
        self.byte_count += n
        while self.byte_count >= reset:
            self.byte_count -= reset
            self._increase()
            self.j += 1

    def advance(self, now: float) -> None:
        """Apply, in time order, every timer event due at or before ``now``."""
        if self._origin is not None:
            self._run(self._at(now))

    def rate(self, now: float) -> float:
        """The rate (b/s) to pace at from ``now``."""
        if self._origin is not None:
            self._run(self._at(now))
        return self.rc

    def next_event(self, now: float) -> float | None:
        """When the rate may change next: the pending cut or the next increase (alpha alone
        changes no rate, so it wakes nobody). None while idle."""
        self.advance(now)
        due = min(self._cut_due, self._next_increase())
        if due == _NEVER:
            return None
        assert self._origin is not None
        # the earliest clock reading that ``_at`` maps to ``due`` or later
        when = self._origin + due / _PS
        while self._at(when) < due:
            when = math.nextafter(when, math.inf)
        return when

    # -- timers ---------------------------------------------------------------------------

    def _at(self, now: float) -> int:
        assert self._origin is not None
        return round((now - self._origin) * _PS)

    def _next_increase(self) -> float:
        return _NEVER if self._cut_at is None else self._cut_at + (self.i + 1) * self._timer

    def _refresh(self) -> None:
        self._next = min((self._alphas + 1) * self._rtt, self._cut_due, self._next_increase())

    def _run(self, until: int) -> None:
        """Every event at or before ``until`` (ps from the origin), in order."""
        while self._next <= until:
            increase_at = self._next_increase()
            event = min(increase_at, self._cut_due)
            self._update_alpha(min(event, until))  # alpha first at equal times
            if event <= until:
                if increase_at <= self._cut_due:
                    self._increase()
                    self.i += 1
                else:
                    self._cut(self._cut_due)
            self._refresh()
        self._done = max(self._done, until)

    def _update_alpha(self, until: int) -> None:
        """The alpha updates at or before ``until``, in closed form: the first of them takes
        the CNP flag, the rest decay."""
        count = until // self._rtt - self._alphas
        if count <= 0:
            return
        g = self.params.g
        self._alphas += count
        if self._alpha_cnp:
            self.alpha = (1 - g) * self.alpha + g
            self._alpha_cnp = False
            count -= 1
        self.alpha *= (1 - g) ** count

    def _cut(self, at: int) -> None:
        p = self.params
        if p.clamp_tgt_rate or self.i > 0 or (not p.clamp_tgt_rate_after_time_inc and self.j > 0):
            self.rt = self.rc
        self.rc = max(p.rpg_min_rate_bps, self.rc * p.cut_factor(self.alpha))
        self.i = self.j = self.byte_count = 0
        self._cut_at = at
        self._cut_due = _NEVER

    def _increase(self) -> None:
        p, f = self.params, self.params.rpg_threshold
        if not p.rpg_byte_reset:  # the timer alone, as the reference simulator
            if self.i == f:
                self.rt += p.rpg_ai_rate_bps
            elif self.i > f:
                self.rt += p.rpg_hai_rate_bps
        elif min(self.i, self.j) >= f:  # hyper only once both counters passed F
            self.rt += p.rpg_hai_rate_bps * (min(self.i, self.j) - f + 1)
        elif max(self.i, self.j) >= f:
            self.rt += p.rpg_ai_rate_bps
        self.rt = min(self.rt, p.line_rate_bps)
        self.rc = (self.rc + self.rt) / 2


def _ps(seconds: float) -> int:
    return round(seconds * _PS)
