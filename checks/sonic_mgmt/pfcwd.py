"""sonic-mgmt's PFC watchdog cases (``tests/pfcwd``, ``tests/snappi_tests/pfcwd``) on one
lossless queue of one DUT port: a PFC storm into the port (the fanout's), the traffic that
fills the queue, and what the watchdog must then do, all timed by the port's ``PFC_WD``
entry (detection_time, restoration_time, action) and ``PFC_WD|GLOBAL`` POLL_INTERVAL.

The watchdog only sees a storm on a queue that holds bytes and sends none while PFC keeps
arriving (``fabric.model.watchdog``), so every storm that should be detected has traffic
for the queue reach it right after the storm's first frame. sonic-mgmt's hardware bounds
have slack for syslog and fanout timing; in virtual time each iteration is held to them
exactly. Each function raises AssertionError saying what was measured against what was
expected, and hands the lines that derive its expectation from the config to ``record``
before it runs anything.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from ...fabric.config import SwitchConfig
from ...fabric.model.egress import PFC_WD_DROP, queue_priorities
from ...fabric.model.watchdog import RESTORE, STORM
from ...fabric.qos import queue_of_tc, tc_of_dscp
from .cases import WatchdogCase, watchdog_queues
from .dut import ROCEV2_PORT, Arrival, Dut

FLOW_PACKETS = 100  # sonic-mgmt's test_pkt_count: the packets of each test flow
TIMER_STORMS = 20  # test_pfcwd_timer_accuracy's iterations
BURST_STORMS = 15  # test_pfcwd_burst_storm's storms
ECN = 1  # ECT(1), as sonic-mgmt's pfc_wd PTF packets and snappi's flows carry
_EPSILON_S = 1e-9  # event times come from a float clock

Record = Callable[[list[str]], None]


@dataclass(frozen=True)
class Timers:
    """One port's watchdog settings, in seconds."""

    detect: float
    restore: float
    poll: float
    action: str

    @property
    def margin(self) -> float:
        """What sonic-mgmt adds to a storm or a wait (0.1 s on hardware): half a poll
        interval, so that no bound of the watchdog's falls on a storm's edge."""
        return self.poll / 2


def timers(config: SwitchConfig, port: str) -> Timers:
    wd = config.qos.pfc_wd[port]
    return Timers(wd.detection_time_ms / 1000, wd.restoration_time_ms / 1000,
                  config.qos.pfc_wd_poll_interval_ms / 1000, wd.action)


def timer_lines(config: SwitchConfig, case: WatchdogCase) -> list[str]:
    wd = config.qos.pfc_wd[case.port]
    return [f"PFC_WD|{case.port} action {wd.action}, detection_time {wd.detection_time_ms} ms, "
            f"restoration_time {wd.restoration_time_ms} ms; PFC_WD|GLOBAL POLL_INTERVAL "
            f"{config.qos.pfc_wd_poll_interval_ms} ms",
            f"PORT_QOS_MAP|{case.port} pfc_enable, pfc_to_queue_map -> queue {case.queue} "
            f"is paused by priorities {list(case.priorities)}: the storm pauses those",
            f"DSCP {case.dscp} from {case.src} -> queue {case.queue} on {case.port} "
            "(DSCP_TO_TC_MAP, TC_TO_QUEUE_MAP): the traffic that fills it, ECT(1) as "
            "sonic-mgmt sends it (a WRED_PROFILE that marks ECN marks it, drops none)"]


def with_action(config: SwitchConfig, action: str) -> SwitchConfig:
    """``config`` with every ``PFC_WD`` entry's action replaced, as sonic-mgmt's
    ``pfcwd start --action`` restarts the watchdog before a case."""
    pfc_wd = {port: replace(wd, action=action) for port, wd in config.qos.pfc_wd.items()}
    return replace(config, qos=replace(config.qos, pfc_wd=pfc_wd))


