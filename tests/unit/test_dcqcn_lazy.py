"""The firmware reaction point is lazy (nic.dcqcn, FirmwareReactionPoint): it wakes its
NIC only when something observable changes (a decrease check with a CNP pending, an
increase timer), never for an alpha update (every ``dce_tcp_rtt``, 1 us by default), and
catches alpha up in closed form whenever it is asked.

``EagerRp`` below is the eager version it must agree with: every alpha update, every
decrease check and every increase timer run one by one on their grids, alpha multiplied by
(1 - g) once per period. Its only difference from the lazy one is that arithmetic: the lazy
RP applies k decays at once as ``(1 - g) ** k``, which is within a few ulp of k single
multiplications (an error that grows with k, about 1e-14 relative after 1e5 periods; see
``test_closed_form_alpha_stays_within_a_few_ulp``), so floats are compared to 1e-12 and
everything discrete (stages, byte counter, CNP count) exactly.
"""
from __future__ import annotations

import math
import random

import pytest

from rocelab.nic.dcqcn import reaction_point
from rocelab.nic.dcqcn_params import FirmwareParams

PS = 10**12
US = 1e-6


class EagerRp:
    """Firmware DCQCN stepped period by period (the eager logic, for reference): timers in
    integer ps from the first CNP, at equal times alpha, then increase, then decrease."""

    def __init__(self, p: FirmwareParams) -> None:
        self.p = p
        self.rc = self.rt = p.line_rate_bps
        self.alpha = p.initial_alpha
        self.i = self.j = self.byte_count = self.cnps = 0
        self.origin: float | None = None
        self.rtt = round(p.dce_tcp_rtt_s * PS)
        self.period = round(p.rate_reduce_monitor_period_s * PS)
        self.timer = round(p.rpg_time_reset_s * PS)
        self.next_alpha = self.next_check = 0
        self.next_increase: float = math.inf
        self.alpha_cnp = self.decrease_cnp = False
        self.done = -1
        self.wakes = 0  # timer events run (what an eager RP would wake its NIC for)

    def _at(self, now: float) -> int:
        assert self.origin is not None
        return round((now - self.origin) * PS)

    def _run(self, until: int) -> None:
        while min(self.next_alpha, self.next_check, self.next_increase) <= until:
            self.wakes += 1
            g = self.p.g
            if self.next_alpha <= min(self.next_check, self.next_increase):
                self.alpha = (1 - g) * self.alpha + g if self.alpha_cnp else (1 - g) * self.alpha
                self.alpha_cnp = False
                self.next_alpha += self.rtt
            elif self.next_increase <= self.next_check:
                self._increase()
                self.i += 1
                self.next_increase += self.timer
            else:
                if self.decrease_cnp:
                    self._cut(self.next_check)
                self.next_check += self.period
        self.done = max(self.done, until)

    def _cut(self, at: int) -> None:
        p = self.p
        if p.clamp_tgt_rate or self.i > 0 or (not p.clamp_tgt_rate_after_time_inc and self.j > 0):
            self.rt = self.rc
        self.rc = max(p.rpg_min_rate_bps, self.rc * p.cut_factor(self.alpha))
        self.i = self.j = self.byte_count = 0
        self.decrease_cnp = False
        self.next_increase = at + self.timer

    def _increase(self) -> None:
        p, f = self.p, self.p.rpg_threshold
        if not p.rpg_byte_reset:
            if self.i == f:
                self.rt += p.rpg_ai_rate_bps
            elif self.i > f:
                self.rt += p.rpg_hai_rate_bps
        elif min(self.i, self.j) >= f:
            self.rt += p.rpg_hai_rate_bps * (min(self.i, self.j) - f + 1)
        elif max(self.i, self.j) >= f:
            self.rt += p.rpg_ai_rate_bps
        self.rt = min(self.rt, p.line_rate_bps)
        self.rc = (self.rc + self.rt) / 2

    def on_cnp(self, now: float) -> None:
        self.cnps += 1
        if self.origin is None:
            self.origin = now
            self.next_alpha, self.next_check = self.rtt, self.period
            self.decrease_cnp = True
            return
        self._run(max(self._at(now), self.done + 1) - 1)
        self.alpha_cnp = self.decrease_cnp = True

    def advance(self, now: float) -> None:
        if self.origin is not None:
            self._run(self._at(now))

    def advance_before(self, now: float) -> None:
        """Every event strictly before ``now`` (the picosecond before it)."""
        if self.origin is not None:
            self._run(self._at(now) - 1)

    def on_bytes_sent(self, n: int, now: float) -> None:
        self.advance(now)
        reset = self.p.rpg_byte_reset
        if self.next_increase == math.inf or not reset:
            return
        self.byte_count += n
        while self.byte_count >= reset:
            self.byte_count -= reset
            self._increase()
            self.j += 1


