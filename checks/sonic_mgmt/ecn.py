"""The logic of sonic-mgmt's snappi ECN cases (``tests/snappi_tests/ecn``): ``test_dequeue_ecn``
(a held queue released: its first packet CE-marked, its last not) and ``test_red_accuracy``
(mark probability per queue length against the WRED curve, which sonic-mgmt only logs and
this asserts). As in ``sched``: a plan from the config alone, then a run that raises
AssertionError with what was measured against what was expected.

sonic-mgmt writes its own WRED profile (kmin/kmax/pmax) before the test; here the queue's
own ``WRED_PROFILE`` is the one under test, so the packet counts follow from it. The queue
is held by disabling its port's TX (as the QoS SAI tests stop a port) while N ECT packets
arrive, then released: a switch that marks at dequeue decides for each packet on the bytes
still queued behind it, so packet j of N (from 0) meets ``(N - 1 - j) x frame`` bytes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...fabric.config import SwitchConfig, WredColor
from ...fabric.model.wred import CE, ECT1, ecn_field
from ...fabric.qos import pauses_sender
from .cases import WredCase
from .derive import trig_egr_drp, trig_ingr_drp
from .dut import Dut
from .sched import Unsupported

BUCKETS = 10  # equal spans of queue length between the profile's min and max threshold
MIN_TRIALS = 1600  # per bucket: a 4-sigma binomial band is then at most 5 % of it
SIGMAS = 4
# SONiC ``ecn`` values whose mark mode covers green (every frame here is green)
GREEN_ECN_MODES = frozenset({"ecn_green", "ecn_green_yellow", "ecn_green_red", "ecn_all"})


@dataclass(frozen=True)
class EcnPlan:
    """N ECT packets src -> dst's queue, held and released ``rounds`` times; the WRED curve
    they meet; the queue lengths (bytes behind a packet) bounding each bucket."""

    src: str
    dst: str
    frame_bytes: int
    dscp: int
    queue: int
    egress_bytes: int  # the packet as it waits in dst's queue
    curve: WredColor
    count: int
    rounds: int = 1
    edges: tuple[float, ...] = ()
    lines: list[str] = field(default_factory=list)

    def probability(self, depth: int) -> float:
        """WRED_PROFILE's green curve (fabric/model/wred.py, docs/design.md "WRED/ECN"): 0
        below min, linear from 0 at min to drop_probability % towards max, 1 from max."""
        c = self.curve
        if depth < c.min_threshold:
            return 0.0
        if depth >= c.max_threshold:
            return 1.0
        return c.drop_probability / 100 * (depth - c.min_threshold) \
            / (c.max_threshold - c.min_threshold)


def egress_bytes(config: SwitchConfig, src: str, dst: str, frame_bytes: int) -> tuple[int, str]:
    """The length a ``frame_bytes`` packet (with FCS) from src has in dst's queue: without
    FCS, its 802.1Q tag gone or added as the ports' VLAN_MEMBER modes say."""
    def tagged(port: str) -> bool:
        return any(v.members.get(port) == "tagged" for v in config.vlans.values())
    length = frame_bytes - 4 - 4 * tagged(src) + 4 * tagged(dst)
    return length, (f"{frame_bytes} B packets: {length} B in {dst}'s queue (no FCS"
                    f"{', untagged on ' + src if tagged(src) else ''}"
                    f"{', tagged on ' + dst if tagged(dst) else ''})")


