"""The independent firmware reaction point (nic.dcqcn_reference) by hand, and ours
(nic.dcqcn) against it event by event (bench/dcqcn_compare.py's comparison) on scripted
incast-like sequences with the firmware's byte counter."""
from __future__ import annotations

import random

import pytest

from rocelab.bench.dcqcn_compare import DEFAULT_LAB, compare, record
from rocelab.nic.dcqcn import reaction_point
from rocelab.nic.dcqcn_params import FirmwareParams
from rocelab.nic.dcqcn_reference import MlxParams, ReferenceReactionPoint
from rocelab.nic.settings import FIRMWARE_DEFAULTS

GBPS = 1e9
MBPS = 1e6
US = 1e-6
LINE = 100 * GBPS
FRAME = 4154  # a 4096-byte RoCE payload's frame


def ref(**fields) -> ReferenceReactionPoint:
    return ReferenceReactionPoint(MlxParams(**fields))


def test_idle_at_line_rate_until_the_first_cnp():
    rp = ref()
    rp.on_bytes_sent(10**7, 1e-3)
    assert rp.rate(1.0) == LINE and rp.next_timer_ps() is None and rp.j == 0


def test_the_first_cnp_cuts_by_alpha_over_two_at_once():
    rp = ref()
    rp.on_cnp(10 * US)
    assert rp.rc == pytest.approx(LINE * (1 - 1023 / 1024 / 2))
    assert rp.rt == LINE and rp.alpha == 1023 / 1024


def test_cnps_within_the_monitor_period_merge_into_one_cut_at_its_end():
    rp = ref()
    rp.on_cnp(0.0)
    first = rp.rc
    rp.on_cnp(1 * US)
    rp.on_cnp(2 * US)
    assert rp.rate(3.9 * US) == first
    assert rp.rate(4 * US) < first
    second = rp.rc
    assert rp.rate(7.9 * US) == second  # one cut for both


def test_grid_cuts_wait_for_the_next_monitor_check():
    rp = ReferenceReactionPoint(MlxParams(), grid_cuts=True)
    rp.on_cnp(1 * US)
    assert rp.rate(4.9 * US) == LINE
    assert rp.rate(5 * US) < LINE
    rp.on_cnp(5.5 * US)
    cut = rp.rc
    assert rp.rate(8.9 * US) == cut and rp.rate(9 * US) < cut


def test_alpha_rises_with_a_cnp_in_the_period_and_decays_without():
    rp = ref()
    g = 5 / 1024
    rp.on_cnp(0.0)
    rp.on_cnp(0.5 * US)
    rp.advance(1 * US)
    assert rp.alpha == pytest.approx((1 - g) * 1023 / 1024 + g)
    after = rp.alpha
    rp.advance(11 * US)
    assert rp.alpha == pytest.approx(after * (1 - g) ** 10)


def test_the_cut_keeps_min_dec_fac_and_the_floor():
    rp = ref(rpg_gd=10, rpg_min_dec_fac=70)
    rp.on_cnp(0.0)
    assert rp.rc == pytest.approx(0.7 * LINE)
    low = ref(line_rate_mbps=10, rpg_min_rate=6)
    low.on_cnp(0.0)
    assert low.rc == 6 * MBPS


def test_byte_stages_fast_recovery_then_additive_but_never_hyper_alone():
    rp = ref(clamp_tgt_rate=1)
    rp.on_cnp(0.0)
    rp.on_cnp(4 * US)  # the target clamps to the rate before this cut
    rp.advance(8 * US)
    rc, rt = rp.rc, rp.rt
    assert rt < LINE
    rp.on_bytes_sent(32767, 9 * US)  # stage 1: fast recovery
    assert (rp.rt, rp.rc) == (rt, pytest.approx((rc + rt) / 2))
    for n in range(2, 6):  # additive, however many byte stages
        rp.on_bytes_sent(32767, (8 + n) * US)
        assert rp.rt == pytest.approx(rt + (n - 1) * 5 * MBPS)


def test_hyper_once_both_counters_passed_the_threshold():
    rp = ref(clamp_tgt_rate=1)
    rp.on_cnp(0.0)
    rp.on_cnp(4 * US)
    rp.advance(8 * US)
    rt = rp.rt
    rp.on_bytes_sent(2 * 32767, 10 * US)  # j = 2: fast recovery, additive
    rp.advance(304 * US)  # the timer: i = 0 -> 1, additive (j passed F, i not yet)
    assert rp.rt == pytest.approx(rt + 10 * MBPS)
    rp.on_bytes_sent(32767, 305 * US)  # i = 1, j = 2: hyper by min(i, j) - F + 1 = 1
    assert rp.rt == pytest.approx(rt + 60 * MBPS)
    rp.advance(604 * US)  # i = 1 -> 2, hyper by 1
    rp.on_bytes_sent(32767, 605 * US)  # i = 2, j = 3: hyper by 2
    assert rp.rt == pytest.approx(rt + 210 * MBPS)