class Bench:
    """A case's DUT and what the cases read from it: its flows (each one frame, repeated,
    with an IP id of its own), the watchdog's events on the case's queue, its counters."""

    def __init__(self, dut: Dut, case: WatchdogCase, frame_bytes: int) -> None:
        self.dut = dut
        self.case = case
        self.frame_bytes = frame_bytes
        self.timers = timers(dut.config, case.port)
        self._flows = 0
        self._idents: dict[bytes, int | None] = {}  # a captured frame -> its flow's IP id

    def flow(self, count: int, start: float, gap: float | None = None, dscp: int | None = None,
             src: str | None = None, dst: str | None = None) -> tuple[list[Arrival], int]:
        """``count`` packets of the case's flow (or of ``dscp`` from ``src`` to ``dst``) from
        ``start``, ``gap`` apart (None: line rate), and the flow's IP id."""
        case = self.case
        self._flows += 1
        src = src or case.src
        frame = self.dut.packet(src, dst or case.port, case.dscp if dscp is None else dscp,
                                self.frame_bytes, ecn=ECN, ident=self._flows)
        return self.dut.flow_arrivals(src, [frame] * count, start, gap), self._flows

    def storm(self, start: float, seconds: float) -> list[Arrival]:
        return self.dut.storm_arrivals(self.case.port, self.case.priorities, start, seconds)

    def events(self) -> list[dict]:
        """The case queue's watchdog events so far (``WatchdogEvent`` as dicts)."""
        return self.dut.read()["ports"][self.case.port]["watchdog"][str(self.case.queue)]["events"]

    def queue(self) -> dict:
        """The case queue's counters now."""
        return self.dut.read()["ports"][self.case.port]["queues"][str(self.case.queue)]

    def drops(self) -> int:
        """The watchdog's drops on the case's queue."""
        return self.queue()["dropped"].get(PFC_WD_DROP, 0)

    def delivered(self, flow: int, port: str | None = None,
                  before: float = float("inf")) -> int:
        """How many packets of ``flow`` (its IP id) reached the neighbour of ``port``
        (before the time ``before``)."""
        return sum(self._ident(frame) == flow
                   for at, frame in self.dut.captures[port or self.case.port].frames
                   if at < before)

    def _ident(self, frame: bytes) -> int | None:
        if frame not in self._idents:
            pkt = Ether(frame)
            ours = UDP in pkt and pkt[UDP].dport == ROCEV2_PORT
            self._idents[frame] = pkt[IP].id if ours else None
        return self._idents[frame]


def _kinds(events: list[dict]) -> list[str]:
    return [e["kind"] for e in events]


def _after(arrivals: list[Arrival]) -> float:
    """When a flow's next packet would come: one gap after its last (two packets or more)."""
    return 2 * arrivals[-1][0] - arrivals[-2][0]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


# --------------------------------------------------------------------------- the cases