def _plan(config: SwitchConfig, case: WredCase, frame_bytes: int, marking: str,
          what: str) -> EcnPlan:
    """The curve, the packet count that starts the queue past max_threshold, and the
    buffers' room for it; Unsupported where the profile does not mark green ECT packets,
    the switch marks at enqueue, or the buffers cannot hold that many."""
    if case.flow is None:
        raise Unsupported(case.missing)
    c = case.flow
    profile = config.qos.wred_profiles[case.profile]
    lines = [f"DSCP {c.dscp} -> TC {c.tc} -> PG {c.pg} on {c.src}, queue {c.queue} on "
             f"{c.dst}: QUEUE|{c.dst}|{c.queue} wred_profile {case.profile}"]
    if profile.green is None or profile.ecn not in GREEN_ECN_MODES:
        raise Unsupported(f"{case.switch} {c.dst} queue {c.queue}: WRED_PROFILE|"
                          f"{case.profile} ecn {profile.ecn!r}"
                          f"{'' if profile.green else ', no green thresholds'}: green ECT "
                          "packets are not marked")
    if marking != "dequeue":
        raise Unsupported(f"{case.switch}: marks ECN at {marking} (node label "
                          f"rocelab.ecn-marking); {what} needs marking at dequeue")
    curve = profile.green
    if curve.max_threshold <= 0:
        raise Unsupported(f"{case.switch} {c.dst} queue {c.queue}: WRED_PROFILE|"
                          f"{case.profile} green_max_threshold {curve.max_threshold}: every "
                          "packet is marked, even the last")
    length, why = egress_bytes(config, c.src, c.dst, frame_bytes)
    count = math.ceil(curve.max_threshold / length) + 1
    lines += [f"WRED_PROFILE|{case.profile} ecn {profile.ecn}: green_min_threshold "
              f"{curve.min_threshold} B, green_max_threshold {curve.max_threshold} B, "
              f"green_drop_probability {curve.drop_probability} %", why,
              f"N = ceil({curve.max_threshold} / {length}) + 1 = {count}: the first packet "
              f"leaves {(count - 1) * length} B behind it (>= max: marked), the last 0 B "
              "(< min or at probability 0: not marked)"]
    if pauses_sender(config, c.src, c.tc):
        held = trig_ingr_drp(config, c.src, c.pg, frame_bytes, c.dst, c.queue)
        name = "pkts_num_trig_ingr_drp"
    else:
        held = trig_egr_drp(config, c.src, c.pg, frame_bytes, c.dst, c.queue)
        name = "pkts_num_trig_egr_drp"
    lines += [*held.steps, f"held without a drop: {name} - 1 = {held.value - 1} packets"]
    if count > held.value - 1:
        raise Unsupported(f"{case.switch} {c.src}->{c.dst} queue {c.queue}: the buffers hold "
                          f"{held.value - 1} packets, fewer than the {count} that pass "
                          f"WRED_PROFILE|{case.profile} green_max_threshold (BUFFER_PG/"
                          "BUFFER_QUEUE profiles)")
    return EcnPlan(c.src, c.dst, frame_bytes, c.dscp, c.queue, length, curve, count,
                   lines=lines)


def dequeue_plan(config: SwitchConfig, case: WredCase, frame_bytes: int,
                 marking: str) -> EcnPlan:
    """test_dequeue_ecn: one round of N packets."""
    return _plan(config, case, frame_bytes, marking, "test_dequeue_ecn")


def held_rounds(dut: Dut, plan: EcnPlan) -> list[list[bool]]:
    """Per round: dst's TX off, N ECT packets in, TX on, drained; whether each packet of
    the flow left CE-marked, in egress order. Raises AssertionError if one was lost."""
    src, dst = plan.src, plan.dst
    frame = dut.packet(src, dst, plan.dscp, plan.frame_bytes, ECT1, ident=1)
    drain = plan.count * (plan.frame_bytes + 24) * 8 / dut._speed_bps(dst)
    out = []
    for n in range(plan.rounds):
        dut.set_tx(dst, False)
        dut.send(src, frame, plan.count)
        start = len(dut.captures[dst].frames)
        dut.set_tx(dst, True)
        dut.run(dut.now + 2 * drain)
        marks = [ecn_field(f) == CE for _, f in dut.captures[dst].frames[start:]
                 if _ident(f) == 1]
        assert len(marks) == plan.count, \
            f"{dut.name} {dst}: round {n + 1}: {len(marks)} of {plan.count} packets " \
            "received; expected all (the buffers hold them)"
        out.append(marks)
    return out