def same_state(lazy, eager: EagerRp, where: str) -> None:
    assert (lazy.i, lazy.j, lazy.byte_count, lazy.cnps) == (
        eager.i, eager.j, eager.byte_count, eager.cnps), where
    assert (lazy.rc, lazy.rt, lazy.alpha) == pytest.approx(
        (eager.rc, eager.rt, eager.alpha), rel=1e-12, abs=1e-300), where


def test_an_idle_qp_never_wakes():
    """No CNP yet: nothing to do, at any time, however long."""
    rp = reaction_point(FirmwareParams())
    for now in (0.0, 1e-6, 1.0, 3600.0):
        assert rp.next_event(now) is None
        assert rp.rate(now) == 100e9
    assert rp.alpha == FirmwareParams().initial_alpha


def test_after_its_cut_a_qp_wakes_only_for_its_increase_timer():
    """One CNP, one cut, then silence: every wake-up is on the increase timer's grid from
    the cut (300 us), none on the alpha grid (1 us) or the decrease grid (4 us), while the
    eager version runs an event every microsecond; alpha is caught up whenever asked."""
    p = FirmwareParams(rpg_byte_reset=0)
    lazy, eager = reaction_point(p), EagerRp(p)
    t0 = 0.25
    lazy.on_cnp(t0)
    eager.on_cnp(t0)
    cut = lazy.next_event(t0)
    assert cut == pytest.approx(t0 + p.rate_reduce_monitor_period_s)
    lazy.advance(cut)
    wakes, now, end = [], cut, t0 + 3e-3
    while (event := lazy.next_event(now)) is not None and event <= end:
        assert event > now
        wakes.append(event)
        now = event
        lazy.advance(now)
        eager.advance(now)
        same_state(lazy, eager, f"at {now}")
    grid = [cut + k * p.rpg_time_reset_s for k in range(1, len(wakes) + 1)]
    assert wakes == pytest.approx(grid)
    assert len(wakes) == int((end - cut) / p.rpg_time_reset_s)
    assert eager.wakes > 2_500  # what the lazy RP did not wake for
    assert lazy.rc > 99.9e9  # recovered, with nothing but its timer's wake-ups


def test_a_pending_cnp_wakes_at_its_decrease_check_not_before():
    p = FirmwareParams()
    rp = reaction_point(p)
    rp.on_cnp(0.0)
    rp.advance(5e-6)  # the first cut, at 4 us
    rp.on_cnp(9.5e-6)
    assert rp.next_event(9.5e-6) == pytest.approx(12e-6)  # the next 4 us check
    rp.advance(100e-6)
    assert rp.next_event(100e-6) == pytest.approx(12e-6 + p.rpg_time_reset_s)