def timer_accuracy(bench: Bench, record: Record, storms: int = TIMER_STORMS) -> dict:
    """test_pfcwd_timer_accuracy: ``storms`` storms, each long enough to be detected; each
    one's detect time (STORM - its first PFC frame) in (detection_time, detection_time +
    poll] and restore time (RESTORE - its last PFC frame) in [restoration_time,
    restoration_time + poll]. The storms start at times spread over a poll interval (the
    k-th (k + 1/2)/``storms`` of one after a poll: the watchdog polls every interval from
    the previous restore), so the detect times sample the whole range. Returns the measured
    times, seconds, per storm."""
    dut, t, case = bench.dut, bench.timers, bench.case
    length = t.detect + t.poll + t.margin
    record(timer_lines(dut.config, case) + [
        f"detection_time {_ms(t.detect)} ms + POLL_INTERVAL {_ms(t.poll)} ms -> STORM "
        f"{_ms(t.detect)} < detect <= {_ms(t.detect + t.poll)} ms after the first PFC frame",
        f"restoration_time {_ms(t.restore)} ms + POLL_INTERVAL -> RESTORE {_ms(t.restore)} "
        f"<= restore <= {_ms(t.restore + t.poll)} ms after the last PFC frame (the model "
        "restores at the deadline itself)",
        f"{storms} storms of detection_time + 1.5 x POLL_INTERVAL = {_ms(length)} ms, one "
        f"{bench.frame_bytes} B packet into the queue at each storm's start"])
    detects, restores = [], []
    last = dut.now  # the watchdogs polled at the DUT's start, then every poll interval
    for k in range(storms):
        start = last + 2 * t.poll + (k + 0.5) / storms * t.poll
        storm = bench.storm(start, length)
        fill, _ = bench.flow(1, start)
        seen = len(bench.events())
        dut.play(storm + fill, until=storm[-1][0] + t.restore + t.poll)
        new = bench.events()[seen:]
        assert _kinds(new) == [STORM, RESTORE], \
            f"storm {k + 1}: watchdog events {_kinds(new)}, expected one storm then one restore"
        detect, restore = new[0]["time"] - start, new[1]["time"] - storm[-1][0]
        assert t.detect < detect <= t.detect + t.poll + _EPSILON_S, \
            f"storm {k + 1}: detected {_ms(detect)} ms after it began, expected in " \
            f"({_ms(t.detect)}, {_ms(t.detect + t.poll)}]"
        assert t.restore - _EPSILON_S <= restore <= t.restore + t.poll + _EPSILON_S, \
            f"storm {k + 1}: restored {_ms(restore)} ms after it ended, expected in " \
            f"[{_ms(t.restore)}, {_ms(t.restore + t.poll)}]"
        detects.append(detect)
        restores.append(restore)
        last = new[1]["time"]
    return {"detect_s": detects, "restore_s": restores}


def timer_summary(times: dict) -> list[str]:
    """The distribution of ``timer_accuracy``'s times, with the sorted 10th value sonic-mgmt
    asserts on."""
    out = []
    for name in ("detect", "restore"):
        ms = sorted(v * 1000 for v in times[f"{name}_s"])
        out.append(f"measured {name} times over {len(ms)} storms: min {ms[0]:.3f}, 10th "
                   f"{ms[min(9, len(ms) - 1)]:.3f}, max {ms[-1]:.3f} ms")
    return out


def other_queue(config: SwitchConfig, case: WatchdogCase) -> tuple[int, int] | None:
    """(DSCP, queue) of another queue of the case's port, not paused by the storm, that
    traffic from the case's src reaches: another lossless queue where there is one (as
    sonic-mgmt's verify_other_pfc_queue), the lowest DSCP; None if no DSCP reaches one."""
    paused = queue_priorities(config.qos, case.port)
    guarded = watchdog_queues(config, case.port)
    found = []
    for dscp in range(64):
        queue = queue_of_tc(config, case.port, tc_of_dscp(config, case.src, dscp)[0])[0]
        if queue != case.queue and not set(paused[queue]) & set(case.priorities):
            found.append((queue not in guarded, dscp, queue))
    return min(found)[1:] if found else None


def other_port(node_ports: list[str], case: WatchdogCase) -> str | None:
    """A wired port that is neither the stormed port nor the flow's src, if the switch
    has one."""
    return next((p for p in node_ports if p not in (case.port, case.src)), None)


