"""Per-queue egress rates under congestion, as sonic-mgmt's snappi tests predict them from
the config (``m2o_fluctuating_lossless_helper.get_expected_bg_loss_percent``, rocev2's
``dwrr_expected_rates``): strict-priority queues take what they are offered first (the
highest index first, as the switch serves them), then each backlogged weighted queue gets
its weight's share of what is left; a queue offered less than its share is served in full
and drops out, and what it leaves is shared again (an offered-aware water-fill).

A run here is many senders at fixed rates into one dst port (``Dut.traffic``; lossless
senders honour the DUT's PFC), measured in a window once the backlogged queues are full,
so that a lossy queue drops exactly what it is offered beyond its rate and a lossless one
pauses its senders: served bytes per queue in the window against the water-fill, with a
tolerance of one DWRR quantum and one frame at each edge of the window.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...fabric.config import SwitchConfig
from ...fabric.model.wred import CE, ecn_field
from ...fabric.qos import pauses_sender, pg_of_tc, queue_of_tc, tc_of_dscp
from ..thresholds import pg_profile, shared_limit
from .dut import Dut, Flow
from .ecn import egress_bytes
from .sched import Unsupported, _dscp, quantum_unit, weights
from .snappi import DRAIN_S, WIRE_OVERHEAD, xoff_fill_bytes

ROUNDS = 25  # DWRR rounds in the measured window: its two edges cost at most ~2/25 each
LIGHT_FRAMES = 200  # of the slowest flow in the window: its jitter then costs ~1 %
WARMUP_MARGIN = 1.5  # x the time the slowest backlogged buffer takes to fill


def water_fill(capacity: float, offered: dict[int, float], weight_of: dict[int, int],
               strict: set[int]) -> dict[int, float]:
    """Per queue the rate it is served at (same unit as ``capacity`` and ``offered``)."""
    out = {q: 0.0 for q in offered}
    left = capacity
    for q in sorted(strict & offered.keys(), reverse=True):
        out[q] = min(offered[q], left)
        left -= out[q]
    active = {q for q, rate in offered.items() if q not in strict and rate > 0}
    while active:
        total = sum(weight_of[q] for q in active)
        satisfied = {q for q in active if offered[q] <= left * weight_of[q] / total}
        if not satisfied:
            for q in active:
                out[q] = left * weight_of[q] / total
            break
        for q in satisfied:
            out[q] = offered[q]
            left -= offered[q]
        active -= satisfied
    return out


@dataclass(frozen=True)
class RateFlow:
    """A sender's flow in a plan: ``rate`` of its src's line rate, from ``start`` s."""

    src: str
    dscp: int
    queue: int  # on dst
    priority: int  # its TC: the PFC priority a lossless sender honours
    lossless: bool
    rate: float
    ident: int
    start: float = 0.0


@dataclass(frozen=True)
class RatePlan:
    """Flows into dst, what each queue is offered and must be served (bytes/s of the frames
    as they wait in dst's queues), and when to measure it."""

    dst: str
    frame_bytes: int
    flows: tuple[RateFlow, ...]
    offered: dict[int, float]
    expected: dict[int, float]
    tolerance: dict[int, float]  # bytes over the window
    capacity: float  # dst's bytes/s
    weight_of: dict[int, int]  # the weighted queues of dst
    egress_len: int  # a frame's bytes in dst's queue
    src_rate: dict[str, float]  # per src, what its full line rate offers dst (bytes/s)
    warmup: float
    window: float
    lines: list[str] = field(default_factory=list)

    def offered_of(self, flow: RateFlow) -> float:
        """Bytes/s (as queued at dst) a flow offers at its src's full line rate."""
        return self.src_rate[flow.src]


def queues_of(config: SwitchConfig, src: str, dst: str) -> dict[int, tuple[int, int]]:
    """Per queue of dst a DSCP from src reaches: (the lowest such DSCP, its TC)."""
    out: dict[int, tuple[int, int]] = {}
    for dscp in range(64):
        tc, _ = tc_of_dscp(config, src, dscp)
        out.setdefault(queue_of_tc(config, dst, tc)[0], (dscp, tc))
    return out


def rate_flow(config: SwitchConfig, src: str, dst: str, dscp: int, rate: float,
              ident: int, start: float = 0.0) -> RateFlow:
    tc, _ = tc_of_dscp(config, src, dscp)
    return RateFlow(src, dscp, queue_of_tc(config, dst, tc)[0], tc,
                    pauses_sender(config, src, tc), rate, ident, start)


def rate_plan(config: SwitchConfig, dst: str, flows: list[RateFlow], frame_bytes: int,
              lines: list[str]) -> RatePlan:
    """The water-fill of ``flows`` into dst, the warm-up that fills every backlogged
    buffer, the window of ``ROUNDS`` rounds and each queue's tolerance."""
    weight_of, weight_lines = weights(config, dst)
    strict = set(range(8)) - weight_of.keys()
    capacity = config.ports[dst].speed_mbps * 1e6 / 8
    offered: dict[int, float] = {}
    frame_len: dict[int, int] = {}
    length = 0
    src_rate: dict[str, float] = {}
    for f in flows:
        length, _ = egress_bytes(config, f.src, dst, frame_bytes)
        frames_s = f.rate * config.ports[f.src].speed_mbps * 1e6 / 8 \
            / (frame_bytes + WIRE_OVERHEAD - 4)
        offered[f.queue] = offered.get(f.queue, 0.0) + frames_s * length
        src_rate[f.src] = frames_s * length / f.rate
        frame_len[f.queue] = length
    expected = water_fill(capacity, offered, weight_of, strict)
    unit, unit_line = quantum_unit(config, dst, weight_of)
    lines = [*lines, *(ln for ln in weight_lines if any(f"|{q} " in ln for q in offered)),
             unit_line, f"PORT|{dst} speed {config.ports[dst].speed_mbps} Mb/s -> "
             f"{capacity / 1e9:.3f} GB/s of queued frame bytes (the model paces them "
             "without FCS, preamble and gap)"]
    backlogged = {q for q in offered if expected[q] < offered[q] * (1 - 1e-9)}
    round_bytes = sum(weight_of[q] * unit for q in backlogged if q in weight_of)
    # a queue served in full sees its senders' jitter (they share their wires): the window
    # also holds LIGHT_FRAMES frames of the slowest flow
    slowest = min(f.rate * src_rate[f.src] for f in flows)
    window = max(ROUNDS * max(round_bytes, length) / capacity, LIGHT_FRAMES * length / slowest)
    warmup, fills = _warmup(config, dst, flows, offered, expected, backlogged)
    tolerance = {q: 2 * ((weight_of.get(q, 0) * unit if q not in strict else 0) + frame_len[q])
                 for q in offered}
    for q in sorted(offered):
        kind = "STRICT" if q in strict else f"weight {weight_of[q]}"
        lines.append(f"queue {q} ({kind}): offered {offered[q] / capacity:.2%}, water-fill "
                     f"{expected[q] / capacity:.2%} of {dst}"
                     f"{' (backlogged)' if q in backlogged else ''}; tolerance "
                     f"{tolerance[q]} B in the window (one quantum + one frame per edge)")
    lines += fills
    lines.append(f"warm-up {warmup * 1e3:.3f} ms; window {window * 1e3:.3f} ms: the longer of "
                 f"{ROUNDS} DWRR rounds of {round_bytes} B and {LIGHT_FRAMES} frames of the "
                 f"slowest flow ({slowest:.3g} B/s)")
    return RatePlan(dst, frame_bytes, tuple(flows), offered, expected, tolerance, capacity,
                    weight_of, length, src_rate, warmup, window, lines)


def _warmup(config: SwitchConfig, dst: str, flows: list[RateFlow], offered: dict[int, float],
            expected: dict[int, float], backlogged: set[int]) -> tuple[float, list[str]]:
    """How long the backlogged buffers take to fill, x ``WARMUP_MARGIN``: a lossy queue its
    BUFFER_QUEUE room (shared with the other backlogged queues of its pool), a lossless one
    each sender's PG to XOFF at its share of the excess."""
    lines, slowest = [], 0.0
    by_pool: dict[str, list[int]] = {}
    for q in backlogged:
        name = config.qos.buffer_queue.get((dst, q))
        lossless = any(f.lossless for f in flows if f.queue == q)
        if name is not None and not lossless:
            by_pool.setdefault(config.qos.buffer_profiles[name].pool, []).append(q)
        elif not lossless:
            raise Unsupported(f"{config.hostname} {dst}: queue {q} is backlogged lossy but has "
                              f"no BUFFER_QUEUE limit (BUFFER_QUEUE|{dst}|{q}); its excess "
                              "waits in the ingress PGs instead of dropping at egress")
    for pool, queues in by_pool.items():
        for q in queues:
            profile = config.qos.buffer_profiles[config.qos.buffer_queue[(dst, q)]]
            room = profile.size + shared_limit(profile, config.qos.buffer_pools[pool],
                                               len(queues))
            seconds = room / (offered[q] - expected[q])
            slowest = max(slowest, seconds)
            lines.append(f"BUFFER_QUEUE|{dst}|{q} {profile.name}, one of {len(queues)} "
                         f"backlogged in {pool}: {room:.0f} B at {offered[q] - expected[q]:.3g}"
                         f" B/s excess -> {seconds * 1e3:.3f} ms to fill")
    _ingress_first(config, dst, flows, {q: r for pool in by_pool.values() for q, r in
                                        ((q, _room(config, dst, q, len(pool))) for q in pool)})
    for q in backlogged:
        senders = [f for f in flows if f.queue == q and f.lossless]
        for f in senders:
            pg = pg_of_tc(config, f.src, f.priority)[0]
            fill, why = xoff_fill_bytes(config, f.src, pg)
            excess = (offered[q] - expected[q]) / len(senders)
            seconds = fill / excess
            slowest = max(slowest, seconds)
            lines.append(f"{why}; its share of queue {q}'s excess {excess:.3g} B/s -> "
                         f"{seconds * 1e3:.3f} ms to XOFF")
    return WARMUP_MARGIN * slowest, lines


def _room(config: SwitchConfig, dst: str, queue: int, sharers: int) -> float:
    profile = config.qos.buffer_profiles[config.qos.buffer_queue[(dst, queue)]]
    return profile.size + shared_limit(profile, config.qos.buffer_pools[profile.pool], sharers)


def _ingress_first(config: SwitchConfig, dst: str, flows: list[RateFlow],
                   rooms: dict[int, float]) -> None:
    """Unsupported where a src's lossy PG reaches its limit before dst's backlogged lossy
    queues hold their part from it: its ingress drops then hit every lossy flow of the src
    alike, not as the water-fill shares dst."""
    srcs = sorted({f.src for f in flows})
    for src in srcs:
        pgs = {pg_of_tc(config, src, f.priority)[0] for f in flows
               if f.src == src and not f.lossless}
        for pg in pgs:
            profile = pg_profile(config, src, pg)
            if profile is None:
                continue
            room = profile.size + shared_limit(profile, config.qos.buffer_pools[profile.pool],
                                               len(srcs))
            held = sum(rooms.values()) / len(srcs)
            if room < held:
                raise Unsupported(
                    f"{config.hostname} {src}: its lossy PG {pg} (BUFFER_PG|{src}|{pg} "
                    f"{profile.name}) fills at {room:.0f} B, before {dst}'s backlogged lossy "
                    f"queues hold their {held:.0f} B from it (BUFFER_QUEUE|{dst}): ingress "
                    "drops would take from every lossy flow alike, not as the DWRR "
                    "water-fill shares the port")


@dataclass
class Measured:
    """What a run gave: per flow (sent, received), per queue bytes served in the window
    and what it was offered (bytes/s), PFC frames each sender's port got per priority,
    CE-marked frames received."""

    flows: list[tuple[RateFlow, int, int]]
    served: dict[int, int]
    offered: dict[int, float]
    pfc_tx: dict[str, list[int]]
    ce: int


def run(dut: Dut, plan: RatePlan) -> Measured:
    """The flows for warm-up + window, then a drain; counted from dst's capture."""
    dst = plan.dst
    flows = [Flow(f.src, dut.packet(f.src, dst, f.dscp, plan.frame_bytes, 1, ident=f.ident),
                  f.rate, f.priority if f.lossless else None, f.start + 1e-9 * n)
             for n, f in enumerate(plan.flows)]
    srcs = {f.src for f in plan.flows}
    pfc_before = {s: list(dut.read()["ports"][s]["pfc_tx"]) for s in srcs}
    start, begin = len(dut.captures[dst].frames), dut.now
    dut.traffic(flows, plan.warmup + plan.window)
    dut.run(dut.now + DRAIN_S)
    t0, t1 = begin + plan.warmup, begin + plan.warmup + plan.window
    served = {q: 0 for q in plan.offered}
    queue_of = {f.dscp: f.queue for f in plan.flows}
    ce = 0
    for at, frame in dut.captures[dst].frames[start:]:
        dscp = _dscp(frame)
        if dscp in queue_of:
            ce += ecn_field(frame) == CE
            if t0 <= at < t1:
                served[queue_of[dscp]] += len(frame)
    got = dut.idents(dst, start)
    counters = dut.read()["ports"]
    pfc = {s: [a - b for a, b in zip(counters[s]["pfc_tx"], pfc_before[s])] for s in srcs}
    # a lossy sender's rate as it was: its port's senders share one wire, so one held back
    # by another keeps its gap from where it sent; a lossless one's demand is its plan's
    offered = {q: 0.0 for q in plan.offered}
    for f, flow in zip(plan.flows, flows):
        offered[f.queue] += (f.rate * plan.offered_of(f) if f.lossless else
                             flow.sent * plan.egress_len / (plan.warmup + plan.window - f.start))
    return Measured([(f, flow.sent, got[f.ident]) for f, flow in zip(plan.flows, flows)],
                    served, offered, pfc, ce)


def check_rates(dut: Dut, plan: RatePlan, got: Measured) -> None:
    """Served bytes per queue in the window within tolerance of the water-fill of what
    the senders offered."""
    off = {}
    strict = set(range(8)) - plan.weight_of.keys()
    for q, rate in water_fill(plan.capacity, got.offered, plan.weight_of, strict).items():
        want = rate * plan.window
        if abs(got.served[q] - want) > plan.tolerance[q]:
            off[q] = (f"{got.served[q]} B ({got.served[q] / plan.window / rate - 1:+.1%}), "
                      f"expected {want:.0f} +- {plan.tolerance[q]} B")
    assert not off, f"{dut.name} {plan.dst}: per-queue bytes served in the " \
                    f"{plan.window * 1e3:.3f} ms window off the DWRR water-fill: {off}"


def check_lossless(dut: Dut, got: Measured) -> None:
    lost = {f"{f.src} DSCP {f.dscp}": (sent, received) for f, sent, received in got.flows
            if f.lossless and received != sent}
    assert not lost, f"{dut.name}: lossless flows (sent, received) {lost}; expected 0 loss"


def loss_lines(plan: RatePlan, got: Measured) -> list[str]:
    """Per lossy queue, the loss in the window the water-fill predicts and the measured."""
    out = []
    for q in sorted(plan.offered):
        if any(f.queue == q and not f.lossless for f in plan.flows):
            want = 1 - plan.expected[q] / plan.offered[q]
            have = 1 - got.served[q] / (got.offered[q] * plan.window)
            out.append(f"queue {q}: loss {have:.2%}, water-fill {want:.2%}")
    return out


def lossy_flows(config: SwitchConfig, srcs: list[str], dst: str, frame_bytes: int
                ) -> tuple[list[RateFlow], list[str]]:
    """Background for the m2o cases: every src sends on each lossy queue of dst a DSCP
    reaches; the strict queues and the lower half of the weighted ones light (an eighth of
    an equal split: served in full), the other half heavy (the rest of the src's line
    rate: backlogged), so the water-fill both satisfies some queues and shares the rest.
    Queues without a BUFFER_QUEUE limit are left out: nothing drops there."""
    weight_of, _ = weights(config, dst)
    reached = queues_of(config, srcs[0], dst)
    lossy = {q: d for q, (d, tc) in reached.items() if not pauses_sender(config, srcs[0], tc)}
    unlimited = sorted(q for q in lossy if (dst, q) not in config.qos.buffer_queue)
    lossy = {q: d for q, d in lossy.items() if q not in unlimited}
    weighted = sorted(q for q in lossy if q in weight_of)
    light = [q for q in lossy if q not in weight_of] + weighted[:len(weighted) // 2]
    heavy = weighted[len(weighted) // 2:]
    if not heavy:
        raise Unsupported(f"{config.hostname} {dst}: no lossy queue a DSCP reaches has a "
                          f"SCHEDULER weight (QUEUE|{dst}|<q> scheduler)")
    share = 1 / (8 * len(lossy))
    heavy_rate = (1 - share * len(light)) / len(heavy)
    flows, lines = [], []
    for n, src in enumerate(srcs):
        for q in sorted(lossy):
            rate = share if q in light else heavy_rate
            flows.append(rate_flow(config, src, dst, lossy[q], rate, 100 * (n + 1) + q))
    if unlimited:
        lines.append(f"lossy queues {unlimited} of {dst}: no BUFFER_QUEUE, so no egress drop "
                     "to measure; left out")
    lines.append(f"lossy queues {sorted(lossy)} of {dst}: light {sorted(light)} at "
                 f"{share:.2%}, heavy {heavy} at {heavy_rate:.2%} of each src's line rate")
    return flows, lines


def m2o_lossy_plan(config: SwitchConfig, switch: str, src: str, dst: str, ports: list[str],
                   frame_bytes: int) -> RatePlan:
    """test_m2o_oversubscribe_lossy: src and the next other wired port into dst, each at
    its line rate on dst's lossy queues (``lossy_flows``)."""
    others = [p for p in ports if p not in (src, dst)]
    if not others:
        raise Unsupported(f"{switch}: {len(ports)} wired ports; many-to-one needs a second src")
    srcs = [src, others[0]]
    flows, lines = lossy_flows(config, srcs, dst, frame_bytes)
    return rate_plan(config, dst, flows, frame_bytes,
                     [f"srcs {srcs} -> {dst}, 100 % of each line rate", *lines])


def m2o_lossy(dut: Dut, plan: RatePlan) -> list[str]:
    """Each lossy queue served at its water-fill rate in the window (so it loses what it
    is offered beyond it); no PFC sent. Returns the loss lines for the report."""
    got = run(dut, plan)
    check_rates(dut, plan, got)
    pfc = {s: p for s, p in got.pfc_tx.items() if any(p)}
    assert not pfc, f"{dut.name}: PFC sent {pfc}; expected none for lossy traffic"
    return loss_lines(plan, got)

