"""The logic of sonic-mgmt's scheduling and dot1p cases (``testQosSaiDwrr``,
``testQosSaiDwrrWeightChange``, ``testQosSaiDot1pQueueMapping``, ``testQosSaiDot1pPgMapping``),
as plain functions the pytest cases and their seeded-defect unit tests both call.

Each case is a plan, made from the DUT's config alone (what to send, what to expect, and
the lines saying how each number follows from the config; ``Unsupported`` when the config
lacks what the case needs), and a run of that plan on a DUT, which raises AssertionError
with what was measured against what was expected.
"""
from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass, field

from ...fabric.config import SwitchConfig
from ...fabric.model.frames import ETH_HEADER_LEN, ETH_P_8021Q, ETH_P_IPV4, VLAN_TAG_LEN
from ...fabric.model.wred import ECT1
from ...fabric.qos import bound, pauses_sender, pg_of_tc, queue_of_tc, tc_of_dscp, tc_of_pcp
from ...labs.topology import Node
from ..thresholds import pg_profile, shared_limit
from .cases import PortPair
from .dut import Dut

MAX_ROUNDS = 10  # DWRR rounds a case sends at most: the limit is one round, 1/10 of it all
MIN_ROUNDS = 2  # fewer, and "all queues finish together" says nothing
FILL = 0.9  # of what the buffers hold, to stay clear of a threshold's rounding
PCPS = range(8)


class Unsupported(Exception):
    """The lab's config cannot support the case; the message names the table/field."""


@dataclass(frozen=True)
class DwrrPlan:
    """What ``testQosSaiDwrr`` sends from src to dst, per DWRR queue, and the finish-order
    limit its weights allow."""

    src: str
    dst: str
    frame_bytes: int
    dscps: dict[int, int]  # queue -> the DSCP that reaches it
    counts: dict[int, int]  # queue -> packets
    limit: int  # for every queue, total - position of its last packet must stay below
    lines: list[str] = field(default_factory=list)


def weights(config: SwitchConfig, port: str) -> tuple[dict[int, int], list[str]]:
    """The DWRR/WRR weight of each queue of ``port`` (QUEUE|port|q -> SCHEDULER), strict
    queues left out; queues without a scheduler get SAI's default (WRR, weight 1), as the
    switch schedules them."""
    out, lines = {}, []
    for queue in range(8):
        entry = config.qos.queues.get((port, queue))
        if entry is None or entry.scheduler is None:
            out[queue] = 1
            lines.append(f"QUEUE|{port}|{queue}: no scheduler -> SAI default WRR weight 1")
            continue
        scheduler = config.qos.schedulers[entry.scheduler]
        if scheduler.type == "STRICT":
            lines.append(f"QUEUE|{port}|{queue} scheduler {entry.scheduler} -> STRICT "
                         "(not weighted)")
            continue
        out[queue] = scheduler.weight or 1
        lines.append(f"QUEUE|{port}|{queue} scheduler {entry.scheduler} -> "
                     f"SCHEDULER|{entry.scheduler} {scheduler.type} weight {out[queue]}")
    return out, lines


def quantum_unit(config: SwitchConfig, port: str, weight_of: dict[int, int]) -> tuple[int, str]:
    """Bytes of DWRR credit per unit of weight: the port's largest frame over its smallest
    weight, so that a visit to the lightest queue still sends a whole frame."""
    largest = config.ports[port].mtu + ETH_HEADER_LEN + VLAN_TAG_LEN
    unit = math.ceil(largest / min(weight_of.values()))
    return unit, (f"PORT|{port} mtu {config.ports[port].mtu} -> largest frame {largest} B; "
                  f"/ smallest weight {min(weight_of.values())} -> {unit} B of credit per "
                  "unit of weight per round")


