"""sonic-mgmt's buffer cases (``tests/qos/test_qos_sai.py``: PfcXoffLimit, PfcXonLimit,
XonHysteresis, LossyQueue, the PG/queue/pool watermarks, HeadroomPoolSize and its
watermark), each packet count derived from the DUT's config (``derive``), margin 0."""
from __future__ import annotations

import pytest

from rocelab.checks.report import record_derivation
from rocelab.checks.sonic_mgmt import buffer_cases as bc
from rocelab.checks.sonic_mgmt import cases
from rocelab.checks.sonic_mgmt import derive


def _derived(call, *args):
    """A threshold from ``derive``; a config it cannot derive exactly skips the case with
    its one-line reason (a refusal, not a crash: anything else raised is the case's error)."""
    try:
        return call(*args)
    except derive.NotDerived as e:
        pytest.skip(f"threshold not derived: {e}")


def _stream(dut, case, frame_bytes):
    frame = dut.packet(case.src, case.dst, case.dscp, frame_bytes, ecn=1)
    return frame, (dut.config, case.src, case.pg, len(frame), case.dst, case.queue)


def testQosSaiPfcXoffLimit(lossless, dut_of, frame_bytes, request):
    dut = dut_of(lossless.switch)
    _, args = _stream(dut, lossless, frame_bytes)
    pfc, drop = _derived(derive.trig_pfc, *args), _derived(derive.trig_ingr_drp, *args)
    record_derivation(request, [*pfc.steps, *drop.steps[-2:]])
    bc.pfc_xoff_limit(dut, lossless, frame_bytes, pfc.value, drop.value)


def testQosSaiPfcXonLimit(lossless, dut_of, frame_bytes, request):
    dut = dut_of(lossless.switch)
    _, args = _stream(dut, lossless, frame_bytes)
    sent = _derived(derive.trig_ingr_drp, *args).value - 1  # headroom full, nothing dropped
    xon = _derived(derive.xon_drain, *args, sent)
    record_derivation(request, list(xon.steps))
    bc.pfc_xon_limit(dut, lossless, frame_bytes, sent, xon.value)


