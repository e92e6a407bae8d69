"""The buffer cases pass on the model and fail when the model departs from the config the
thresholds are derived from: a seeded defect per case, as sonic-mgmt would catch it on an
ASIC programmed wrong."""
import pytest

from rocelab.checks.sonic_mgmt import buffer_cases as bc
from rocelab.checks.sonic_mgmt import cases, derive
from rocelab.checks.sonic_mgmt.dut import Dut

FRAME = 1024


@pytest.fixture(scope="module")
def lossless(lab):
    return next(c for c in cases.lossless_cases(lab) if c.switch == "leaf1")


@pytest.fixture(scope="module")
def lossy(lab):
    return next(c for c in cases.lossy_cases(lab) if c.switch == "leaf1")


def dut(lab, case):
    return Dut(lab.nodes[case.switch])


def args(d, case):
    frame = d.packet(case.src, case.dst, case.dscp, FRAME, ecn=1)
    return (d.config, case.src, case.pg, len(frame), case.dst, case.queue)


def pg_buffer(d, case):
    return d.switch._ports[case.src].pgs[case.pg]


def xoff_limit(d, case):
    a = args(d, case)
    bc.pfc_xoff_limit(d, case, FRAME, derive.trig_pfc(*a).value, derive.trig_ingr_drp(*a).value)


def test_xoff_limit_passes_and_fails_with_a_headroom_one_frame_short(lab, lossless):
    xoff_limit(dut(lab, lossless), lossless)
    d = dut(lab, lossless)
    pg_buffer(d, lossless).headroom -= len(d.packet(lossless.src, lossless.dst, 0, FRAME))
    with pytest.raises(AssertionError, match="a drop before packet"):
        xoff_limit(d, lossless)


def test_xoff_limit_fails_when_the_threshold_is_not_the_configured_one(lab, lossless):
    d = dut(lab, lossless)
    pg_buffer(d, lossless).shift -= 1  # alpha halved: XOFF comes early
    with pytest.raises(AssertionError, match="PFC or a drop before packet"):
        xoff_limit(d, lossless)


def xon_limit(d, case):
    a = args(d, case)
    sent = derive.trig_ingr_drp(*a).value - 1
    bc.pfc_xon_limit(d, case, FRAME, sent, derive.xon_drain(*a, sent).value)


def test_xon_limit_passes_and_fails_with_another_xon_offset(lab, lossless):
    xon_limit(dut(lab, lossless), lossless)
    d = dut(lab, lossless)
    pg_buffer(d, lossless).xon_offset *= 4
    with pytest.raises(AssertionError, match="XON after"):
        xon_limit(d, lossless)


def lossy_queue(d, case):
    bc.lossy_queue(d, case, FRAME, derive.trig_egr_drp(*args(d, case)).value)


def test_lossy_queue_passes_and_fails_with_a_queue_limit_two_frames_short(lab, lossy):
    lossy_queue(dut(lab, lossy), lossy)
    d = dut(lab, lossy)
    held = d.switch._ports[lossy.dst].egress.buffers[lossy.queue]
    assert held is not None, "the lab's lossy queues have BUFFER_QUEUE limits"
    held.reserved -= 2 * len(d.packet(lossy.src, lossy.dst, 0, FRAME))
    with pytest.raises(AssertionError, match="a drop before packet"):
        lossy_queue(d, lossy)


def shared_walk(d, case):
    a = args(d, case)
    frame = d.packet(case.src, case.dst, case.dscp, FRAME, ecn=1)
    counts = bc.quarter_steps(1, derive.trig_pfc(*a).value - 1)
    bc.watermark_walk(d, case, frame, counts,
                      lambda c: c["ports"][case.src]["pgs"][str(case.pg)]["shared_peak"],
                      lambda n: derive.watermarks(*a, n).pg_shared.value)


def test_pg_shared_watermark_passes_and_fails_with_a_reserved_part_one_frame_larger(lab,
                                                                                   lossless):
    shared_walk(dut(lab, lossless), lossless)
    d = dut(lab, lossless)
    pg_buffer(d, lossless).reserved += len(d.packet(lossless.src, lossless.dst, 0, FRAME))
    with pytest.raises(AssertionError, match="the watermark is"):
        shared_walk(d, lossless)


def headroom_pool(d, node, watermark):
    dst, sources = cases.headroom_pool_sources(node)
    frame = len(d.packet(sources[0].src, dst, sources[0].dscp, FRAME))
    plans = derive.headroom_pool_plan(d.config, [(c.src, c.pg, c.queue) for c in sources],
                                      frame, dst)
    bc.headroom_pool(d, sources, plans, FRAME, watermark)


def test_headroom_pool_passes_and_fails_with_a_shared_headroom_pool_programmed_smaller(lab):
    node = lab.nodes["leaf1"]
    headroom_pool(Dut(node), node, watermark=True)
    d = Dut(node)
    for pool in d.switch._buffers.pools.values():
        pool.headroom_size //= 16  # room for two of leaf1's three PGs' headroom, not three
    with pytest.raises(AssertionError, match="a drop while the headroom filled"):
        headroom_pool(d, node, watermark=False)