def dwrr_plan(config: SwitchConfig, pair: PortPair, frame_bytes: int,
              switch: str = "") -> DwrrPlan:
    """sonic-mgmt's WRRtest, from the config: per weighted queue of dst a DSCP reaching it
    and a packet count proportional to its credit per round (its weight x the quantum
    unit) for as many rounds as the buffers hold (at most ``MAX_ROUNDS``); the limit is
    the packets of one round, what DWRR may serve after a queue's last packet when all
    finish together."""
    src, dst = pair.src, pair.dst
    weight_of, lines = weights(config, dst)
    dscps: dict[int, int] = {}
    for dscp in range(64):
        tc, dscp_map = tc_of_dscp(config, src, dscp)
        queue, queue_map = queue_of_tc(config, dst, tc)
        if queue in weight_of and queue not in dscps:
            dscps[queue] = dscp
            lines.append(f"DSCP_TO_TC_MAP|{dscp_map} {dscp} -> TC {tc}; TC_TO_QUEUE_MAP|"
                         f"{queue_map} on {dst} -> queue {queue} (the lowest DSCP there)")
    if len(dscps) < 2:
        raise Unsupported(f"{switch or config.hostname} {dst}: fewer than two queues a DSCP "
                          "reaches have SCHEDULER weights (QUEUE|" f"{dst}|<q> scheduler)")
    unit, why = quantum_unit(config, dst, weight_of)
    lines.append(why)
    wire = frame_bytes - 4  # the switch is handed frames without their FCS
    per_round = {q: weight_of[q] * unit / wire for q in dscps}
    rounds, held = rounds_held(config, src, dst, dscps, {q: weight_of[q] * unit for q in dscps})
    lines += held
    if rounds < MIN_ROUNDS:
        raise Unsupported(f"{switch or config.hostname} {src}->{dst}: the buffers hold "
                          f"{rounds} DWRR round(s), fewer than {MIN_ROUNDS} "
                          "(BUFFER_QUEUE/BUFFER_PG profiles' thresholds)")
    counts = {q: round(rounds * per_round[q]) for q in dscps}
    # after a queue's last packet DWRR serves at most one round of every other queue,
    # each carrying at most one frame of deficit into it
    limit = math.ceil(sum(per_round.values())) + len(dscps)
    for q in dscps:
        lines.append(f"queue {q}: weight {weight_of[q]} x {unit} B = {weight_of[q] * unit} B "
                     f"per round = {per_round[q]:.2f} packets of {wire} B; x "
                     f"{rounds} rounds -> {counts[q]} packets")
    lines.append(f"limit: one round, {sum(per_round.values()):.2f} packets, + one frame of "
                 f"deficit per queue ({len(dscps)}) -> {limit} of {sum(counts.values())}")
    return DwrrPlan(src, dst, frame_bytes, dscps, counts, limit, lines)


def rounds_held(config: SwitchConfig, src: str, dst: str, dscps: dict[int, int],
                credit: dict[int, int]) -> tuple[int, list[str]]:
    """How many DWRR rounds (``credit`` bytes per queue each) dst's queues and src's PGs
    hold with dst's TX disabled, ``FILL`` of their thresholds, at most ``MAX_ROUNDS``:
    per egress pool the queues filling it together, per ingress PG the queues it feeds (a
    lossless PG up to its XOFF point, where the DUT would pause its sender)."""
    lines, rounds = [], float(MAX_ROUNDS)
    by_pool: dict[str, list[int]] = {}
    for q in dscps:
        name = config.qos.buffer_queue.get((dst, q))
        if name is not None:
            by_pool.setdefault(config.qos.buffer_profiles[name].pool, []).append(q)
    for pool_name, queues in by_pool.items():
        pool = config.qos.buffer_pools[pool_name]
        for q in queues:
            profile = config.qos.buffer_profiles[config.qos.buffer_queue[(dst, q)]]
            room = profile.size + shared_limit(profile, pool, len(queues))
            rounds = min(rounds, FILL * room / credit[q])
            lines.append(f"BUFFER_QUEUE|{dst}|{q} {profile.name} in {pool_name} with "
                         f"{len(queues)} queue(s) filling it: {room:.0f} B -> "
                         f"{FILL * room / credit[q]:.1f} rounds")
    by_pg: dict[int, list[int]] = {}
    for q, dscp in dscps.items():
        by_pg.setdefault(pg_of_tc(config, src, tc_of_dscp(config, src, dscp)[0])[0],
                         []).append(q)
    for pg, queues in by_pg.items():
        profile = pg_profile(config, src, pg)
        if profile is None:
            continue
        pool = config.qos.buffer_pools[profile.pool]
        room = profile.size + shared_limit(profile, pool, len(by_pg))
        need = sum(credit[q] for q in queues)
        rounds = min(rounds, FILL * room / need)
        lines.append(f"BUFFER_PG|{src}|{pg} {profile.name} (queues {sorted(queues)}), one of "
                     f"{len(by_pg)} PG(s) in {profile.pool}: {room:.0f} B -> "
                     f"{FILL * room / need:.1f} rounds")
    held = int(rounds)
    lines.append(f"rounds: {held} (at most {MAX_ROUNDS})")
    return held, lines