def testQosSaiXonHysteresis(lossless, dut_of, frame_bytes, request):
    """Where the profile gives an xon_offset: XON waits for the headroom to drain and then
    for xon_offset more bytes (less as the dynamic threshold rises), not just the headroom."""
    dut = dut_of(lossless.switch)
    profile = dut.config.qos.buffer_profiles[dut.config.qos.buffer_pg[(lossless.src,
                                                                        lossless.pg)]]
    if not profile.xon_offset:
        pytest.skip(f"BUFFER_PROFILE|{profile.name} has no xon_offset")
    _, args = _stream(dut, lossless, frame_bytes)
    sent = _derived(derive.trig_ingr_drp, *args).value - 1
    xon = _derived(derive.xon_drain, *args, sent)
    headroom = derive.watermarks(*args, sent).pg_headroom.value
    frame = len(dut.packet(lossless.src, lossless.dst, 0, frame_bytes))
    record_derivation(request, [*xon.steps, f"headroom held {headroom} B = "
                                            f"{-(-headroom // frame)} frames"])
    assert xon.value > -(-headroom // frame), \
        f"{lossless.id}: xon_offset {profile.xon_offset} gives no hysteresis past the headroom"
    bc.pfc_xon_limit(dut, lossless, frame_bytes, sent, xon.value)


def testQosSaiLossyQueue(lossy, dut_of, frame_bytes, request):
    dut = dut_of(lossy.switch)
    _, args = _stream(dut, lossy, frame_bytes)
    drop = _derived(derive.trig_egr_drp, *args)
    record_derivation(request, list(drop.steps))
    bc.lossy_queue(dut, lossy, frame_bytes, drop.value)


def _walk(case, dut, frame_bytes, request, start, end, read, pick):
    frame, args = _stream(dut, case, frame_bytes)
    counts = bc.quarter_steps(start, end)
    first = pick(_derived(derive.watermarks, *args, counts[-1]))
    record_derivation(request, [*first.steps[:-1],
                                *(pick(derive.watermarks(*args, n)).steps[-1] for n in counts)])
    bc.watermark_walk(dut, case, frame, counts, read,
                      lambda n: pick(derive.watermarks(*args, n)).value)


def _pg(case, field):
    return lambda c: c["ports"][case.src]["pgs"][str(case.pg)][field]


def _limit(dut, case, frame_bytes, lossless: bool) -> int:
    """The last packet nothing stops: before XOFF (lossless) or before the first drop."""
    _, args = _stream(dut, case, frame_bytes)
    if lossless:
        return _derived(derive.trig_pfc, *args).value - 1
    return _derived(derive.trig_egr_drp, *args).value - 1


def testQosSaiPgSharedWatermark(lossless, dut_of, frame_bytes, request):
    dut = dut_of(lossless.switch)
    _walk(lossless, dut, frame_bytes, request, 1, _limit(dut, lossless, frame_bytes, True),
          _pg(lossless, "shared_peak"), lambda w: w.pg_shared)


def testQosSaiPgSharedWatermarkLossy(lossy, dut_of, frame_bytes, request):
    dut = dut_of(lossy.switch)
    _walk(lossy, dut, frame_bytes, request, 1, _limit(dut, lossy, frame_bytes, False),
          _pg(lossy, "shared_peak"), lambda w: w.pg_shared)


def testQosSaiPgHeadroomWatermark(lossless, dut_of, frame_bytes, request):
    dut = dut_of(lossless.switch)
    _, args = _stream(dut, lossless, frame_bytes)
    start = _derived(derive.trig_pfc, *args).value
    end = _derived(derive.trig_ingr_drp, *args).value - 1
    _walk(lossless, dut, frame_bytes, request, start, end, _pg(lossless, "headroom_peak"),
          lambda w: w.pg_headroom)


def _queue(case):
    return lambda c: c["ports"][case.dst]["queues"][str(case.queue)]["watermark_bytes"]


def testQosSaiQSharedWatermark(lossless, dut_of, frame_bytes, request):
    """The dst queue's watermark (the model keeps the whole queue's, reserved part included)
    walked up to the ingress drop point: with lossless traffic the egress queue holds what
    the src PG admitted."""
    dut = dut_of(lossless.switch)
    _, args = _stream(dut, lossless, frame_bytes)
    end = _derived(derive.trig_ingr_drp, *args).value - 1
    _walk(lossless, dut, frame_bytes, request, 1, end, _queue(lossless), lambda w: w.queue)


def testQosSaiQSharedWatermarkLossy(lossy, dut_of, frame_bytes, request):
    dut = dut_of(lossy.switch)
    _walk(lossy, dut, frame_bytes, request, 1, _limit(dut, lossy, frame_bytes, False),
          _queue(lossy), lambda w: w.queue)


def testQosSaiBufferPoolWatermark(lossless, dut_of, frame_bytes, request):
    """The src PG's ingress pool: its shared bytes' watermark up to XOFF."""
    dut = dut_of(lossless.switch)
    _, args = _stream(dut, lossless, frame_bytes)
    pool = _derived(derive.watermarks, *args, 1).pool.steps[-1].split("BUFFER_POOL|")[1].split()[0]
    _walk(lossless, dut, frame_bytes, request, 1, _limit(dut, lossless, frame_bytes, True),
          lambda c: c["pools"][pool]["peak"], lambda w: w.pool)


def _headroom_pool(switch, dut_of, frame_bytes, request, watermark: bool):
    dut = dut_of(switch.name)
    dst, sources = cases.headroom_pool_sources(switch)
    if not sources:
        pytest.skip(f"{switch.name}: no lossless PG on a port other than {dst} (PORT_QOS_MAP "
                    "pfc_enable, BUFFER_PG)")
    pools = {dut.config.qos.buffer_profiles[dut.config.qos.buffer_pg[(c.src, c.pg)]].pool
             for c in sources}
    if not any(dut.config.qos.buffer_pools[p].xoff for p in pools):
        pytest.skip(f"{switch.name}: no shared headroom pool (BUFFER_POOL|"
                    f"{'/'.join(sorted(pools))} xoff is 0): the PGs' headroom is private")
    frame = len(dut.packet(sources[0].src, dst, sources[0].dscp, frame_bytes))
    plans = _derived(derive.headroom_pool_plan, dut.config,
                     [(c.src, c.pg, c.queue) for c in sources], frame, dst)
    lines = list(plans[0].trig_pfc.steps[:-1])
    for plan in plans:
        lines += [plan.trig_pfc.steps[-1], plan.hdrm_full.steps[-1],
                  plan.headroom_pool.steps[-1]]
    lines.append(plans[-1].drop.steps[-1])
    shp = max(dut.config.qos.buffer_pools[p].xoff for p in pools)
    if plans[-1].headroom_pool.value + frame <= shp:
        lines.append(f"the shared headroom pool ({shp} B) outlasts these {len(plans)} PGs: "
                     "the last drop is the PG's own headroom (xoff) running out")
    record_derivation(request, lines)
    bc.headroom_pool(dut, sources, plans, frame_bytes, watermark)


def testQosSaiHeadroomPoolSize(switch, dut_of, frame_bytes, request):
    _headroom_pool(switch, dut_of, frame_bytes, request, watermark=False)


def testQosSaiHeadroomPoolWatermark(switch, dut_of, frame_bytes, request):
    _headroom_pool(switch, dut_of, frame_bytes, request, watermark=True)
