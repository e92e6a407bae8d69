"""DCQCN state machines (nic.dcqcn): the NP's CNP pacing and the RP's cut, alpha decay and
increase stages. Time is injected and every expected value is computed by hand from the
paper's rules, so sequences are exact (floats compared with pytest.approx)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from rocelab.nic.dcqcn import NotificationPoint, ReactionPoint, reaction_point
from rocelab.nic.dcqcn_params import DcqcnParams

G = 1 / 256
GBPS = 1e9
MBPS = 1e6


def rp_at_10g(**overrides) -> tuple[ReactionPoint, DcqcnParams]:
    """An RP at 40G hit by two CNPs at 0: RT = 20G, RC = 10G, alpha = 1 (stays 1)."""
    params = DcqcnParams(**overrides)
    rp = reaction_point(params)
    rp.on_cnp(0.0)
    rp.on_cnp(0.0)
    assert (rp.rt, rp.rc, rp.alpha) == (20 * GBPS, 10 * GBPS, 1.0)
    return rp, params


# -- parameters ------------------------------------------------------------------------------

def test_defaults_are_the_papers():
    p = DcqcnParams()
    assert (p.g, p.k_s, p.t_s, p.n_s) == (1 / 256, 55e-6, 55e-6, 50e-6)
    assert (p.b_bytes, p.f) == (10 * 1024 * 1024, 5)
    assert (p.rai_bps, p.rhai_bps, p.line_rate_bps) == (40e6, 200e6, 40e9)
    assert p.min_rate_bps == 1e6


def test_scaled_stretches_timers_and_slows_rates_exactly():
    p = DcqcnParams(line_rate_bps=100e9)
    s = p.scaled(1000)
    assert (s.k_s, s.t_s, s.n_s) == (55e-6 * 1000, 55e-6 * 1000, 50e-6 * 1000)
    assert (s.line_rate_bps, s.rai_bps, s.rhai_bps, s.min_rate_bps) == (
        100e9 / 1000, 40e6 / 1000, 200e6 / 1000, 1e6 / 1000)
    assert (s.g, s.b_bytes, s.f) == (p.g, p.b_bytes, p.f)  # bytes and gains stay
    assert p.scaled(1) == p


def test_scaled_keeps_the_dynamics_in_emulated_time():
    scale = 1000
    real, emulated = reaction_point(DcqcnParams()), reaction_point(DcqcnParams().scaled(scale))
    real.on_cnp(0.0)
    emulated.on_cnp(0.0)
    for events in (1, 3, 7):
        t = events * 55e-6
        assert emulated.rate(t * scale) == pytest.approx(real.rate(t) / scale)
        assert emulated.alpha == pytest.approx(real.alpha)


@pytest.mark.parametrize("bad", [dict(g=0), dict(k_s=0), dict(f=0), dict(b_bytes=0),
                                 dict(min_rate_bps=50e9), dict(min_rate_bps=0)])
def test_invalid_params_are_refused(bad):
    with pytest.raises(ValueError):
        DcqcnParams(**bad)


def test_scale_must_be_positive():
    with pytest.raises(ValueError):
        DcqcnParams().scaled(0)


# -- notification point ----------------------------------------------------------------------

def test_np_sends_at_most_one_cnp_per_n():
    np_ = NotificationPoint(DcqcnParams())
    n = 50e-6
    assert np_.on_packet(0.0, ce=True)  # first CE: CNP at once
    assert not np_.on_packet(10e-6, ce=True)  # covered by the CNP at 0
    assert not np_.on_packet(n * 0.99, ce=True)
    assert np_.on_packet(n, ce=True)  # N since the last CNP: another
    assert not np_.on_packet(n + 10e-6, ce=True)
    assert np_.on_packet(3 * n, ce=True)
    assert np_.cnps_sent == 3


def test_np_never_sends_for_unmarked_packets():
    np_ = NotificationPoint(DcqcnParams())
    assert not any(np_.on_packet(k * 100e-6, ce=False) for k in range(10))
    assert np_.on_packet(1.0, ce=True)  # unmarked packets did not use up the interval
    assert np_.cnps_sent == 1


def test_np_interval_scales_with_s():
    np_ = NotificationPoint(DcqcnParams().scaled(1000))
    assert np_.on_packet(0.0, ce=True)
    assert not np_.on_packet(49e-3, ce=True)
    assert np_.on_packet(50e-6 * 1000, ce=True)


# -- reaction point: decrease and alpha ------------------------------------------------------

def test_rp_starts_idle_at_line_rate():
    rp = reaction_point(DcqcnParams())
    rp.on_bytes_sent(50 * 1024 * 1024, 1.0)  # no CNP yet: bytes do not count
    assert (rp.rate(10.0), rp.rt, rp.alpha) == (40 * GBPS, 40 * GBPS, 1.0)
    assert (rp.j, rp.byte_count) == (0, 0)
    assert rp.next_event(10.0) is None


def test_first_cnp_halves_the_rate_and_keeps_alpha_at_one():
    rp = reaction_point(DcqcnParams())
    rp.on_cnp(1.0)
    assert rp.rt == 40 * GBPS  # RT = RC before the cut
    assert rp.rc == 20 * GBPS  # RC * (1 - 1/2)
    assert rp.alpha == (1 - G) * 1 + G == 1.0


def test_second_cnp_uses_the_new_alpha():
    rp = reaction_point(DcqcnParams())
    rp.on_cnp(0.0)
    rp.on_cnp(0.0)  # right after: alpha still 1, so another halving
    assert (rp.rt, rp.rc, rp.alpha) == (20 * GBPS, 10 * GBPS, 1.0)

    rp = reaction_point(DcqcnParams())
    k = 55e-6
    rp.on_cnp(0.0)
    rp.advance(2 * k)  # 2 alpha decays; 2 fast recovery steps: 20G -> 30G -> 35G
    alpha = (1 - G) ** 2
    assert rp.alpha == pytest.approx(alpha)
    assert rp.rc == pytest.approx(35 * GBPS)
    rp.on_cnp(2 * k)
    assert rp.rt == pytest.approx(35 * GBPS)
    assert rp.rc == pytest.approx(35 * GBPS * (1 - alpha / 2))
    assert rp.alpha == pytest.approx((1 - G) * alpha + G)


def test_alpha_decays_by_1_minus_g_every_k_without_cnp():
    params = DcqcnParams(t_s=1.0)  # no rate increase in the window
    rp = reaction_point(params)
    k = params.k_s
    rp.on_cnp(0.0)
    rp.advance(3 * k * 0.999)
    assert rp.alpha == pytest.approx((1 - G) ** 2)
    rp.advance(3 * k)
    assert rp.alpha == pytest.approx((1 - G) ** 3)
    rp.on_cnp(3.5 * k)  # a CNP restarts the alpha timer
    after_cnp = (1 - G) ** 4 + G
    assert rp.alpha == pytest.approx(after_cnp)
    rp.advance(3.5 * k + k * 0.999)
    assert rp.alpha == pytest.approx(after_cnp)
    rp.advance(4.5 * k)
    assert rp.alpha == pytest.approx(after_cnp * (1 - G))


def test_rate_never_drops_below_the_minimum():
    rp = reaction_point(DcqcnParams(min_rate_bps=1 * GBPS))
    rates = []
    for _ in range(8):
        rp.on_cnp(0.0)
        rates.append(rp.rc)
    assert rates == [20 * GBPS, 10 * GBPS, 5 * GBPS, 2.5 * GBPS, 1.25 * GBPS,
                     1 * GBPS, 1 * GBPS, 1 * GBPS]


# -- reaction point: increase ----------------------------------------------------------------

FAST_RECOVERY = [15 * GBPS, 17.5 * GBPS, 18.75 * GBPS, 19.375 * GBPS, 19.6875 * GBPS]


def test_timer_fast_recovery_then_additive_increase():
    rp, p = rp_at_10g()
    t = p.t_s
    for stage, rc in enumerate(FAST_RECOVERY, start=1):  # each event halves the gap to RT
        rp.advance(stage * t)
        assert (rp.i, rp.rt) == (stage, 20 * GBPS)
        assert rp.rc == pytest.approx(rc)
    rp.advance(6 * t)  # i = 5 = F: additive
    assert rp.rt == pytest.approx(20 * GBPS + 40 * MBPS)
    assert rp.rc == pytest.approx((20.04 * GBPS + 19.6875 * GBPS) / 2)
    rp.advance(7 * t)
    assert rp.rt == pytest.approx(20 * GBPS + 80 * MBPS)
    assert rp.rc == pytest.approx((20.08 * GBPS + (20.04 * GBPS + 19.6875 * GBPS) / 2) / 2)
    assert rp.i == 7 and rp.j == 0


def test_advance_catches_up_on_every_event_due():
    stepwise, p = rp_at_10g()
    at_once, _ = rp_at_10g()
    for stage in range(1, 8):
        stepwise.advance(stage * p.t_s)
    assert at_once.rate(7 * p.t_s) == stepwise.rc
    assert (at_once.i, at_once.rt, at_once.alpha) == (stepwise.i, stepwise.rt, stepwise.alpha)


def test_byte_counter_stages_count_separately():
    rp, p = rp_at_10g(b_bytes=1000, t_s=1.0, k_s=1.0)
    rp.on_bytes_sent(999, 1e-6)
    assert (rp.j, rp.byte_count, rp.rc) == (0, 999, 10 * GBPS)
    rp.on_bytes_sent(1, 2e-6)  # B bytes: one byte stage
    assert (rp.j, rp.byte_count, rp.i) == (1, 0, 0)
    assert rp.rc == pytest.approx(FAST_RECOVERY[0])
    rp.on_bytes_sent(4500, 3e-6)  # four more stages at once, 500 bytes left over
    assert (rp.j, rp.byte_count) == (5, 500)
    assert rp.rc == pytest.approx(FAST_RECOVERY[-1]) and rp.rt == 20 * GBPS
    rp.on_bytes_sent(500, 4e-6)  # j = 5 = F, i = 0: additive
    assert rp.rt == pytest.approx(20.04 * GBPS)
    assert rp.rc == pytest.approx((20.04 * GBPS + 19.6875 * GBPS) / 2)


def test_hyper_increase_when_both_stages_reach_f():
    rp, p = rp_at_10g(b_bytes=1000, k_s=1.0)
    t = p.t_s
    rp.advance(5 * t)  # five timer stages of fast recovery: i = 5
    rc = FAST_RECOVERY[-1]
    assert rp.i == 5 and rp.rc == pytest.approx(rc)
    rt = 20 * GBPS
    for _ in range(5):  # byte stages j = 0..4 with i = 5: additive
        rp.on_bytes_sent(1000, 5 * t)
        rt += 40 * MBPS
        rc = (rt + rc) / 2
    assert rp.j == 5 and rp.rt == pytest.approx(rt) and rp.rc == pytest.approx(rc)
    rp.on_bytes_sent(1000, 5 * t)  # i = j = 5: hyper, R_HAI * (5 - 5 + 1)
    rt += 200 * MBPS
    rc = (rt + rc) / 2
    assert rp.rt == pytest.approx(rt) and rp.rc == pytest.approx(rc)
    rp.advance(6 * t)  # timer stage with i = 5, j = 6: min is 5, hyper x 1
    rt += 200 * MBPS
    rc = (rt + rc) / 2
    assert rp.rt == pytest.approx(rt) and rp.rc == pytest.approx(rc)
    rp.on_bytes_sent(1000, 6 * t)  # i = 6, j = 6: hyper x 2
    rt += 2 * 200 * MBPS
    rc = (rt + rc) / 2
    assert (rp.i, rp.j) == (6, 7)
    assert rp.rt == pytest.approx(rt) and rp.rc == pytest.approx(rc)


def test_rate_never_exceeds_line_rate():
    rp = reaction_point(DcqcnParams(b_bytes=1000))
    rp.on_cnp(0.0)
    for step in range(1, 200):  # timer and byte stages deep into hyper increase
        rp.on_bytes_sent(5000, step * 55e-6)
        assert rp.rt <= 40 * GBPS and rp.rc <= 40 * GBPS
    assert rp.rt == 40 * GBPS
    assert rp.rc == pytest.approx(40 * GBPS)


def test_cnp_resets_stages_byte_counter_and_timers():
    rp, p = rp_at_10g(b_bytes=1000, k_s=50e-6)
    rp.advance(3 * p.t_s)
    rp.on_bytes_sent(2500, 3 * p.t_s)
    assert (rp.i, rp.j, rp.byte_count) == (3, 2, 500)
    now = 3 * p.t_s + 10e-6
    rp.on_cnp(now)
    assert (rp.i, rp.j, rp.byte_count) == (0, 0, 0)
    assert rp.next_event(now) == now + 50e-6  # alpha timer (K) restarted from the CNP
    assert rp.next_event(now + 50e-6) == now + 55e-6  # then the increase timer (T)
    assert rp.i == 0 and rp.rc == rp.rate(now + 50e-6)


def test_params_overrides_keep_the_rest():
    p = replace(DcqcnParams(), line_rate_bps=100e9, rai_bps=100e6, rhai_bps=500e6)
    rp = reaction_point(p)
    assert rp.rate(0.0) == 100e9 and p.g == G
