"""sonic-mgmt's snappi PFC cases (``tests/snappi_tests/pfc``) with PTF ports as the traffic
generator: rate-based flows that honour the DUT's PFC, pause storms into the egress port; and
its ECN and RoCEv2 cases (``tests/snappi_tests/ecn``, ``rocev2``).
The logic is in ``snappi``, ``waterfill``, ``rocev2`` and ``ecn``."""
from __future__ import annotations

import pytest

from rocelab.checks.report import record_derivation
from rocelab.checks.sonic_mgmt import cases, ecn, rocev2, snappi, waterfill
from rocelab.checks.sonic_mgmt.sched import Unsupported


def _plan(request, make, *args, **kwargs):
    try:
        plan = make(*args, **kwargs)
    except Unsupported as why:
        pytest.skip(str(why))
    record_derivation(request, plan.lines)
    return plan


def test_pfc_pause_single_lossless_prio(lossless, dut_of, frame_bytes, request):
    """A storm on the lossless priority stops its flow, not the background; the DUT pauses
    the sender of that priority only."""
    dut = dut_of(lossless.switch)
    snappi.pause(dut, _plan(request, snappi.pause_plan, dut.config, lossless, frame_bytes,
                            paused=True))


def test_pfc_pause_single_lossy_prio(lossy, dut_of, frame_bytes, request):
    """A storm on a lossy priority (PFC not enabled for it) stops nothing."""
    dut = dut_of(lossy.switch)
    snappi.pause(dut, _plan(request, snappi.pause_plan, dut.config, lossy, frame_bytes,
                            paused=False))


def test_global_pause(lossless, dut_of, frame_bytes, request):
    """802.3x PAUSE into a PFC port stops nothing."""
    dut = dut_of(lossless.switch)
    snappi.pause(dut, _plan(request, snappi.pause_plan, dut.config, lossless, frame_bytes,
                            paused=False, global_pause_frames=True))


def test_pfc_single_lossless_headroom(lossless, dut_of, frame_bytes, request):
    """With the cable's PFC response delay the headroom holds; past it the PG drops."""
    config = dut_of(lossless.switch).config
    snappi.headroom(lambda: dut_of(lossless.switch),
                    _plan(request, snappi.headroom_plan, config, lossless, frame_bytes))


def test_m2o_oversubscribe_lossless(lossless, dut_of, suite_lab, frame_bytes, request):
    """Two srcs at line rate into one dst on the lossless class: 0 loss, PFC upstream."""
    dut = dut_of(lossless.switch)
    ports = cases.wired(suite_lab.nodes[lossless.switch])
    snappi.m2o_lossless(dut, _plan(request, snappi.m2o_plan, dut.config, lossless, ports,
                                   frame_bytes))


def test_dequeue_ecn(wred, dut_of, suite_lab, frame_bytes, request):
    """A queue held past its WRED max threshold and released: the first packet CE, the
    last not (marking at dequeue)."""
    dut = dut_of(wred.switch)
    ecn.dequeue_ecn(dut, _plan(request, ecn.dequeue_plan, dut.config, wred, frame_bytes,
                               suite_lab.nodes[wred.switch].ecn_marking))


def test_red_accuracy(wred, dut_of, suite_lab, frame_bytes, request):
    """Held rounds released: marks per queue-length bucket follow the WRED_PROFILE curve
    within a binomial band."""
    dut = dut_of(wred.switch)
    ecn.red_accuracy(dut, _plan(request, ecn.red_plan, dut.config, wred, frame_bytes,
                                suite_lab.nodes[wred.switch].ecn_marking))


def test_m2o_oversubscribe_lossy(pair, dut_of, suite_lab, frame_bytes, request):
    """Two srcs at line rate into one dst on its lossy queues: each queue served (and so
    losing) as the DWRR water-fill of the SCHEDULER weights predicts; no PFC."""
    dut = dut_of(pair.switch)
    plan = _plan(request, waterfill.m2o_lossy_plan, dut.config, pair.switch, pair.src,
                 pair.dst, cases.wired(suite_lab.nodes[pair.switch]), frame_bytes)
    record_derivation(request, waterfill.m2o_lossy(dut, plan))


def test_rocev2_basic_dp_no_congestion(pair, dut_of, frame_bytes, request):
    """RoCEv2 frames on the lossless classes and a control class below line rate: all
    delivered, no CE, no PFC, each class on its mapped queue."""
    dut = dut_of(pair.switch)
    rocev2.basic(dut, _plan(request, rocev2.basic_plan, dut.config, pair.switch, pair.src,
                            pair.dst, frame_bytes))


def test_rocev2_pfc_congestion_ai(pair, dut_of, suite_lab, frame_bytes, request):
    """N:1 incast at line rate plus a lossy flow: lossless 0 loss with PFC on every used
    lossless priority, none on lossy ones, the lossy flow loses, rates water-fill."""
    dut = dut_of(pair.switch)
    rocev2.congestion(dut, _plan(request, rocev2.congestion_plan, dut.config, pair.switch,
                                 pair.src, pair.dst, cases.wired(suite_lab.nodes[pair.switch]),
                                 frame_bytes))