def test_the_target_clamps_only_after_a_timer_stage():
    rp = ref()
    rp.on_cnp(0.0)
    rp.on_bytes_sent(3 * 32767, 2 * US)  # byte stages only
    rp.on_cnp(5 * US)
    assert rp.rt == LINE
    rp.advance(305 * US)  # a timer stage
    rate = rp.rc
    rp.on_cnp(306 * US)
    assert rp.rt == rate


def test_byte_counter_off_counts_nothing():
    rp = ref(rpg_byte_reset=0)
    rp.on_cnp(0.0)
    rc = rp.rc
    rp.on_bytes_sent(10**9, 1 * US)
    assert rp.rc == rc and rp.j == 0


def test_rate_to_set_on_first_cnp_and_max_rate():
    rp = ref(rate_to_set_on_first_cnp=20_000, rpg_max_rate=40_000)
    assert rp.rate(0.0) == 40 * GBPS
    rp.on_cnp(1 * US)
    assert (rp.rc, rp.rt) == (20 * GBPS, 20 * GBPS)


def test_ours_never_goes_hyper_on_byte_stages_alone():
    """The difference the comparison found: ours took a third byte stage after a cut for a
    hyper stage (+50 Mb/s) though no timer stage had come; both counters must pass F."""
    rp = reaction_point(FirmwareParams(rpg_byte_reset=32767, clamp_tgt_rate=True))
    rp.on_cnp(0.0)
    rp.on_cnp(4.5 * US)
    rp.advance(8 * US)  # cuts at 4 and 8 us; the second clamps the target below line rate
    rt = rp.rt
    assert rt < LINE
    for n in range(1, 6):
        rp.on_bytes_sent(32767, (8 + n) * US)
    assert rp.rt == pytest.approx(rt + 4 * 5 * MBPS)


def incast_like(seed: int) -> list[tuple]:
    """Episodes as an incast's sender sees them: paused (PFC) long enough for a timer stage,
    then CNPs every few microseconds while its frames leave, then frames alone, so that
    cuts clamp the target well below line rate and byte stages pile up between cuts. Open
    loop: the frames' pace follows nothing."""
    rng = random.Random(seed)
    events: list[tuple] = []
    t = 20 * US
    while t < 6e-3:
        t += rng.uniform(250, 700) * US  # paused: nothing sent
        for phase_end, cnps in ((t + rng.uniform(20, 400) * US, True),
                                (t + rng.uniform(50, 500) * US, False)):
            next_cnp = t
            while t < phase_end:
                if cnps and t >= next_cnp:
                    events.append((t, "cnp"))
                    next_cnp = t + rng.uniform(2, 30) * US
                events.append((t, "bytes", FRAME))
                t += FRAME * 8 / rng.choice((10, 25, 50, 100)) / GBPS
    return events


@pytest.mark.parametrize("seed", range(4))
def test_ours_agrees_with_the_reference_at_every_event(seed):
    settings = {**FIRMWARE_DEFAULTS, "rpg_byte_reset": 32767}
    events = incast_like(seed)
    out = compare(events, settings, LINE, grid_cuts=True)
    assert out["agree"], out
    assert out["points"] > len(events)  # timer ends compared too
    cnps = sum(e[1] == "cnp" for e in events)
    assert cnps > 20


def test_the_as_written_reading_differs_only_in_when_the_first_cut_lands():
    out = compare(incast_like(0), {**FIRMWARE_DEFAULTS, "rpg_byte_reset": 32767}, LINE,
                  grid_cuts=False)
    assert not out["agree"]
    first = out["first_difference"]
    assert first["event"][1] == "cnp" and first["ours_bps"] == LINE


def test_a_recorded_incast_replays_into_both_alike():
    """The comparison's own input: the default lab's incast, shortened, recorded per QP
    from the simulator (CNPs and frames), and both models agree on every QP's events."""
    qps, settings, line_bps = record(DEFAULT_LAB, 32767, seed=0, run_s=1e-3)
    assert settings["rpg_byte_reset"] == 32767 and line_bps > 0
    assert len(qps) > 1 and all(any(e[1] == "bytes" for e in q.events) for q in qps)
    assert sum(e[1] == "cnp" for q in qps for e in q.events) > 0
    for qp in qps:
        assert qp.events == sorted(qp.events, key=lambda e: e[0])
        assert compare(qp.events, settings, line_bps, grid_cuts=True)["agree"]