def actions(bench: Bench, record: Record) -> None:
    """test_pfcwd_actions, for the action the DUT's PFC_WD now has (``with_action``): a storm
    detected on the queue, then ``FLOW_PACKETS`` packets to it are all dropped and counted
    as the watchdog's drops (drop) or all forwarded while the storm goes on, counted as the
    queue's transmits (forward); the same to another queue of the port and to the same
    queue of another port all forwarded while it goes on; the storm restored once it ends."""
    dut, t, case = bench.dut, bench.timers, bench.case
    other = other_queue(dut.config, case)
    third = other_port(dut.ports, case)
    length = t.detect + t.poll + 2 * t.margin
    lines = timer_lines(dut.config, case) + [
        f"a storm of detection_time + 2 x POLL_INTERVAL = {_ms(length)} ms: detected by "
        f"{_ms(t.detect + t.poll)} ms, then {FLOW_PACKETS} packets to queue {case.queue} "
        f"-> action {t.action}: " + (f"{FLOW_PACKETS} watchdog drops, 0 delivered"
                                     if t.action == "drop" else
                                     f"{FLOW_PACKETS} transmitted by queue {case.queue}")]
    lines.append(f"DSCP {other[0]} from {case.src} -> queue {other[1]} on {case.port}, not "
                 f"paused by priorities {list(case.priorities)} -> {FLOW_PACKETS} delivered"
                 if other else f"no other queue of {case.port} is reached from {case.src}: "
                 "that leg is not run")
    lines.append(f"DSCP {case.dscp} from {case.src} -> {third}: another port, "
                 f"{FLOW_PACKETS} delivered" if third else
                 f"{case.switch} has no wired port besides {case.src} and {case.port}: the "
                 "other-port leg is not run")
    record(lines)
    start = dut.now + t.poll
    storm = bench.storm(start, length)
    fill, _ = bench.flow(1, start)
    test_at = start + t.detect + t.poll + t.margin
    dut.play([a for a in storm if a[0] < test_at] + fill, until=test_at)  # it goes on
    assert _kinds(bench.events()) == [STORM], \
        f"watchdog events {_kinds(bench.events())} by {_ms(test_at - start)} ms into the " \
        f"storm, expected one storm (detection_time + POLL_INTERVAL = {_ms(t.detect + t.poll)} ms)"
    before_drops, before_tx = bench.drops(), bench.queue()["tx_packets"]
    flows, target = bench.flow(FLOW_PACKETS, test_at)
    legs = []
    if other:
        arrivals, flow = bench.flow(FLOW_PACKETS, _after(flows), dscp=other[0])
        flows += arrivals
        legs.append((f"queue {other[1]} of {case.port}", flow, case.port))
    if third:
        arrivals, flow = bench.flow(FLOW_PACKETS, _after(flows), dst=third)
        flows += arrivals
        legs.append((f"queue {case.queue} of {third}", flow, third))
    rest = [a for a in storm if a[0] >= test_at]
    dut.play(rest + flows, until=rest[-1][0] + t.restore + t.poll + t.margin)
    drops, tx = bench.drops() - before_drops, bench.queue()["tx_packets"] - before_tx
    end = storm[-1][0]
    if t.action == "drop":
        got = bench.delivered(target)
        assert (drops, got) == (FLOW_PACKETS, 0), \
            f"stormed queue {case.queue} under drop: {drops} watchdog drops and {got} " \
            f"delivered of {FLOW_PACKETS}, expected {FLOW_PACKETS} drops, 0 delivered"
    else:
        got = bench.delivered(target, before=end)
        assert (tx, got, drops) == (FLOW_PACKETS, FLOW_PACKETS, 0), \
            f"stormed queue {case.queue} under {t.action}: {tx} transmitted, {got} " \
            f"delivered during the storm, {drops} watchdog drops of {FLOW_PACKETS}, " \
            "expected all transmitted and delivered, no drop"
    for name, flow, port in legs:
        got = bench.delivered(flow, port, before=end)
        assert got == FLOW_PACKETS, \
            f"{name} during the storm: {got} of {FLOW_PACKETS} delivered, expected all"
    assert _kinds(bench.events()) == [STORM, RESTORE], \
        f"watchdog events {_kinds(bench.events())}, expected the storm restored after it ended"