def random_script(rng: random.Random, p: FirmwareParams, end: float) -> list[tuple]:
    """CNP bursts and quiet spells, frames sent at random, and queries at random times,
    on and off the timer grids (exact multiples of 1 us from the first CNP included)."""
    script: list[tuple] = [(0.0, "cnp", 0)]
    t = 0.0
    while t < end:
        t += rng.choice([rng.uniform(0.2, 6) * US, rng.uniform(20, 700) * US])
        for _ in range(rng.randint(1, 6)):
            script.append((t + rng.uniform(0, 15) * US, "cnp", 0))
    for _ in range(400):
        t = rng.uniform(0, end)
        script.append((t, "bytes", rng.choice([1024, 4096, 40_000])))
        script.append((rng.uniform(0, end), "query", 0))
        script.append((rng.randint(0, int(end / US)) * US, "query", 0))  # on the 1 us grid
    return sorted(script, key=lambda e: e[0])


@pytest.mark.parametrize("seed, params, scale", [
    (1, FirmwareParams(rpg_byte_reset=32767), 1),  # the firmware's own byte counter
    (2, FirmwareParams(rpg_byte_reset=0), 1),
    (3, FirmwareParams(clamp_tgt_rate=True, rpg_threshold=3), 1),
    (4, FirmwareParams(clamp_tgt_rate_after_time_inc=False, dce_tcp_rtt_s=3e-6,
                       rate_reduce_monitor_period_s=10e-6, rpg_time_reset_s=55e-6,
                       dce_tcp_g=960, rpg_gd=9, rpg_min_dec_fac=70, rpg_byte_reset=10_000), 1),
    (5, FirmwareParams(rpg_byte_reset=32767).scaled(3000), 3000),
])
def test_lazy_matches_the_eager_version_at_every_query(seed, params, scale):
    """After CNPs, at every query (on a CNP, on bytes sent, at an arbitrary time and at each
    time next_event reports) the lazy RP has the eager one's state; and up to the picosecond
    before each next_event it reports, the eager RP's rate and target have not moved, so the
    NIC misses nothing by sleeping until then."""
    rng = random.Random(seed)
    end = 3e-3
    script = [(t * scale, kind, n) for t, kind, n in random_script(rng, params, end)]
    lazy, eager = reaction_point(params), EagerRp(params)
    lazy.on_cnp(script[0][0])
    eager.on_cnp(script[0][0])
    now, checked, wakes = script[0][0], 0, 0
    for t, kind, n in script[1:] + [(end * scale, "query", 0)]:
        while (due := lazy.next_event(now)) is not None and due <= t:
            eager.advance_before(due)
            assert (eager.rc, eager.rt) == pytest.approx((lazy.rc, lazy.rt), rel=1e-12), (
                f"the rate moved before the wake-up at {due}")
            now = due
            lazy.advance(now)
            eager.advance(now)
            same_state(lazy, eager, f"wake-up at {now}")
            wakes += 1
        eager.advance_before(t)
        assert (eager.rc, eager.rt) == pytest.approx((lazy.rc, lazy.rt), rel=1e-12), (
            f"the rate moved between {now} and {t} with no wake-up reported")
        now = t
        if kind == "cnp":
            lazy.on_cnp(t)
            eager.on_cnp(t)
        elif kind == "bytes":
            lazy.on_bytes_sent(n, t)
            eager.on_bytes_sent(n, t)
        else:
            eager.advance(t)
            assert lazy.rate(t) == pytest.approx(eager.rc, rel=1e-12)
        same_state(lazy, eager, f"{kind} at {t}")
        checked += 1
    assert checked > 1000 and lazy.cnps > 20 and wakes > 20
    assert wakes * 5 < eager.wakes  # the eager version woke for much more


def test_closed_form_alpha_stays_within_a_few_ulp():
    """k decays as (1 - g) ** k against k multiplications: equal for small k, and the gap
    stays far below the 1e-9 the HPCC reference tests allow and the 1e-12 used here."""
    for g in (5 / 1024, 64 / 1024, 1 / 1024):
        for k in (1, 2, 7, 100, 10_000, 300_000):
            step = 1023 / 1024
            for _ in range(k):
                step = (1 - g) * step
            closed = 1023 / 1024 * (1 - g) ** k
            assert closed == pytest.approx(step, rel=1e-12, abs=1e-300), (g, k)