def dwrr(dut: Dut, plan: DwrrPlan) -> None:
    """WRRtest: dst TX off, each queue's packets sent in turn (ECT, so a WRED profile marks
    rather than drops them), TX on; in the egress order, for each queue, total - position
    of its last packet < limit; nothing dropped, every packet received."""
    src, dst = plan.src, plan.dst
    before = _drops(dut, src, dst)
    dut.set_tx(dst, False)
    for queue, dscp in plan.dscps.items():
        frame = dut.packet(src, dst, dscp, plan.frame_bytes, ecn=ECT1)
        dut.send(src, frame, plan.counts[queue])
    start = len(dut.captures[dst].frames)
    dut.set_tx(dst, True)
    drain = sum(plan.counts.values()) * (plan.frame_bytes + 24) * 8 \
        / (dut.config.ports[dst].speed_mbps * 1e6)
    dut.run(dut.now + 2 * drain)
    queue_of = {dscp: q for q, dscp in plan.dscps.items()}
    order = [queue_of[d] for d in map(_dscp, (f for _, f in dut.captures[dst].frames[start:]))
             if d in queue_of]
    total = sum(plan.counts.values())
    dropped = {k: v - before.get(k, 0) for k, v in _drops(dut, src, dst).items()
               if v != before.get(k, 0)}
    assert not dropped, f"{dut.name} {src}->{dst}: drops {dropped}, expected none"
    assert Counter(order) == Counter(plan.counts), \
        f"{dut.name} {dst}: received per queue {dict(Counter(order))}, sent {plan.counts}"
    last = {q: i for i, q in enumerate(order, 1)}
    diffs = {q: total - last[q] for q in plan.counts}
    late = {q: d for q, d in diffs.items() if d >= plan.limit}
    assert not late, (f"{dut.name} {dst}: packets after each queue's last one {diffs}; "
                      f"expected each < {plan.limit} (queues {sorted(late)} finished early)")