def burst_storm(bench: Bench, record: Record, storms: int = BURST_STORMS) -> None:
    """test_pfcwd_burst_storm: ``storms`` storms of half a poll interval, one every
    POLL_INTERVAL + detection_time + restoration_time + margin, while a flow keeps the
    queue filled: never detected, nothing lost."""
    dut, t, case = bench.dut, bench.timers, bench.case
    burst, cycle = t.poll / 2, t.poll + t.detect + t.restore + t.margin
    gap = burst / 4
    count = round(storms * cycle / gap)
    record(timer_lines(dut.config, case) + [
        f"POLL_INTERVAL {_ms(t.poll)} ms -> bursts of {_ms(burst)} ms; + detection_time + "
        f"restoration_time + margin {_ms(t.margin)} ms -> one every {_ms(cycle)} ms, {storms} "
        "of them: a burst shorter than detection_time is never a storm",
        f"a flow of {count} packets, {_ms(gap)} ms apart (4 per burst) -> all {count} "
        "delivered, no STORM event, no watchdog drop"])
    start = dut.now + t.poll
    storms_at = [a for k in range(storms) for a in bench.storm(start + k * cycle, burst)]
    arrivals, flow = bench.flow(count, start, gap)
    dut.play(storms_at + arrivals, until=arrivals[-1][0] + t.poll)
    events, got = _kinds(bench.events()), bench.delivered(flow)
    assert events == [], f"watchdog events {events} from {storms} bursts, expected none"
    assert (got, bench.drops()) == (count, 0), \
        f"{got} of {count} packets delivered, {bench.drops()} watchdog drops, expected all " \
        "delivered, none dropped"


def basic(bench: Bench, record: Record, trigger: bool) -> None:
    """snappi's test_pfcwd_basic: with ``trigger``, a storm of detection_time + poll +
    margin while flow 1 fills the queue: detected; flow 1 all lost under drop (none under
    forward or alert); flow 2, after restoration_time + poll past the storm, all delivered.
    Without, a storm of half detection_time: never detected, both flows all delivered."""
    dut, t, case = bench.dut, bench.timers, bench.case
    length = t.detect + t.poll + t.margin if trigger else t.detect / 2
    lost = FLOW_PACKETS if trigger and t.action == "drop" else 0
    lines = timer_lines(dut.config, case)
    if trigger:
        lines.append(f"detection_time + POLL_INTERVAL + margin -> a storm of {_ms(length)} ms: "
                     f"detected; action {t.action} -> flow 1 ({FLOW_PACKETS} packets over the "
                     f"storm) loses {lost}")
    else:
        lines.append(f"detection_time / 2 -> a storm of {_ms(length)} ms: never detected, "
                     "flow 1 loses 0")
    lines.append(f"storm end + restoration_time + POLL_INTERVAL -> flow 2 ({FLOW_PACKETS} "
                 f"packets over {_ms(t.poll)} ms) from {_ms(length + t.restore + t.poll)} ms: "
                 "loses 0")
    record(lines)
    start = dut.now + t.poll
    storm = bench.storm(start, length)
    flow1, first = bench.flow(FLOW_PACKETS, start, length / FLOW_PACKETS)
    flow2_at = start + length + t.restore + t.poll
    flow2, second = bench.flow(FLOW_PACKETS, flow2_at, t.poll / FLOW_PACKETS)
    dut.play(storm + flow1 + flow2, until=flow2[-1][0] + t.poll)
    events = _kinds(bench.events())
    expected = [STORM, RESTORE] if trigger else []
    assert events == expected, f"watchdog events {events}, expected {expected}"
    got1, got2 = bench.delivered(first), bench.delivered(second)
    assert FLOW_PACKETS - got1 == lost, \
        f"flow 1 lost {FLOW_PACKETS - got1} of {FLOW_PACKETS}, expected {lost}"
    assert got2 == FLOW_PACKETS, \
        f"flow 2 (after the restore) lost {FLOW_PACKETS - got2} of {FLOW_PACKETS}, expected 0"


