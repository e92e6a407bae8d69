"""DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015)
as pure state machines: the notification point (NP, receiver NIC) that turns CE marks into
CNPs, and the reaction point (RP, sender NIC) that cuts and recovers the sending rate.

Time scale (docs/design.md, "Time scale"): the lab runs every port at ``speed / S`` and stretches
data-plane time constants by S, keeping byte quantities unchanged. ``DcqcnParams`` holds the
real-world values; ``DcqcnParams.scaled(S)`` gives the emulated ones: K, T and N times S,
every rate (line rate, R_AI, R_HAI, minimum rate) divided by S, and g, B and F as they are.
Rates are then emulated bits per second, the rate the endpoint actually paces at.

Times are seconds on the caller's clock (monotonic); nothing here reads a clock, sleeps or
touches a socket (principle 4). The event loop asks ``ReactionPoint.next_event`` when to
call again and feeds in CNPs and sent bytes as they happen.
"""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class DcqcnParams:
    """DCQCN parameters, real-world units (seconds, bytes, b/s) unless ``scaled``.

    Defaults are the paper's: g = 1/256, K = T = 55 us, B = 10 MB, F = 5, N = 50 us, and
    R_AI = 40 Mb/s, R_HAI = 200 Mb/s from the authors' simulator at 40 Gb/s, hence the 40 Gb/s
    default line rate. The increase steps are kept as published rather than scaled with the
    line rate: a 100G port that wants the same relative steps passes ``rai_bps`` and
    ``rhai_bps`` (e.g. 100 and 500 Mb/s) explicitly. NVIDIA firmware differs (e.g. a
    different increase timer, a decrease at most every 4 us); ``min_rate_bps`` defaults to
    its floor of 1 Mb/s, since the paper gives none.
    """

    line_rate_bps: float = 40e9
    g: float = 1 / 256  # alpha gain
    k_s: float = 55e-6  # alpha update period without CNP
    t_s: float = 55e-6  # rate increase timer
    b_bytes: int = 10 * 1024 * 1024  # byte counter, the paper's 10 MB (taken as MiB)
    f: int = 5  # fast recovery stages
    rai_bps: float = 40e6  # additive increase step
    rhai_bps: float = 200e6  # hyper increase step
    n_s: float = 50e-6  # NP: at most one CNP per flow per N
    min_rate_bps: float = 1e6

    def __post_init__(self) -> None:
        if not 0 < self.g <= 1:
            raise ValueError(f"g must be in (0, 1], got {self.g}")
        if min(self.k_s, self.t_s, self.n_s) <= 0 or self.b_bytes <= 0 or self.f < 1:
            raise ValueError("K, T, N and B must be positive and F at least 1")
        if not 0 < self.min_rate_bps <= self.line_rate_bps:
            raise ValueError("need 0 < min_rate_bps <= line_rate_bps")

    def scaled(self, scale: float) -> DcqcnParams:
        """The parameters for a lab running at time scale ``scale`` (S): timers x S, rates / S.

        Byte quantities (B) and the dimensionless g and F stay, so the dynamics keep their
        shape in bytes and in emulated time.
        """
        if scale <= 0:
            raise ValueError(f"time scale must be positive, got {scale}")
        return replace(
            self,
            line_rate_bps=self.line_rate_bps / scale,
            k_s=self.k_s * scale,
            t_s=self.t_s * scale,
            n_s=self.n_s * scale,
            rai_bps=self.rai_bps / scale,
            rhai_bps=self.rhai_bps / scale,
            min_rate_bps=self.min_rate_bps / scale,
        )


class NotificationPoint:
    """The receiver side of one flow: when to send a CNP (opcode 0x81) to the sender's QP.

    Paper rule: if CE-marked packets arrived and no CNP was sent for the flow in the last
    N, send one now. So the first CE packet sends at once, later ones within N of that CNP
    are covered by it, and the first CE packet at N or later sends the next one. Unmarked
    packets never do.
    """

    __slots__ = ("interval_s", "last_cnp", "cnps_sent")

    def __init__(self, params: DcqcnParams) -> None:
        self.interval_s = params.n_s
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
    """The sender side of one flow: current rate RC, target rate RT and alpha.

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
