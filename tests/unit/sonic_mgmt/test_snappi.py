"""The snappi-style cases of the sonic-mgmt suite (``checks.sonic_mgmt.snappi``) and the
rate-based traffic they drive (``Dut.traffic``): each passes on the default lab's switch
and fails once a defect is seeded in the model."""
import pytest

from rocelab.checks.sonic_mgmt import cases, snappi
from rocelab.checks.sonic_mgmt.dut import Dut, Flow, PfcHeard
from rocelab.fabric.model.switch import Switch

FRAME = 1024


@pytest.fixture
def lossless(lab):
    return next(c for c in cases.lossless_cases(lab) if c.switch == "leaf1")


@pytest.fixture
def lossy(lab):
    return next(c for c in cases.lossy_cases(lab) if c.switch == "leaf1")


def egress(dut, port):
    return dut.switch._ports[port].egress


def test_a_flow_keeps_its_rate_and_a_sender_honours_pfc_after_its_delay(node):
    dut = Dut(node)
    src, dst = dut.ports[0], dut.ports[1]
    flow = Flow(src, dut.packet(src, dst, 0, FRAME, ident=1), 0.5)
    seconds = 999.5 * (len(flow.frame) + 24) * 8 * 2 / dut._speed_bps(src)
    dut.traffic([flow], seconds)
    assert flow.sent == 1000
    pauses = PfcHeard(dut._speed_bps(src), 1e-6)
    pauses.heard(0.0, {3: 1000})
    quantum = 512 / dut._speed_bps(src)
    assert pauses.free_at(3, 0.5e-6) == 0.5e-6  # not yet: the response delay
    assert pauses.free_at(3, 2e-6) == pytest.approx(1e-6 + 1000 * quantum)
    pauses.heard(1e-6, {3: 0})  # XON ends it when it takes effect
    assert pauses.free_at(3, 1.5e-6) == pytest.approx(2e-6)
    assert pauses.free_at(0, 1.5e-6) == 1.5e-6


def test_lossless_pause_passes_and_fails_when_the_dut_ignores_the_storm(node, lossless):
    plan = snappi.pause_plan(node.config, lossless, FRAME, paused=True)
    snappi.pause(Dut(node), plan)
    dut = Dut(node)
    for p in plan.storm:
        egress(dut, lossless.dst).pause.ignore(p, True, dut.now)
    with pytest.raises(AssertionError, match="left during the storm; expected 0"):
        snappi.pause(dut, plan)


def test_lossless_pause_fails_when_the_dut_sends_no_pfc_upstream(node, lossless,
                                                                 monkeypatch):
    plan = snappi.pause_plan(node.config, lossless, FRAME, paused=True)
    dut = Dut(node)
    monkeypatch.setattr(Switch, "_send_pfc", lambda self, port, quanta, sender: None)
    with pytest.raises(AssertionError, match="no PFC sent"):
        snappi.pause(dut, plan)


def obey(dut, port, global_pause: bool):
    """The defect: a PFC port that obeys 802.3x PAUSE (it takes itself for a port without
    PFC), or PFC on every priority (the switch model's receive side before it honoured
    pfc_enable)."""
    egress(dut, port).pause._pfc_enabled = [not global_pause] * 8


def test_lossy_pause_and_global_pause_pass_and_fail_on_a_dut_that_obeys_them(node, lossy,
                                                                           lossless):
    """A SONiC port ignores PFC on priorities without pfc_enable and 802.3x PAUSE; the
    cases pass on the model and fail on a port that obeys either."""
    for case, kw in ((lossless, {"global_pause_frames": True}), (lossy, {})):
        plan = snappi.pause_plan(node.config, case, FRAME, paused=False, **kw)
        snappi.pause(Dut(node), plan)
        dut = Dut(node)
        obey(dut, case.dst, global_pause="global_pause_frames" in kw)
        with pytest.raises(AssertionError, match="left during the storm; expected all"):
            snappi.pause(dut, plan)


def test_headroom_holds_and_fails_when_the_pg_headroom_is_smaller(node, lossless):
    plan = snappi.headroom_plan(node.config, lossless, FRAME)
    assert plan.covered_s < plan.exceeded_s
    snappi.headroom(lambda: Dut(node), plan)

    def small():
        dut = Dut(node)
        buffer = dut.switch._ports[lossless.src].pgs[lossless.pg]
        buffer.headroom //= 4
        return dut
    with pytest.raises(AssertionError, match="expected none: the headroom covers it"):
        snappi.headroom(small, plan)


def test_m2o_lossless_passes_and_fails_when_the_pg_never_pauses(node, lossless,
                                                                 monkeypatch):
    plan = snappi.m2o_plan(node.config, lossless, cases.wired(node), FRAME)
    snappi.m2o_lossless(Dut(node), plan)
    dut = Dut(node)
    monkeypatch.setattr(Switch, "_send_pfc", lambda self, port, quanta, sender: None)
    with pytest.raises(AssertionError, match="expected 0 loss"):
        snappi.m2o_lossless(dut, plan)


def test_m2o_skips_with_two_ports(lab):
    spine = lab.nodes["spine1"]
    case = next(c for c in cases.lossless_cases(lab) if c.switch == "spine1")
    with pytest.raises(snappi.Unsupported, match="needs a second src"):
        snappi.m2o_plan(spine.config, case, cases.wired(spine), FRAME)