def changed_weights(config: SwitchConfig, port: str) -> tuple[SwitchConfig, list[str]]:
    """The config with SCHEDULER weights rewritten as sonic-mgmt's wrr_chg does
    (lossy_weight/lossless_weight, TD3: 8 and 30 from 14 and 15): the schedulers of
    ``port``'s queues that carry a lossless TC double their weight, the others halve it
    (at least 1). Raises Unsupported when no queue of ``port`` has a weighted scheduler."""
    lossless_queues = {queue_of_tc(config, port, tc)[0] for tc in range(8)
                       if pauses_sender(config, port, tc)}
    names: dict[str, bool] = {}
    for queue in range(8):
        entry = config.qos.queues.get((port, queue))
        if entry is not None and entry.scheduler is not None \
                and config.qos.schedulers[entry.scheduler].type != "STRICT":
            names[entry.scheduler] = names.get(entry.scheduler, False) \
                or queue in lossless_queues
    if not names:
        raise Unsupported(f"{config.hostname} {port}: no queue has a DWRR/WRR scheduler "
                          f"(QUEUE|{port}|<q> scheduler -> SCHEDULER weight)")
    schedulers = dict(config.qos.schedulers)
    lines = []
    for name, lossless in names.items():
        old = schedulers[name].weight or 1
        new = min(100, 2 * old) if lossless else max(1, old // 2)
        schedulers[name] = dataclasses.replace(schedulers[name], weight=new)
        lines.append(f"SCHEDULER|{name} weight {old} -> {new} "
                     f"({'lossless' if lossless else 'lossy'} queues: "
                     f"{'doubled' if lossless else 'halved'})")
    qos = dataclasses.replace(config.qos, schedulers=schedulers)
    return dataclasses.replace(config, qos=qos), lines


def with_config(node: Node, config: SwitchConfig) -> Node:
    """The lab node with another config: the DUT as CONFIG_DB has been rewritten."""
    return dataclasses.replace(node, config=config)


# --------------------------------------------------------------------------- dot1p


@dataclass(frozen=True)
class Dot1pPlan:
    """Per PCP the TC, PG (src) and queue (dst) the config gives; whether the frames must
    be non-IP (a DSCP map on src classifies IP by DSCP) and so bridged to dst."""

    src: str
    dst: str
    frame_bytes: int
    non_ip: bool
    pgs: dict[int, int]  # pcp -> PG on src
    queues: dict[int, int]  # pcp -> queue on dst
    lines: list[str] = field(default_factory=list)


def dot1p_plan(config: SwitchConfig, pair: PortPair, frame_bytes: int,
               bridged_dst: bool = False) -> Dot1pPlan:
    """Dot1pToQueueMapping / Dot1pToPgMapping from the config: only where src binds a
    DOT1P_TO_TC_MAP. Where src binds a DSCP_TO_TC_MAP too, IP is classified by DSCP, so
    the frames are non-IP (RoCEv1-shaped) and, for the queue case (``bridged_dst``),
    must be bridged: dst is then the next member of src's VLAN after the pair's dst."""
    src = pair.src
    dot1p_map, key = bound(config.qos, src, "dot1p_to_tc_map")
    if dot1p_map is None:
        raise Unsupported(f"{pair.switch} {src}: no DOT1P_TO_TC_MAP bound "
                          f"(PORT_QOS_MAP|{src} dot1p_to_tc_map)")
    lines = [f"PORT_QOS_MAP|{key} dot1p_to_tc_map {dot1p_map}"]
    dscp_map, dscp_key = bound(config.qos, src, "dscp_to_tc_map")
    non_ip = dscp_map is not None
    dst = pair.dst
    if non_ip:
        lines.append(f"PORT_QOS_MAP|{dscp_key} dscp_to_tc_map {dscp_map}: IP is classified "
                     "by DSCP, so the PCP frames are non-IP (EtherType 0x8915)")
        if bridged_dst:
            dst = _vlan_peer(config, pair)
            if dst is None:
                raise Unsupported(
                    f"{pair.switch} {src}: in no VLAN with another member (VLAN_MEMBER), "
                    "so the non-IP frames PCP classifies (DSCP_TO_TC_MAP bound) reach no "
                    "other port")
            lines.append(f"dst: {dst}, the next member of {src}'s VLAN (VLAN_MEMBER)")
    pgs, queues = {}, {}
    for pcp in PCPS:
        tc, _ = tc_of_pcp(config, src, pcp)
        pgs[pcp], pg_map = pg_of_tc(config, src, tc)
        queues[pcp], queue_map = queue_of_tc(config, dst, tc)
        lines.append(f"DOT1P_TO_TC_MAP|{dot1p_map} {pcp} -> TC {tc}; TC_TO_PRIORITY_GROUP_MAP|"
                     f"{pg_map} on {src} -> PG {pgs[pcp]}; TC_TO_QUEUE_MAP|{queue_map} on "
                     f"{dst} -> queue {queues[pcp]}")
    return Dot1pPlan(src, dst, frame_bytes, non_ip, pgs, queues, lines)


def _vlan_peer(config: SwitchConfig, pair: PortPair) -> str | None:
    vlan = next((v for v in config.vlans.values() if pair.src in v.members), None)
    if vlan is None:
        return None
    members = [p for p in config.ports if p in vlan.members and p != pair.src]
    return pair.dst if pair.dst in members else next(iter(members), None)


def _dot1p_frame(dut: Dut, plan: Dot1pPlan, pcp: int, ident: int,
                 forwarded: bool = True) -> bytes:
    if plan.non_ip:
        return dut.l2_frame(plan.src, plan.dst if forwarded else None, pcp, plan.frame_bytes)
    return dut.packet(plan.src, plan.dst, 0, plan.frame_bytes, pcp=pcp, ident=ident)


def dot1p_queues(dut: Dut, plan: Dot1pPlan) -> None:
    """Dot1pToQueueMapping: a frame per PCP; each dst queue's TX delta == the PCPs mapped
    to it, and every frame received."""
    before = dut.read()["ports"][plan.dst]["queues"]
    start = len(dut.captures[plan.dst].frames)
    for pcp in PCPS:
        dut.send(plan.src, _dot1p_frame(dut, plan, pcp, pcp))
    dut.run(dut.now + 0.001)
    after = dut.read()["ports"][plan.dst]["queues"]
    got = {q: after[str(q)]["tx_packets"] - before[str(q)]["tx_packets"] for q in range(8)}
    expected = Counter(plan.queues.values())
    received = len(dut.captures[plan.dst].frames) - start
    assert received == len(PCPS), f"{received} of {len(PCPS)} frames reached {plan.dst}"
    assert got == {q: expected.get(q, 0) for q in range(8)}, \
        f"per-queue TX on {plan.dst}: {got}, expected {dict(sorted(expected.items()))}"


def dot1p_pgs(dut: Dut, plan: Dot1pPlan) -> None:
    """Dot1pToPgMapping: a frame per PCP; each src PG's packet counter rises by the PCPs
    mapped to it (a non-IP frame goes to the router MAC: counted in its PG, never
    forwarded, so any pair will do)."""
    before = dut.read()["ports"][plan.src]["pgs"]
    for pcp in PCPS:
        dut.send(plan.src, _dot1p_frame(dut, plan, pcp, pcp, forwarded=False))
    after = dut.read()["ports"][plan.src]["pgs"]
    got = {pg: after[str(pg)]["rx_packets"] - before[str(pg)]["rx_packets"] for pg in range(8)}
    expected = Counter(plan.pgs.values())
    assert got == {pg: expected.get(pg, 0) for pg in range(8)}, \
        f"per-PG packets on {plan.src}: {got}, expected {dict(sorted(expected.items()))}"


# --------------------------------------------------------------------------- helpers


def _dscp(frame: bytes) -> int | None:
    """The DSCP of an IPv4 frame (after at most one 802.1Q tag), None for anything else."""
    off = 14
    ethertype = frame[12] << 8 | frame[13]
    if ethertype == ETH_P_8021Q:
        ethertype, off = frame[16] << 8 | frame[17], 18
    return frame[off + 1] >> 2 if ethertype == ETH_P_IPV4 and len(frame) > off + 1 else None


def _drops(dut: Dut, *ports: str) -> dict[str, int]:
    """Every drop counter of ``ports``: ingress reasons, egress reasons, PG drops."""
    counters = dut.read()["ports"]
    out: dict[str, int] = {}
    for port in ports:
        c = counters[port]
        for reason, n in {**c["drops"], **c["egress_drops"]}.items():
            out[f"{port} {reason}"] = n
        for pg, fields in c["pgs"].items():
            out[f"{port} pg{pg}"] = fields["drops"]
    return out
