"""The logic of sonic-mgmt's snappi (traffic generator) cases, ``tests/snappi_tests/pfc``:
rate-based flows from the DUT's PTF ports (``Dut.traffic``), senders that honour the PFC
the DUT sends them, pause storms into the egress port. As in ``sched``: a plan from the
config alone (lines saying how each number follows from it; ``Unsupported`` when the
config lacks what the case needs), then a run on a DUT that raises AssertionError.

Durations are virtual: what the case needs to show its effect (a storm interval, the fill
to XOFF), not snappi's 15 s of wall time, so that a case sends thousands of frames, not
billions.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...fabric.config import SwitchConfig
from ...fabric.model.cable import NS_PER_METRE
from ...fabric.model.frames import ETH_P_MAC_CONTROL, MAC_CONTROL_PAUSE, pfc_frame
from ...fabric.model.wred import ECT1
from ...fabric.qos import PAUSE_QUANTA, bound, pg_of_tc, queue_of_tc, tc_of_dscp
from ..thresholds import pg_profile, xoff_trigger
from .cases import PortCase
from .dut import PAUSE_QUANTUM_BITS, Dut, Flow
from .sched import Unsupported

MAX_QUANTA = 0xFFFF
TEST_RATE = 0.45  # snappi's pause tests: the test flow and the background flows, 45 % each
WIRE_OVERHEAD = 24  # FCS, preamble and inter-frame gap: bytes a frame takes on the wire
DRAIN_S = 0.01  # after the flows stop: long enough for any queue here to empty


def storm(dut: Dut, port: str, priorities: tuple[int, ...]) -> Flow:
    """snappi's continuous storm into ``port``: PFC frames pausing ``priorities`` for the
    largest quanta, two per pause time (each refreshes the pause at half-time)."""
    frame = pfc_frame(bytes(6), {p: MAX_QUANTA for p in priorities})
    return Flow(port, frame, 2 * (len(frame) + WIRE_OVERHEAD) * 8
                / (MAX_QUANTA * PAUSE_QUANTUM_BITS))


def global_pause(dut: Dut, port: str) -> Flow:
    """An 802.3x PAUSE storm into ``port`` (every priority, largest quanta), two per pause
    time."""
    frame = (bytes.fromhex("0180c2000001") + bytes(6) + ETH_P_MAC_CONTROL.to_bytes(2, "big")
             + MAC_CONTROL_PAUSE.to_bytes(2, "big") + MAX_QUANTA.to_bytes(2, "big"))
    frame += bytes(60 - len(frame))
    return Flow(port, frame, 2 * (len(frame) + WIRE_OVERHEAD) * 8
                / (MAX_QUANTA * PAUSE_QUANTUM_BITS))


def pause_seconds(config: SwitchConfig, port: str, quanta: int = MAX_QUANTA) -> float:
    return quanta * PAUSE_QUANTUM_BITS / (config.ports[port].speed_mbps * 1e6)


def pfc_priorities(config: SwitchConfig, port: str, queue: int) -> tuple[tuple[int, ...], str]:
    """The PFC priorities whose pause stops ``queue`` of ``port`` (PORT_QOS_MAP
    pfc_to_queue_map; SAI's identity without one)."""
    name, key = bound(config.qos, port, "pfc_to_queue_map")
    mapping = config.qos.pfc_priority_to_queue[name] if name else {p: p for p in range(8)}
    where = f"PFC_PRIORITY_TO_QUEUE_MAP|{name} on {port}" if name else \
        f"no pfc_to_queue_map on {port}: priority p -> queue p"
    return tuple(p for p, q in sorted(mapping.items()) if q == queue), where


def other_queues(config: SwitchConfig, src: str, dst: str,
                 skip: set[int]) -> tuple[dict[int, int], list[str]]:
    """Per queue of dst outside ``skip`` that a DSCP reaches from src, the lowest such DSCP:
    the background flows."""
    out, lines = {}, []
    for dscp in range(64):
        tc, dscp_map = tc_of_dscp(config, src, dscp)
        queue, _ = queue_of_tc(config, dst, tc)
        if queue not in skip and queue not in out:
            out[queue] = dscp
            lines.append(f"background: DSCP_TO_TC_MAP|{dscp_map} {dscp} -> TC {tc} -> "
                         f"queue {queue} of {dst}")
    return out, lines


def line_rate(config: SwitchConfig, port: str, frame_bytes: int) -> float:
    """Bytes per second of ``frame_bytes`` frames a port's line rate carries (the switch's
    bytes: without FCS)."""
    speed = config.ports[port].speed_mbps * 1e6 / 8
    return speed * (frame_bytes - 4) / (frame_bytes + WIRE_OVERHEAD - 4)


def xoff_fill_bytes(config: SwitchConfig, port: str, pg: int) -> tuple[float, str]:
    """Bytes a PG alone in its pool holds when it sends XOFF: reserved part + shared
    trigger."""
    profile = pg_profile(config, port, pg)
    if profile is None or profile.xoff is None:
        raise Unsupported(f"{port}: PG {pg} has no lossless BUFFER_PG profile (xoff)")
    pool = config.qos.buffer_pools[profile.pool]
    reserved = profile.size if pool.xoff > 0 else max(profile.size - profile.xoff, 0)
    trigger, why = xoff_trigger(config, profile)
    return reserved + trigger, (f"BUFFER_PG|{port}|{pg} {profile.name}: reserved {reserved} + "
                                f"{why} = {reserved + trigger:.0f} B to XOFF")


# --------------------------------------------------------------------------- pause tests


@dataclass(frozen=True)
class PausePlan:
    """A test flow src -> dst on one class while its egress queue is stormed, background
    flows on the other queues."""

    src: str
    dst: str
    frame_bytes: int
    dscp: int
    priority: int  # the test flow's PFC priority (its TC)
    storm: tuple[int, ...] | None  # priorities stormed into dst; None: 802.3x PAUSE
    background: dict[int, int]  # queue -> DSCP
    seconds: float
    paused: bool  # the test flow must be stopped (a lossless prio) or pass untouched
    rate: float = TEST_RATE  # the test flow's share of src's line rate, as the background's
    lines: list[str] = field(default_factory=list)


def pause_plan(config: SwitchConfig, case: PortCase, frame_bytes: int, paused: bool,
               global_pause_frames: bool = False) -> PausePlan:
    """test_pfc_pause_single_lossless_prio (``paused``), _lossy_prio, test_global_pause:
    the storm pauses the test flow's queue on dst (PFC on its priorities, or 802.3x);
    lossless runs until the test PG must reach XOFF at the test rate (so the DUT's
    back-pressure shows), the others for one pause time (refreshed at half-time, a
    storm honoured holds the queue throughout). The rates are shares of the slower port's
    line rate, as snappi's shares of a Tx port are on testbeds of one speed: the background
    must fit dst."""
    lines = [f"DSCP {case.dscp} -> TC {case.tc} -> PG {case.pg} on {case.src}, queue "
             f"{case.queue} on {case.dst} ({'lossless' if paused else 'lossy'})"]
    rate, line = slower_share(config, case.src, case.dst, TEST_RATE)
    lines += line
    if global_pause_frames:
        stormed, skip = None, {case.queue}
        lines.append(f"storm: 802.3x PAUSE into {case.dst}, {MAX_QUANTA} quanta, two per "
                     "pause time")
    else:
        stormed, where = pfc_priorities(config, case.dst, case.queue)
        if not stormed:
            raise Unsupported(f"{case.switch} {case.dst}: no PFC priority maps to queue "
                              f"{case.queue} (PORT_QOS_MAP pfc_to_queue_map)")
        lines.append(f"{where}: priorities {list(stormed)} -> queue {case.queue}; storm of "
                     f"{MAX_QUANTA} quanta, two per pause time")
        skip = {q for q in range(8) if set(pfc_priorities(config, case.dst, q)[0]) & set(stormed)}
    background, more = other_queues(config, case.src, case.dst, skip)
    lines += more
    seconds = pause_seconds(config, case.dst)
    if paused:
        fill, why = xoff_fill_bytes(config, case.src, case.pg)
        to_xoff = fill / (rate * line_rate(config, case.src, frame_bytes))
        lines.append(why)
        seconds = max(seconds, 1.2 * to_xoff)
        lines.append(f"at {rate:.1%} of {case.src}'s line rate: {to_xoff * 1e3:.3f} ms "
                     f"to XOFF; run x 1.2 -> {seconds * 1e3:.3f} ms")
    else:
        lines.append(f"run: one pause time of {case.dst} -> {seconds * 1e3:.3f} ms")
    lines.append(f"the storm outlasts the flows by one pause time of {case.dst} (snappi stops "
                 "it after them): what they sent can leave while it lasts")
    return PausePlan(case.src, case.dst, frame_bytes, case.dscp, case.tc, stormed,
                     background, seconds, paused, rate, lines)


def slower_share(config: SwitchConfig, src: str, dst: str,
                 share: float) -> tuple[float, list[str]]:
    """``share`` of the slower of src's and dst's line rates, as a share of src's (with the
    line saying so where dst is the slower)."""
    s, d = config.ports[src].speed_mbps, config.ports[dst].speed_mbps
    if d >= s:
        return share, []
    rate = share * d / s
    return rate, [f"PORT speed: {src} {s} Mb/s, {dst} {d} Mb/s -> {share:.0%} of {dst}'s "
                  f"line rate is {rate:.2%} of {src}'s"]


def pause(dut: Dut, plan: PausePlan) -> None:
    """The storm starts, then the test flow (45 %) and background flows (45 % together);
    the storm stops a pause time after them; after a drain: a paused test flow got nothing through and the DUT sent PFC
    for it upstream (and for no other priority); an unpaused one lost nothing and no PFC was
    sent; background flows lost nothing."""
    src, dst = plan.src, plan.dst
    storm_flow = global_pause(dut, dst) if plan.storm is None else storm(dut, dst, plan.storm)
    begin = (len(storm_flow.frame) + WIRE_OVERHEAD) * 8 / dut._speed_bps(dst)
    test = Flow(src, dut.packet(src, dst, plan.dscp, plan.frame_bytes, ECT1, ident=1),
                plan.rate, plan.priority, begin)
    bg = [Flow(src, dut.packet(src, dst, dscp, plan.frame_bytes, ECT1, ident=10 + q),
               plan.rate / len(plan.background), tc_of_dscp(dut.config, src, dscp)[0], begin)
          for q, dscp in plan.background.items()]
    pfc_before = list(dut.read()["ports"][src]["pfc_tx"])
    start = len(dut.captures[dst].frames)
    dut.traffic([storm_flow, test, *bg], plan.seconds)
    dut.traffic([storm_flow], pause_seconds(dut.config, dst))
    storm_end = dut.now
    dut.run(dut.now + DRAIN_S)  # the storm has stopped: paused queues drain too
    counters = dut.read()["ports"]
    got = dut.idents(dst, start)
    pfc_tx = [a - b for a, b in zip(counters[src]["pfc_tx"], pfc_before)]
    received_while = _received_before(dut, dst, start, 1, storm_end)
    lost = {f"DSCP {dscp}": (f.sent, got[10 + q]) for (q, dscp), f
            in zip(plan.background.items(), bg) if got[10 + q] != f.sent}
    assert not lost, f"{dut.name} {src}->{dst}: background flows (sent, received) {lost}; " \
                     "expected no loss"
    assert test.sent > 0, f"{dut.name} {src}: the test flow sent nothing"
    if plan.paused:
        assert received_while == 0, \
            f"{dut.name} {dst}: {received_while} of {test.sent} test frames (DSCP " \
            f"{plan.dscp}) left during the storm; expected 0 (its queue is paused)"
        assert pfc_tx[plan.priority] > 0, \
            f"{dut.name} {src}: no PFC sent for priority {plan.priority}; expected the " \
            "paused class's back-pressure upstream"
        others = {p: n for p, n in enumerate(pfc_tx) if n and p != plan.priority}
        assert not others, f"{dut.name} {src}: PFC sent for priorities {others}; expected " \
                           f"only {plan.priority}"
    else:
        assert got[1] == test.sent, \
            f"{dut.name} {dst}: {got[1]} of {test.sent} test frames (DSCP {plan.dscp}) " \
            "received; expected all (a pause on this class must not stop it)"
        assert received_while == test.sent, \
            f"{dut.name} {dst}: {received_while} of {test.sent} test frames left during " \
            "the storm; expected all"
        assert not any(pfc_tx), f"{dut.name} {src}: PFC sent {pfc_tx}; expected none"


def _received_before(dut: Dut, port: str, since: int, ident: int, storm_end: float) -> int:
    """Frames of IP id ``ident`` ``port`` sent from capture index ``since`` up to
    ``storm_end``."""
    frames = dut.captures[port].frames
    kept = [(t, f) for t, f in frames[since:] if t <= storm_end]
    dut.captures[port].frames = frames[:since] + kept
    try:
        return dut.idents(port, since)[ident]
    finally:
        dut.captures[port].frames = frames


# --------------------------------------------------------------------------- headroom


@dataclass(frozen=True)
class HeadroomPlan:
    src: str
    dst: str
    frame_bytes: int
    dscp: int
    priority: int
    storm: tuple[int, ...]
    covered_s: float  # the response delay the cable gives: headroom must hold
    exceeded_s: float  # a response delay past what the headroom covers: it must overflow
    seconds: float
    lines: list[str] = field(default_factory=list)


def headroom_plan(config: SwitchConfig, case: PortCase, frame_bytes: int) -> HeadroomPlan:
    """test_pfc_single_lossless_headroom: the sender's response delay from the config
    (CABLE_LENGTH round trip + the speed's peer response quanta, fabric.qos.PAUSE_QUANTA),
    and one twice what the PG's xoff bytes take at line rate."""
    src, speed = case.src, config.ports[case.src].speed_mbps
    cable = config.qos.cable_length_m.get(src)
    if cable is None:
        raise Unsupported(f"{case.switch} {src}: no CABLE_LENGTH for the port")
    if speed not in PAUSE_QUANTA:
        raise Unsupported(f"{case.switch} {src}: PORT speed {speed} has no peer response "
                          "quanta (fabric.qos.PAUSE_QUANTA)")
    profile = pg_profile(config, src, case.pg)
    stormed, where = pfc_priorities(config, case.dst, case.queue)
    round_trip = 2 * cable * NS_PER_METRE * 1e-9
    response = PAUSE_QUANTA[speed] * PAUSE_QUANTUM_BITS / (speed * 1e6)
    covered = round_trip + response
    rate = line_rate(config, src, frame_bytes)
    exceeded = 2 * profile.xoff / rate
    fill, why = xoff_fill_bytes(config, src, case.pg)
    seconds = fill / rate + 4 * exceeded
    lines = [f"CABLE_LENGTH {src} {cable} m -> round trip {round_trip * 1e9:.0f} ns",
             f"PORT|{src} speed {speed} -> peer response {PAUSE_QUANTA[speed]} quanta = "
             f"{response * 1e9:.0f} ns; sender response delay {covered * 1e9:.0f} ns "
             f"({covered * rate:.0f} B at line rate)",
             f"BUFFER_PROFILE|{profile.name} xoff {profile.xoff} B = {profile.xoff / rate * 1e9:.0f}"
             f" ns at line rate; a sender slower than that overflows: {exceeded * 1e9:.0f} ns",
             f"{where}: storm priorities {list(stormed)}", why,
             f"run: to XOFF at line rate + 4 x the slow response = {seconds * 1e3:.3f} ms"]
    return HeadroomPlan(src, case.dst, frame_bytes, case.dscp, case.tc, stormed, covered,
                        exceeded, seconds, lines)


def headroom(dut_of, plan: HeadroomPlan) -> None:
    """With the cable's response delay the PG's headroom holds (no PG drop); with a delay
    past it, the PG drops. ``dut_of()``: a fresh DUT for each run."""
    for delay, holds in ((plan.covered_s, True), (plan.exceeded_s, False)):
        dut = dut_of()
        src, dst = plan.src, plan.dst
        flows = [storm(dut, dst, plan.storm),
                 Flow(src, dut.packet(src, dst, plan.dscp, plan.frame_bytes, ECT1, ident=1),
                      1.0, plan.priority, 1e-9)]
        dut.traffic(flows, plan.seconds, {src: delay})
        pg = dut.read()["ports"][src]["pgs"][str(_pg(dut, src, plan.dscp))]
        if holds:
            assert pg["drops"] == 0, \
                f"{dut.name} {src}: PG drops {pg['drops']} (headroom peak " \
                f"{pg['headroom_peak']} of {pg['headroom']} B) with a {delay * 1e9:.0f} ns " \
                "response; expected none: the headroom covers it"
            assert pg["xoff_count"] > 0, f"{dut.name} {src}: the PG never reached XOFF"
        else:
            assert pg["drops"] > 0, \
                f"{dut.name} {src}: no PG drop with a {delay * 1e9:.0f} ns response " \
                f"(headroom peak {pg['headroom_peak']} of {pg['headroom']} B); expected " \
                "drops past the headroom"


def _pg(dut: Dut, port: str, dscp: int) -> int:
    return pg_of_tc(dut.config, port, tc_of_dscp(dut.config, port, dscp)[0])[0]


# --------------------------------------------------------------------------- many to one


@dataclass(frozen=True)
class M2oPlan:
    srcs: tuple[str, ...]
    dst: str
    frame_bytes: int
    dscp: int
    priority: int
    rate: float  # each src's share of its line rate
    seconds: float
    lines: list[str] = field(default_factory=list)


def m2o_plan(config: SwitchConfig, case: PortCase, ports: list[str],
             frame_bytes: int) -> M2oPlan:
    """test_m2o_oversubscribe_lossless: src and another port into dst, the lossless class
    at line rate each (oversubscribed: the first other port whose speed and src's together
    pass dst's), long enough for src's PG to reach XOFF while the two share dst's line rate
    in proportion to their rates (one FIFO queue)."""
    others = [p for p in ports if p not in (case.src, case.dst)]
    if not others:
        raise Unsupported(f"{case.switch}: {len(ports)} wired ports; many-to-one needs a "
                          "second src")
    rate = {p: line_rate(config, p, frame_bytes) for p in (case.src, case.dst, *others)}
    over = [p for p in others if rate[case.src] + rate[p] > rate[case.dst]]
    if not over:
        speeds = ", ".join(f"{p} {config.ports[p].speed_mbps}" for p in (case.src, *others))
        raise Unsupported(f"{case.switch}: PORT speed (Mb/s) {speeds}: no two srcs together "
                          f"pass {case.dst}'s {config.ports[case.dst].speed_mbps}: nothing "
                          "to oversubscribe it")
    srcs = (case.src, over[0])
    fill, why = xoff_fill_bytes(config, case.src, case.pg)
    total = rate[case.src] + rate[over[0]]
    gain = rate[case.src] * (1 - rate[case.dst] / total)
    seconds = 1.5 * fill / gain
    lines = [f"srcs {list(srcs)} -> {case.dst}, DSCP {case.dscp} (TC {case.tc}, lossless), "
             "100 % each", why,
             f"{case.src}'s PG gains {gain / 1e9:.2f} GB/s (its line rate less its share of "
             f"{case.dst}'s): run 1.5 x {fill / gain * 1e3:.3f} ms = {seconds * 1e3:.3f} ms"]
    return M2oPlan(srcs, case.dst, frame_bytes, case.dscp, case.tc, 1.0, seconds, lines)


def m2o_lossless(dut: Dut, plan: M2oPlan) -> None:
    """Every lossless frame received (after a drain), PFC sent upstream, no drop."""
    flows = [Flow(s, dut.packet(s, plan.dst, plan.dscp, plan.frame_bytes, ECT1, ident=1 + n),
                  plan.rate, plan.priority, 1e-9 * n) for n, s in enumerate(plan.srcs)]
    start = len(dut.captures[plan.dst].frames)
    dut.traffic(flows, plan.seconds)
    dut.run(dut.now + DRAIN_S)
    got = dut.idents(plan.dst, start)
    counters = dut.read()["ports"]
    lost = {f.port: (f.sent, got[1 + n]) for n, f in enumerate(flows) if got[1 + n] != f.sent}
    assert not lost, f"{dut.name} -> {plan.dst}: lossless flows (sent, received) {lost}; " \
                     "expected 0 loss"
    pfc = {s: counters[s]["pfc_tx"][plan.priority] for s in plan.srcs}
    assert any(pfc.values()), f"{dut.name}: no PFC sent for priority {plan.priority} " \
                              f"({pfc}); expected the oversubscription to pause the senders"
