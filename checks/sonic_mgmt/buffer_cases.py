"""sonic-mgmt's buffer cases (``sai_qos_tests.py``: PFCtest, PFCXonTest, LossyQueueTest, the
watermark tests) as steps on a ``Dut``: the same stages and counter deltas, with the
expected packet counts given (``derive``) and no margin, so each stage is exact.

Each function raises AssertionError naming the stage, what was read and what was expected.
"""
from __future__ import annotations

from dataclasses import dataclass

from .cases import PortCase
from .dut import Dut


@dataclass(frozen=True)
class Reading:
    """The counters one stage compares: on the src port, PFC frames sent for the case's
    priority, the PG's drops and ingress drops; on the dst port, egress drops."""

    pfc_tx: int
    pg_drops: int
    ingress_drops: int
    egress_drops: int

    @classmethod
    def of(cls, dut: Dut, case: PortCase) -> Reading:
        ports = dut.read()["ports"]
        src, dst = ports[case.src], ports[case.dst]
        return cls(src["pfc_tx"][case.tc], src["pgs"][str(case.pg)]["drops"],
                   sum(src["drops"].values()),
                   sum(dst["egress_drops"].values()))

    def delta(self, before: Reading) -> Reading:
        return Reading(self.pfc_tx - before.pfc_tx, self.pg_drops - before.pg_drops,
                       self.ingress_drops - before.ingress_drops,
                       self.egress_drops - before.egress_drops)


def _stage(dut: Dut, case: PortCase, frame: bytes, count: int) -> Reading:
    before = Reading.of(dut, case)
    dut.send(case.src, frame, count)
    return Reading.of(dut, case).delta(before)


def pfc_xoff_limit(dut: Dut, case: PortCase, frame_bytes: int, trig_pfc: int,
                   trig_drp: int) -> list[str]:
    """PFCtest with margin 0 and leak-out 0, dst TX disabled: (a) ``trig_pfc - 1`` packets,
    no PFC and no drop; (b) one more, PFC and no drop; (c) up to ``trig_drp - 1``, no drop;
    (d) one more, exactly one ingress drop in the PG, none at egress. Returns what each
    stage read."""
    dut.set_tx(case.dst, False)
    frame = dut.packet(case.src, case.dst, case.dscp, frame_bytes, ecn=1)
    seen = []
    a = _stage(dut, case, frame, trig_pfc - 1)
    seen.append(f"(a) {trig_pfc - 1} packets: {a}")
    assert a.pfc_tx == 0 and a.ingress_drops == 0 and a.egress_drops == 0, \
        f"{case.id}: PFC or a drop before packet {trig_pfc}: {a}"
    b = _stage(dut, case, frame, 1)
    seen.append(f"(b) packet {trig_pfc}: {b}")
    assert b.pfc_tx > 0, f"{case.id}: packet {trig_pfc} sent no PFC for priority {case.tc}"
    assert b.ingress_drops == 0 and b.egress_drops == 0, \
        f"{case.id}: packet {trig_pfc} was dropped: {b}"
    c = _stage(dut, case, frame, trig_drp - trig_pfc - 1)
    seen.append(f"(c) {trig_drp - trig_pfc - 1} more: {c}")
    assert c.ingress_drops == 0 and c.egress_drops == 0, \
        f"{case.id}: a drop before packet {trig_drp}: {c}"
    d = _stage(dut, case, frame, 1)
    seen.append(f"(d) packet {trig_drp}: {d}")
    assert d.pg_drops == 1 and d.ingress_drops == 1, \
        f"{case.id}: packet {trig_drp} was not dropped at ingress in PG {case.pg}: {d}"
    assert d.egress_drops == 0, f"{case.id}: packet {trig_drp} was dropped at egress: {d}"
    return seen


def lossy_queue(dut: Dut, case: PortCase, frame_bytes: int, trig_egr_drp: int) -> list[str]:
    """LossyQueueTest with margin 0, dst TX disabled: ``trig_egr_drp - 1`` packets, no PFC
    and no drop; one more, exactly one drop, no PFC."""
    dut.set_tx(case.dst, False)
    frame = dut.packet(case.src, case.dst, case.dscp, frame_bytes, ecn=1)
    first = _stage(dut, case, frame, trig_egr_drp - 1)
    assert first == Reading(0, 0, 0, 0), \
        f"{case.id}: PFC or a drop before packet {trig_egr_drp}: {first}"
    last = _stage(dut, case, frame, 1)
    assert last.pfc_tx == 0, f"{case.id}: a lossy class sent PFC: {last}"
    assert last.ingress_drops + last.egress_drops == 1, \
        f"{case.id}: packet {trig_egr_drp} was not dropped: {last}"
    return [f"{trig_egr_drp - 1} packets: {first}", f"packet {trig_egr_drp}: {last}"]