def storm_during_traffic(bench: Bench, record: Record) -> None:
    """test_pfcwd_storm_during_traffic, for the DUT's PFC_WD action (``with_action``): a
    flow to the queue runs throughout; a storm starts in it and lasts two poll intervals
    past its detection. Detected once the queue holds the flow's next packet; every packet
    from the storm's start to the restore is dropped and counted (drop), or none is lost
    (forward); restored restoration_time after the storm's last frame."""
    dut, t, case = bench.dut, bench.timers, bench.case
    gap = t.poll / 10
    lead, length = 2 * t.poll, t.detect + t.poll + 2 * t.poll
    span = lead + length + t.restore + 2 * t.poll
    count = round(span / gap)
    record(timer_lines(dut.config, case) + [
        f"a flow of {count} packets {_ms(gap)} ms apart (10 per POLL_INTERVAL); a storm from "
        f"{_ms(lead + gap / 2)} ms into it, half a gap after a packet, for detection_time + 3 x "
        f"POLL_INTERVAL = {_ms(length)} ms",
        f"the next packet holds the queue {_ms(gap / 2)} ms into the storm -> STORM "
        f"{_ms(t.detect)} < detect <= {_ms(t.detect + t.poll + gap / 2)} ms after it began",
        f"action {t.action} -> " + ("every packet from the storm's start to the RESTORE "
                                    "dropped and counted as watchdog drops, the rest delivered"
                                    if t.action == "drop" else "every packet delivered"),
        f"restoration_time -> RESTORE {_ms(t.restore)} <= restore <= "
        f"{_ms(t.restore + t.poll)} ms after the storm's last frame"])
    start = dut.now + t.poll
    arrivals, flow = bench.flow(count, start, gap)
    storm_at = start + lead + gap / 2
    storm = bench.storm(storm_at, length)
    dut.play(storm + arrivals, until=arrivals[-1][0] + t.poll)
    events = bench.events()
    assert _kinds(events) == [STORM, RESTORE], \
        f"watchdog events {_kinds(events)}, expected one storm then one restore"
    detect, restore = events[0]["time"] - storm_at, events[1]["time"] - storm[-1][0]
    assert t.detect < detect <= t.detect + t.poll + gap / 2 + _EPSILON_S, \
        f"detected {_ms(detect)} ms into the storm, expected in " \
        f"({_ms(t.detect)}, {_ms(t.detect + t.poll + gap / 2)}]"
    assert t.restore - _EPSILON_S <= restore <= t.restore + t.poll + _EPSILON_S, \
        f"restored {_ms(restore)} ms after the storm, expected in " \
        f"[{_ms(t.restore)}, {_ms(t.restore + t.poll)}]"
    stormed = sum(storm_at <= at < events[1]["time"] for at, _, _ in arrivals)
    lost = stormed if t.action == "drop" else 0
    got = bench.delivered(flow)
    assert (count - got, bench.drops()) == (lost, lost), \
        f"{count - got} of {count} packets lost, {bench.drops()} watchdog drops, expected " \
        f"{lost} and {lost} (the packets from the storm's start to the restore)"


def no_traffic(bench: Bench, record: Record) -> None:
    """test_pfcwd_no_traffic: a storm long enough to be detected on a queue that holds
    nothing is never detected (the watchdog needs bytes queued that do not leave)."""
    dut, t, case = bench.dut, bench.timers, bench.case
    length = t.detect + t.poll + t.margin
    record(timer_lines(dut.config, case)[:2] + [
        f"detection_time + POLL_INTERVAL + margin -> a storm of {_ms(length)} ms with no "
        f"traffic to queue {case.queue}: no STORM event"])
    start = dut.now + t.poll
    dut.play(bench.storm(start, length), until=start + length + t.restore + t.poll)
    events = _kinds(bench.events())
    assert events == [], f"watchdog events {events} on an empty queue, expected none"