def dequeue_ecn(dut: Dut, plan: EcnPlan) -> None:
    """sonic-mgmt's assertion: every packet captured, the first CE, the last not."""
    (marks,) = held_rounds(dut, plan)
    assert marks[0], f"{dut.name} {plan.dst} queue {plan.queue}: the first of {plan.count} " \
                     f"packets left unmarked with {(plan.count - 1) * plan.egress_bytes} B " \
                     f"behind it; expected CE (>= green_max_threshold " \
                     f"{plan.curve.max_threshold} B)"
    assert not marks[-1], f"{dut.name} {plan.dst} queue {plan.queue}: the last of " \
                          f"{plan.count} packets left CE-marked with an empty queue behind " \
                          "it; expected not marked (marking at dequeue)"


def red_plan(config: SwitchConfig, case: WredCase, frame_bytes: int,
             marking: str) -> EcnPlan:
    """test_red_accuracy: ``BUCKETS`` equal spans of queue length from min to max threshold,
    and rounds enough that the thinnest holds ``MIN_TRIALS`` packets."""
    plan = _plan(config, case, frame_bytes, marking, "test_red_accuracy")
    lo, hi = plan.curve.min_threshold, plan.curve.max_threshold
    edges = tuple(lo + (hi - lo) * k / BUCKETS for k in range(BUCKETS + 1))
    depths = [(plan.count - 1 - j) * plan.egress_bytes for j in range(plan.count)]
    per_round = min(sum(a <= d < b for d in depths) for a, b in zip(edges, edges[1:]))
    if per_round == 0:
        raise Unsupported(f"{case.switch} {case.flow.dst} queue {case.flow.queue}: "
                          f"WRED_PROFILE|{case.profile} thresholds {lo}..{hi} B are closer "
                          f"than {BUCKETS} packets of {plan.egress_bytes} B")
    rounds = math.ceil(MIN_TRIALS / per_round)
    lines = [*plan.lines,
             f"{BUCKETS} buckets of queue length in [{lo}, {hi}) B, {per_round} packets per "
             f"round in the thinnest; >= {MIN_TRIALS} trials each -> {rounds} rounds",
             f"per bucket: marks within {SIGMAS} sigma (binomial, sum of p(1-p) over its "
             "packets) + 1 of the sum of the curve's p; below min none, from max all"]
    return EcnPlan(plan.src, plan.dst, frame_bytes, plan.dscp, plan.queue, plan.egress_bytes,
                   plan.curve, plan.count, rounds, edges, lines)


def red_accuracy(dut: Dut, plan: EcnPlan) -> None:
    """Marks per queue-length bucket against the curve: exact outside [min, max), within the
    binomial band inside."""
    rounds = held_rounds(dut, plan)
    depths = [(plan.count - 1 - j) * plan.egress_bytes for j in range(plan.count)]
    spans = [(-math.inf, plan.edges[0]), *zip(plan.edges, plan.edges[1:]),
             (plan.edges[-1], math.inf)]
    off = []
    for a, b in spans:
        idx = [j for j, d in enumerate(depths) if a <= d < b]
        if not idx:
            continue
        p = [plan.probability(depths[j]) for j in idx]
        expected = len(rounds) * sum(p)
        band = SIGMAS * math.sqrt(len(rounds) * sum(x * (1 - x) for x in p))
        band = band + 1 if band else 0
        marked = sum(r[j] for r in rounds for j in idx)
        if abs(marked - expected) > band:
            off.append(f"[{a:.0f}, {b:.0f}) B: {marked} of {len(idx) * len(rounds)} marked, "
                       f"expected {expected:.1f} +- {band:.1f}")
    assert not off, f"{dut.name} {plan.dst} queue {plan.queue}: mark counts off the " \
                    f"WRED_PROFILE curve: {'; '.join(off)}"


def _ident(frame: bytes) -> int | None:
    """The IP id of an IPv4 frame after at most one 802.1Q tag, else None."""
    off = 18 if frame[12:14] == b"\x81\x00" else 14
    if frame[off - 2:off] != b"\x08\x00":
        return None
    return frame[off + 4] << 8 | frame[off + 5]