def pfc_xon_limit(dut: Dut, case: PortCase, frame_bytes: int, sent: int,
                  xon_after: int) -> list[str]:
    """PFCXonTest, exact: ``sent`` packets (past the XOFF point) into the dst with TX
    disabled, then TX enabled: the src's XON for the case's priority goes out when exactly
    ``xon_after`` of them have left, and no PFC follows it. (sonic-mgmt drains through
    three dst ports because hardware drains only by whole ports; one port released
    packet by packet brackets the same XON point with no slack.)"""
    dut.set_tx(case.dst, False)
    frame = dut.packet(case.src, case.dst, case.dscp, frame_bytes, ecn=1)
    dut.send(case.src, frame, sent)
    xoffs = dut.pfc_sent(case.src, case.tc)
    assert xoffs and all(q > 0 for _, q in xoffs), \
        f"{case.id}: {sent} packets did not put priority {case.tc} in XOFF: {xoffs}"
    start = dut.now
    dut.set_tx(case.dst, True)
    dut.run(dut.now + (sent + 1) * frame_bytes * 8 / dut.config.ports[case.dst].speed_mbps
            / 1e6 * 2)
    pfc = [(at, q) for at, q in dut.pfc_sent(case.src, case.tc) if at >= start]
    xon = next((at for at, q in pfc if q == 0), None)
    assert xon is not None, f"{case.id}: no XON once all {sent} packets left"
    left = sum(1 for at, _ in dut.captures[case.dst].frames if at <= xon)
    assert left == xon_after, \
        f"{case.id}: XON after {left} packets left, expected after {xon_after}"
    after = [q for at, q in pfc if at > xon]
    assert not after, f"{case.id}: PFC after XON: quanta {after}"
    return [f"{sent} packets held, XOFF sent {len(xoffs)} time(s)",
            f"TX enabled: XON after {left} packets left"]


def quarter_steps(start: int, end: int) -> list[int]:
    """sonic-mgmt's watermark walk: cumulative packet counts from ``start`` to ``end`` in
    four steps, then one past ``end`` (the overflow step)."""
    span = max(end - start, 0)
    counts = sorted({start + span * i // 4 for i in range(5)} | {end + 1})
    return [c for c in counts if c > 0]


def watermark_walk(dut: Dut, case: PortCase, frame: bytes, counts: list[int],
                   read, expected) -> list[str]:
    """Send up to each cumulative count in ``counts`` (dst TX disabled) and compare the
    watermark ``read(counters)`` with ``expected(count)`` exactly after each step; after the
    last (the overflow step, whose packet is dropped) as sonic-mgmt bounds it, up to one
    packet more (``(exp + margin + occupancy) x cell``, margin 0): a packet dropped at the
    egress queue has passed through the ingress PG's buffer on the way."""
    dut.set_tx(case.dst, False)
    seen, sent = [], 0
    for count in counts:
        dut.send(case.src, frame, count - sent)
        sent = count
        got, want = read(dut.read()), expected(count)
        seen.append(f"after {count} packets: {got} B (expected {want} B)")
        slack = len(frame) if count == counts[-1] else 0
        assert want <= got <= want + slack, \
            f"{case.id}: after {count} packets the watermark is {got} B, expected {want} B" \
            + (f" to {want + slack} B" if slack else "")
    return seen


def headroom_pool(dut: Dut, sources: list[PortCase], plans, frame_bytes: int,
                  watermark: bool) -> list[str]:
    """HdrmPoolSizeTest, exact: the PGs of ``sources`` filled one after another into one dst
    with TX disabled, each to its derived XOFF packet (PFC exactly there) and then its
    headroom (no drop); the last PG's next packet is dropped at ingress. ``watermark``:
    also the shared headroom pool's watermark after each PG (HeadroomPoolWatermark)."""
    dut.set_tx(sources[0].dst, False)
    seen = []
    for case, plan in zip(sources, plans):
        frame = dut.packet(case.src, case.dst, case.dscp, frame_bytes, ecn=1)
        trig, full = plan.trig_pfc.value, plan.hdrm_full.value
        before = _stage(dut, case, frame, trig - 1)
        assert before.pfc_tx == 0 and before.ingress_drops == 0, \
            f"{case.id}: PFC or a drop before packet {trig}: {before}"
        at = _stage(dut, case, frame, 1)
        assert at.pfc_tx > 0, f"{case.id}: packet {trig} sent no PFC"
        if plan.drop.value == trig:  # no headroom left for the XOFF packet itself
            assert at.ingress_drops == 1, f"{case.id}: packet {trig} was not dropped: {at}"
            seen.append(f"{case.src} PG {case.pg}: XOFF and drop at packet {trig}")
            continue
        held = _stage(dut, case, frame, full)
        assert at.ingress_drops == 0 and held.ingress_drops == 0, \
            f"{case.id}: a drop while the headroom filled ({full} packets): {held}"
        pool = dut.read()["pools"]
        headroom = sum(p["headroom_peak"] for p in pool.values())
        seen.append(f"{case.src} PG {case.pg}: XOFF at {trig}, {full} more into headroom, "
                    f"headroom pool watermark {headroom} B")
        if watermark:
            assert headroom == plan.headroom_pool.value, \
                f"{case.id}: headroom pool watermark {headroom} B after this PG, expected " \
                f"{plan.headroom_pool.value} B"
    last, plan = sources[-1], plans[-1]
    if plan.drop.value != plan.trig_pfc.value:
        frame = dut.packet(last.src, last.dst, last.dscp, frame_bytes, ecn=1)
        over = _stage(dut, last, frame, 1)
        assert over.ingress_drops == 1 and over.pg_drops == 1, \
            f"{last.id}: packet {plan.drop.value} was not dropped at ingress: {over}"
        seen.append(f"{last.src} PG {last.pg}: packet {plan.drop.value} dropped")
    return seen
