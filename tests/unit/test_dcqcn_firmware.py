"""Firmware DCQCN (nic.dcqcn, FirmwareParams / FirmwareReactionPoint) against a reference:
the HPCC simulator's Mellanox functions (alibaba-edu/High-Precision-Congestion-Control,
simulation/src/point-to-point/model/rdma-hw.cc: UpdateAlphaMlx, ScheduleUpdateAlphaMlx,
cnp_received_mlx, CheckRateDecreaseMlx, ScheduleDecreaseRateMlx, RateIncEventTimerMlx,
RateIncEventMlx, FastRecoveryMlx, ActiveIncreaseMlx, HyperIncreaseMlx), transcribed below
as a small event simulator of one QP with ns-3's clock (integer ns, events ordered by time
then scheduling order). Scripted CNP, byte and time patterns run through both, and the
rate, target rate and alpha must agree at every sample point.

Differences between the transcription and rdma-hw.cc, all deliberate:
- rates are floats (ns-3's DataRate truncates to whole b/s);
- alpha starts at ``initial_alpha`` (HPCC hard-codes 1; the firmware's 1023/1024);
- the decrease cut is ``max(1 - alpha * 2**(10 - gd), min_dec_fac)`` (HPCC: 1 - alpha / 2,
  the same at the firmware defaults gd = 11, min_dec_fac = 50 %);
- ``byte_reset``: HPCC has no byte counter; the extension (marked BYTE below) counts
  byte stages as the firmware documents them, and with it on the phase follows the
  paper's two-counter rule (fast recovery while both stages are under the threshold,
  additive once one reached it, hyper by (min - threshold + 1) steps once both did).
Samples fall between events (HPCC's decrease check runs 1 ns after the alpha update, ours
at the same time, ordered after it), and CNP times avoid that 1 ns. A CNP at the time of a
timer event counts for it (the reference runs the CNP first), bytes sent then do not.
"""
from __future__ import annotations

import heapq
import itertools
import random
from dataclasses import replace

import pytest

from rocelab.nic.dcqcn import (FirmwareReactionPoint, NotificationPoint, PaperReactionPoint,
                               ReactionPoint, reaction_point)
from rocelab.nic.dcqcn_params import DcqcnParams, FirmwareParams

GBPS = 1e9
FIRMWARE_BYTE_RESET = 32767  # what ConnectX firmware ships, the model's default
MBPS = 1e6
US = 1000  # ns


class MlxQp:
    """One QP under HPCC's Mellanox DCQCN; times in ns (``Simulator::Now()``)."""

    def __init__(self, p: FirmwareParams) -> None:
        self.p = p
        self.now = 0
        self._events: list = []
        self._uid = itertools.count()
        # rdma-hw.cc AddQueuePair: m_rate = m_targetRate = the NIC's rate
        self.m_rate = self.m_targetRate = p.line_rate_bps
        self.m_alpha = p.initial_alpha  # rdma-queue-pair.cc: 1
        self.m_first_cnp = True
        self.m_alpha_cnp_arrived = False
        self.m_decrease_cnp_arrived = False
        self.m_rpTimeStage = 0
        self.m_rpTimer = None
        self.byte_stage = 0  # BYTE
        self.byte_counter = 0  # BYTE
        self.cut_once = False  # BYTE: the byte counter runs from the first cut, as the timer

    # ns-3's scheduler: (time, uid) order, Cancel marks the event dead
    def schedule(self, delay_ns: int, fn, *args) -> list:
        event = [self.now + delay_ns, next(self._uid), fn, args, True]
        heapq.heappush(self._events, event)
        return event

    @staticmethod
    def cancel(event) -> None:
        if event is not None:
            event[4] = False

    def run_until(self, t_ns: int, inclusive: bool = True) -> None:
        """Run the events up to ``t_ns`` (``inclusive``: those at ``t_ns`` too); now = t_ns."""
        while self._events and (self._events[0][0] < t_ns
                                or inclusive and self._events[0][0] == t_ns):
            when, _, fn, args, live = heapq.heappop(self._events)
            self.now = when
            if live:
                fn(*args)
        self.now = t_ns

    # --- rdma-hw.cc ----------------------------------------------------------------------
    def UpdateAlphaMlx(self) -> None:
        g = self.p.g
        if self.m_alpha_cnp_arrived:
            self.m_alpha = (1 - g) * self.m_alpha + g
        else:
            self.m_alpha = (1 - g) * self.m_alpha
        self.m_alpha_cnp_arrived = False
        self.ScheduleUpdateAlphaMlx()

    def ScheduleUpdateAlphaMlx(self) -> None:
        self.schedule(round(self.p.dce_tcp_rtt_s * 1e9), self.UpdateAlphaMlx)

    def cnp_received_mlx(self) -> None:
        self.m_alpha_cnp_arrived = True
        self.m_decrease_cnp_arrived = True
        if self.m_first_cnp:
            self.m_alpha = self.p.initial_alpha  # HPCC: 1
            self.m_alpha_cnp_arrived = False
            self.ScheduleUpdateAlphaMlx()
            self.ScheduleDecreaseRateMlx(1)  # 1 ns: after the alpha update
            self.m_targetRate = self.m_rate = 1.0 * self.m_rate  # m_rateOnFirstCNP = 1
            self.m_first_cnp = False

    def CheckRateDecreaseMlx(self) -> None:
        self.ScheduleDecreaseRateMlx(0)
        if self.m_decrease_cnp_arrived:
            clamp = True
            if not self.p.clamp_tgt_rate:
                if self.m_rpTimeStage == 0:
                    clamp = False
            if clamp:
                self.m_targetRate = self.m_rate
            factor = max(1 - self.m_alpha * 2.0 ** (10 - self.p.rpg_gd),
                         self.p.rpg_min_dec_fac / 100)
            self.m_rate = max(self.p.rpg_min_rate_bps, self.m_rate * factor)
            self.m_rpTimeStage = 0
            self.byte_stage = self.byte_counter = 0  # BYTE
            self.cut_once = True  # BYTE
            self.m_decrease_cnp_arrived = False
            self.cancel(self.m_rpTimer)
            self.m_rpTimer = self.schedule(round(self.p.rpg_time_reset_s * 1e9),
                                           self.RateIncEventTimerMlx)

    def ScheduleDecreaseRateMlx(self, delta_ns: int) -> None:
        self.schedule(round(self.p.rate_reduce_monitor_period_s * 1e9) + delta_ns,
                      self.CheckRateDecreaseMlx)

    def RateIncEventTimerMlx(self) -> None:
        self.m_rpTimer = self.schedule(round(self.p.rpg_time_reset_s * 1e9),
                                       self.RateIncEventTimerMlx)
        self.RateIncEventMlx()
        self.m_rpTimeStage += 1

    def RateIncEventMlx(self) -> None:
        if self.p.rpg_byte_reset:  # BYTE: the paper's two-counter rule
            low, high = sorted((self.m_rpTimeStage, self.byte_stage))
            if high < self.p.rpg_threshold:
                self.FastRecoveryMlx()
            elif low < self.p.rpg_threshold:
                self.ActiveIncreaseMlx()
            else:
                self.HyperIncreaseMlx(low - self.p.rpg_threshold + 1)
        elif self.m_rpTimeStage < self.p.rpg_threshold:
            self.FastRecoveryMlx()
        elif self.m_rpTimeStage == self.p.rpg_threshold:
            self.ActiveIncreaseMlx()
        else:
            self.HyperIncreaseMlx()

    def FastRecoveryMlx(self) -> None:
        self.m_rate = (self.m_rate / 2) + (self.m_targetRate / 2)

    def ActiveIncreaseMlx(self) -> None:
        self.m_targetRate += self.p.rpg_ai_rate_bps
        if self.m_targetRate > self.p.line_rate_bps:
            self.m_targetRate = self.p.line_rate_bps
        self.m_rate = (self.m_rate / 2) + (self.m_targetRate / 2)

    def HyperIncreaseMlx(self, steps: int = 1) -> None:  # BYTE: steps
        self.m_targetRate += self.p.rpg_hai_rate_bps * steps
        if self.m_targetRate > self.p.line_rate_bps:
            self.m_targetRate = self.p.line_rate_bps
        self.m_rate = (self.m_rate / 2) + (self.m_targetRate / 2)

    def bytes_sent(self, n: int) -> None:  # BYTE: a stage per byte_reset bytes after a cut
        if not self.cut_once or not self.p.rpg_byte_reset:
            return
        self.byte_counter += n
        while self.byte_counter >= self.p.rpg_byte_reset:
            self.byte_counter -= self.p.rpg_byte_reset
            self.RateIncEventMlx()
            self.byte_stage += 1


# --- scripted comparisons ---------------------------------------------------------------------

def compare(params: FirmwareParams, script: list[tuple[int, str, int]], end_ns: int,
            scale: float = 1.0, sample_ns: int = 500) -> list[tuple[float, float, float]]:
    """Run ``script`` ((time ns, "cnp" | "bytes", n)) through the reference at S = 1 and
    through ``FirmwareReactionPoint`` at ``params.scaled(scale)`` with times x S; assert the
    state agrees at every sample (t = k * sample_ns + sample_ns / 2). Returns the reference's
    (rate, target, alpha) at the samples, for the test to check that it exercised something."""
    ref = MlxQp(params)
    rp = reaction_point(params.scaled(scale))
    assert isinstance(rp, FirmwareReactionPoint)
    samples = [(t, "sample", 0) for t in range(sample_ns // 2, end_ns, sample_ns)]
    trace = []
    for t, kind, n in sorted(script + samples, key=lambda e: e[0]):
        ref.run_until(t, inclusive=kind != "cnp")  # a CNP at t counts for events at t
        now = t * 1e-9 * scale
        if kind == "cnp":
            ref.cnp_received_mlx()
            rp.on_cnp(now)
        elif kind == "bytes":
            ref.bytes_sent(n)
            rp.on_bytes_sent(n, now)
        else:
            rp.advance(now)
            trace.append((ref.m_rate, ref.m_targetRate, ref.m_alpha))
            assert (rp.rc * scale, rp.rt * scale, rp.alpha) == pytest.approx(
                (ref.m_rate, ref.m_targetRate, ref.m_alpha), rel=1e-9), f"at {t} ns"
    return trace


def cuts(trace: list[tuple[float, float, float]]) -> int:
    """Samples whose rate is below the previous sample's."""
    return sum(b[0] < a[0] for a, b in zip(trace, trace[1:]))


def cnp_times(rng: random.Random, start_ns: int, end_ns: int, mean_gap_ns: int) -> list[int]:
    """CNP arrivals with exponential gaps, off the alpha/decrease grid of a first CNP at
    ``start_ns`` (within 2 ns of a whole us from it) and off the sample points."""
    times, t = [start_ns], start_ns
    while True:
        t += max(1, int(rng.expovariate(1 / mean_gap_ns)))
        if t >= end_ns:
            return times
        off = (t - start_ns) % US
        if off <= 2 or off >= US - 2 or abs(t % 500 - 250) <= 2:
            continue
        times.append(t)


def test_single_cnp_cuts_at_the_first_check_then_recovers():
    trace = compare(FirmwareParams(rpg_byte_reset=0), [(10_300, "cnp", 0)], 2_500 * US)
    assert cuts(trace) == 1
    # no timer increase before the cut: the target stays at line rate and the rate returns
    assert {target for _, target, _ in trace} == {100 * GBPS}
    assert min(rate for rate, _, _ in trace) < 52 * GBPS < 99.5 * GBPS < trace[-1][0]


def test_cnp_trains_merge_per_monitor_period():
    """Trains denser than the monitor period: one cut per period, target clamped only after
    a timer increase."""
    script = [(5_300 + k * 1_700, "cnp", 0) for k in range(40)]  # 5.3 .. 71.6 us
    script += [(900_300 + k * 900, "cnp", 0) for k in range(60)]  # after increases
    trace = compare(FirmwareParams(rpg_byte_reset=0), script, 1_600 * US)
    assert 15 + 12 <= cuts(trace) <= 17 + 15  # ~ 66 us / 4 us, then ~ 53 us / 4 us
    assert min(target for _, target, _ in trace) < 100 * GBPS  # the second train clamped


@pytest.mark.parametrize("seed", range(4))
def test_random_cnp_patterns(seed):
    rng = random.Random(seed)
    script = [(t, "cnp", 0) for t in cnp_times(rng, 3_700, 3_000 * US, 25 * US)]
    assert cuts(compare(FirmwareParams(rpg_byte_reset=0), script, 3_000 * US)) > 10


def test_clamp_tgt_rate_always():
    rng = random.Random(7)
    script = [(t, "cnp", 0) for t in cnp_times(rng, 1_100, 2_000 * US, 40 * US)]
    compare(FirmwareParams(rpg_byte_reset=0, clamp_tgt_rate=True), script, 2_000 * US)


def test_other_parameters():
    """Thresholds, gains and steps away from the defaults, and a gd whose cut the minimum
    decrease factor bounds."""
    params = FirmwareParams(line_rate_bps=25e9, rpg_byte_reset=0, rpg_threshold=3,
                            rpg_time_reset_s=55e-6, rpg_ai_rate_bps=40e6,
                            rpg_hai_rate_bps=200e6, dce_tcp_g=960, dce_tcp_rtt_s=3e-6,
                            rate_reduce_monitor_period_s=10e-6, rpg_gd=9, rpg_min_dec_fac=70,
                            rpg_min_rate_bps=100e6, initial_alpha_value=512)
    rng = random.Random(3)
    script = [(t, "cnp", 0) for t in cnp_times(rng, 2_300, 2_000 * US, 60 * US)]
    compare(params, script, 2_000 * US)


@pytest.mark.parametrize("scale", [1000, 3000.0, 0.5])
def test_scaled_runs_the_same_sequence_in_stretched_time(scale):
    rng = random.Random(11)
    script = [(t, "cnp", 0) for t in cnp_times(rng, 4_100, 1_500 * US, 30 * US)]
    compare(FirmwareParams(rpg_byte_reset=0), script, 1_500 * US, scale=scale)


@pytest.mark.parametrize("seed, gap_us, clamp, gbps", [(0, 120, True, 50), (1, 120, True, 50),
                                                       (2, 400, False, 2), (3, 500, False, 1)])
def test_byte_counter_patterns(seed, gap_us, clamp, gbps):
    """Bytes sent in 4 KB frames at ``gbps``, CNPs among them: byte stages, phases by the
    two-counter rule, the counter cleared by each cut. Clamping, or byte stages too
    slow to bring the rate back before a timer increase, keeps the target below line rate,
    where the phases differ."""
    rng = random.Random(100 + seed)
    end = 2_000 * US
    script = [(t, "cnp", 0) for t in cnp_times(rng, 2_200, end, gap_us * US)]
    frame_ns = 4096 * 8 // gbps
    script += [(t, "bytes", 4096) for t in range(2_000, end, frame_ns)
               if abs(t % 500 - 250) > 2]
    params = FirmwareParams(clamp_tgt_rate=clamp, rpg_byte_reset=FIRMWARE_BYTE_RESET)
    trace = compare(params, script, end)
    assert cuts(trace) >= 2
    assert min(target for _, target, _ in trace) < 100 * GBPS


def test_bytes_before_the_first_cut_or_with_the_counter_off_do_nothing():
    for params in (FirmwareParams(rpg_byte_reset=FIRMWARE_BYTE_RESET),
                   FirmwareParams(rpg_byte_reset=0)):
        rp = reaction_point(params)
        rp.on_bytes_sent(10**6, 1e-6)
        assert (rp.rc, rp.rt, rp.j, rp.byte_count) == (100 * GBPS, 100 * GBPS, 0, 0)
    script = [(1_300, "cnp", 0)] + [(t, "bytes", 100_000) for t in range(1_400, 900 * US, 7_000)]
    compare(FirmwareParams(rpg_byte_reset=0), script, 900 * US)


# --- by hand ------------------------------------------------------------------------------

def test_defaults_are_the_firmware_ones():
    """The byte counter included: the swing its 32767 B makes under incast is what the
    firmware's rules produce (tests/unit/test_dcqcn_reference.py, bench/dcqcn_compare.py)."""
    p = FirmwareParams()
    assert (p.rpg_time_reset_s, p.rpg_byte_reset, p.rpg_threshold) == (300e-6, 32767, 1)
    assert (p.rpg_ai_rate_bps, p.rpg_hai_rate_bps, p.rpg_min_rate_bps) == (5e6, 50e6, 1e6)
    assert (p.rpg_gd, p.rpg_min_dec_fac, p.dce_tcp_g, p.initial_alpha_value) == (11, 50, 1019,
                                                                                 1023)
    assert (p.rate_reduce_monitor_period_s, p.dce_tcp_rtt_s, p.min_time_between_cnps_s) == (
        4e-6, 1e-6, 4e-6)
    assert (p.clamp_tgt_rate, p.clamp_tgt_rate_after_time_inc) == (False, True)
    assert p.g == 5 / 1024 and p.initial_alpha == 1023 / 1024
    assert p.cut_factor(1.0) == 0.5 and replace(p, rpg_gd=10).cut_factor(0.8) == 0.5


@pytest.mark.parametrize("params", [DcqcnParams(), FirmwareParams()])
def test_scaled_scales_every_time_and_rate_and_nothing_else(params):
    s = params.scaled(250)
    for name in params.__dataclass_fields__:
        before, after = getattr(params, name), getattr(s, name)
        if name.endswith("_s"):
            assert after == pytest.approx(before * 250), name
        elif name.endswith("_bps"):
            assert after == pytest.approx(before / 250), name
        else:
            assert after == before, name
    assert s.cnp_interval_s == pytest.approx(params.cnp_interval_s * 250)


def test_reaction_point_follows_the_params_mode():
    assert type(reaction_point(FirmwareParams())) is FirmwareReactionPoint
    assert type(reaction_point(DcqcnParams())) is PaperReactionPoint
    assert isinstance(reaction_point(DcqcnParams()), ReactionPoint)


def test_first_cut_waits_for_the_check_with_four_alpha_decays():
    p = FirmwareParams()
    rp = reaction_point(p)
    rp.on_cnp(1.0)
    assert rp.rate(1.0 + 3.9e-6) == 100 * GBPS  # the cut waits for the 4 us check
    assert rp.next_event(1.0) >= 1.0 + 4e-6
    alpha = p.initial_alpha * (1 - p.g) ** 4  # the first CNP raised nothing
    assert rp.rate(1.0 + 4e-6) == pytest.approx(100 * GBPS * (1 - alpha / 2))
    assert rp.rt == 100 * GBPS  # no timer increase yet: the target is not clamped
    assert rp.alpha == pytest.approx(alpha)


def test_next_event_is_reachable_exactly():
    """The time next_event returns is one at which the event has run: a virtual-time loop
    that calls rate() there never spins."""
    rp = reaction_point(FirmwareParams().scaled(3000))
    t0 = 12345.678901
    rp.on_cnp(t0)
    before = rp.rc
    due = rp.next_event(t0)
    assert rp.rate(due) < before
    for _ in range(5):
        after = rp.next_event(due)
        assert after > due
        rate = rp.rc
        assert rp.rate(after) != rate
        due = after


def test_idle_until_the_first_cnp():
    rp = reaction_point(FirmwareParams())
    assert rp.next_event(5.0) is None and rp.rate(5.0) == 100 * GBPS


def test_a_cnp_after_its_check_ran_waits_for_the_next():
    p = FirmwareParams(rpg_byte_reset=0)
    rp = reaction_point(p)
    rp.on_cnp(0.0)
    first = rp.rate(4e-6)
    rp.on_cnp(4e-6)  # the check at 4 us already ran
    assert rp.rc == first
    assert rp.rate(8e-6) < first  # it cuts at 8 us, once
    assert rp.cnps == 2


def test_clamp_after_any_increase_when_not_only_after_time_increases():
    """clamp_tgt_rate_after_time_inc 0 (beyond the reference): a byte increase since the
    last cut is enough to clamp; with 1 it takes a timer increase."""
    for after_time_inc, clamped in ((True, False), (False, True)):
        p = FirmwareParams(rpg_byte_reset=1000, clamp_tgt_rate_after_time_inc=after_time_inc)
        rp = reaction_point(p)
        rp.on_cnp(0.0)
        rp.on_cnp(5e-6)
        cut = rp.rate(4e-6)
        rp.on_bytes_sent(1000, 6e-6)  # a byte stage: fast recovery towards 100G
        assert rp.j == 1 and rp.rc == pytest.approx((cut + 100 * GBPS) / 2)
        before = rp.rc
        rp.advance(8e-6)  # the second CNP's cut
        assert rp.rt == (before if clamped else 100 * GBPS)
        assert rp.rc == pytest.approx(before * p.cut_factor(rp.alpha))


def test_np_uses_min_time_between_cnps():
    np_ = NotificationPoint(FirmwareParams().scaled(1000))
    assert np_.on_packet(0.0, ce=True)
    assert not np_.on_packet(3.9e-3, ce=True)
    assert np_.on_packet(4e-3, ce=True)
    every = NotificationPoint(FirmwareParams(min_time_between_cnps_s=0))
    assert all(every.on_packet(k * 1e-9, ce=True) for k in range(5))


@pytest.mark.parametrize("bad", [dict(rpg_threshold=0), dict(dce_tcp_g=1024),
                                 dict(rpg_min_dec_fac=0), dict(rpg_time_reset_s=0),
                                 dict(rpg_min_rate_bps=200e9), dict(rpg_byte_reset=-1)])
def test_invalid_firmware_params_are_refused(bad):
    with pytest.raises(ValueError):
        FirmwareParams(**bad)
