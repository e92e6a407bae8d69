"""Reference scenarios: published congestion-control results the lab must reproduce
(docs/checks.md, "Reference scenarios", gives each figure's source).

Run on a lab that ships a ``reference.yml`` (``topologies/ref-*``), best simulated at real
line rate: ``invoke check ref-incast-40g --runtime sim -k reference``. A lab without one, or
without a scenario, skips these checks.

- incast: N:1 with the lab's own DCQCN (paper mode in ref-incast-40g, firmware mode in
  ref-incast-100g): over the second half of the run the bottleneck carries at least
  LINE_SHARE of line rate, the senders fair (paper: within 10 % of each other, as the paper
  shows; firmware: each within 10 % of the fair share, since the firmware's increases are
  too rare at 100G to pull two rates together within milliseconds, docs/checks.md), and no
  switch sends PFC after the start-up (QUIET_AFTER_S);
- pfc_timing: a receiver's 0xFFFF pause stops its switch's egress for 65535 x 512 bit times
  (335.5 us at 100G, 83.9 us at 400G) within one frame time; the PG the paused traffic
  fills refreshes its own XOFF within half its pause time; XON leaves when the PG has
  drained to max(xon, XOFF point - xon_offset);
- unfairness: three senders behind one uplink and one local sender into one receiver:
  with PFC only the local sender takes about half the bottleneck (PFC is per port, not per
  flow); with DCQCN each sender about a quarter.
"""
from __future__ import annotations

import json
import math
import struct
from contextlib import ExitStack

import pytest

from rocelab.checks import variants
from rocelab.checks import reference as ref
from rocelab.checks.report import record_evidence
from rocelab.fabric.model.frames import pfc_frame
from rocelab.fabric.qos import pg_of_tc, tc_of_dscp
from rocelab.labs import actions
from rocelab.traffic import patterns
from rocelab.nic.roce import PFC_DST

LINE_SHARE = {"paper": 0.90, "firmware": 0.85}  # of line rate, the senders together
FAIRNESS = 0.10  # paper: senders within 10 % of each other; firmware: of the fair share
QUIET_AFTER_S = 1e-3  # start-up: PFC allowed before this
INCAST_RUN_S = 4e-3  # fabric time: a few ms, the second half judged
UNFAIR_RUN_S = 2e-3
LOCAL_SHARE = (0.40, 0.60)  # "about half"
QUARTER = (0.15, 0.35)  # "about a quarter"
DCQCN_OFF = {"*": {"dcqcn": {"enabled": False}}}
DRAIN_S = 1e-3  # fabric time left idle after a run, so the next starts on empty queues
CLOCK_S = 1e-9  # captures are stamped to the nanosecond
PFC_DST_BYTES = bytes.fromhex(PFC_DST.replace(":", ""))


@pytest.fixture(scope="session")
def scenarios(lab) -> dict:
    try:
        return ref.load(lab.topology)
    except ref.ReferenceError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture
def fresh(lab, evidence):
    """Call it once the lab is known to carry the scenario: a fresh copy of the lab as
    shipped, up for the check. What a scenario reproduces must not depend on what ran on
    the lab before: its flows' start phases decide how DCQCN converges (the paper's 2:1 at
    40G split 66/31 % after test_lossless_incast had run, 49/48 % on a fresh lab)."""
    with ExitStack() as stack:
        yield lambda: stack.enter_context(
            variants.variant(lab, "reference", evidence.path("lab"), actions.as_shipped))


def scenario(scenarios: dict, name: str) -> dict:
    if name not in scenarios:
        pytest.skip(f"the lab ships no {name!r} reference scenario ({ref.REFERENCE_FILE})")
    return scenarios[name]


def drain(lab) -> None:
    lab.wait(lab.wall_s(DRAIN_S * lab.node_time_scale(lab.topology.switches[0].name)))


def save(evidence, name: str, figures: dict) -> None:
    evidence.json(name, figures)


def goodputs(lab, w: ref.Windows, senders: list[str], line_bps: float, i: int,
             j: int) -> dict[str, float]:
    """Each sender's share of ``line_bps`` between instants ``i`` and ``j``, from the
    ingress counters of its own switch port."""
    out = {}
    for host in senders:
        at = ref.attachment(lab.topology, host)
        out[host] = round(w.rate_bps(i, j, at.switch, at.port, "rx_bytes") / line_bps, 4)
    return out


def test_reference_incast(scenarios, evidence, fresh):
    """N:1 with DCQCN as the lab's NICs run it: full, fair and without PFC once settled."""
    roles = scenario(scenarios, "incast")
    lab = fresh()
    receiver, senders = roles["receiver"], list(roles["senders"])
    run_s = roles.get("run_us", INCAST_RUN_S * 1e6) / 1e6
    topo = lab.topology
    nic = patterns.nic_settings(topo.nodes[senders[0]], None)
    assert nic.dcqcn.enabled, f"{senders[0]}'s NIC runs no DCQCN: not the reference scenario"
    bottleneck = ref.attachment(topo, receiver)
    size = ref.flow_size(bottleneck.speed_bps, run_s, nic.roce.mtu)
    flows = [patterns.FlowSpec(s, receiver, size, 1) for s in senders]
    w = ref.windows(lab, flows, run_s, [QUIET_AFTER_S, run_s / 2], pattern="reference-incast")
    drain(lab)
    line = w.rate_bps(2, 3, bottleneck.switch, bottleneck.port, "tx_bytes") / bottleneck.speed_bps
    shares = goodputs(lab, w, senders, bottleneck.speed_bps, 2, 3)
    spread = (max(shares.values()) - min(shares.values())) / max(max(shares.values()), 1e-9)
    fair = sum(shares.values()) / len(shares)
    off_fair = max(abs(s - fair) for s in shares.values()) / max(fair, 1e-9)
    figures = {"mode": nic.dcqcn.mode, "run_s": run_s, "line_share_second_half": round(line, 4),
               "sender_shares_second_half": shares, "spread": round(spread, 4),
               "off_fair_share": round(off_fair, 4),
               "pfc_after_startup": w.pfc_sent(1, 3), "pfc_startup": w.pfc_sent(0, 1),
               "ecn_marks": w.marks(0, 3),
               "cnps": sum(f["receiver"]["cnps_sent"] for f in w.result["flows"])}
    save(evidence, "incast", figures)
    assert line >= LINE_SHARE[nic.dcqcn.mode], (
        f"the bottleneck {bottleneck.switch} {bottleneck.port} carried {line:.1%} of line "
        f"over the second half, below {LINE_SHARE[nic.dcqcn.mode]:.0%}: {figures}")
    if nic.dcqcn.mode == "paper":
        assert spread <= FAIRNESS, f"senders not within {FAIRNESS:.0%} of each other: {figures}"
    else:
        assert off_fair <= FAIRNESS, (
            f"a sender {off_fair:.1%} off the fair share, more than {FAIRNESS:.0%}: {figures}")
    assert figures["pfc_after_startup"] == 0, f"PFC after the first ms: {figures}"


def test_reference_port_unfairness(scenarios, evidence, fresh):
    """PFC pauses ports, not flows: behind one uplink three senders share what one local
    sender gets alone; DCQCN, per flow, gives each its quarter."""
    roles = scenario(scenarios, "unfairness")
    lab = fresh()
    receiver, local, remote = roles["receiver"], roles["local"], list(roles["remote"])
    run_s = roles.get("run_us", UNFAIR_RUN_S * 1e6) / 1e6
    topo = lab.topology
    bottleneck = ref.attachment(topo, receiver)
    senders = [local, *remote]
    figures = {}
    for name, nic in (("pfc_only", DCQCN_OFF), ("dcqcn", None)):
        mtu = patterns.nic_settings(topo.nodes[local], nic).roce.mtu
        size = ref.flow_size(bottleneck.speed_bps, run_s, mtu)
        flows = [patterns.FlowSpec(s, receiver, size, 1) for s in senders]
        w = ref.windows(lab, flows, run_s, [run_s / 2], nic=nic,
                        pattern=f"reference-unfairness-{name}")
        drain(lab)
        rates = goodputs(lab, w, senders, bottleneck.speed_bps, 1, 2)
        total = sum(rates.values()) or 1.0
        # shares of what the senders sent: the queues' growth within the window cancels
        figures[name] = {"of_line_second_half": rates,
                         "shares_second_half": {h: round(r / total, 4) for h, r in rates.items()},
                         "bottleneck_second_half": round(w.rate_bps(
                             1, 2, bottleneck.switch, bottleneck.port, "tx_bytes")
                             / bottleneck.speed_bps, 4),
                         "pfc": w.pfc_sent(0, 2)}
    save(evidence, "unfairness", figures)
    pfc, dcqcn = figures["pfc_only"]["shares_second_half"], figures["dcqcn"]["shares_second_half"]
    assert LOCAL_SHARE[0] <= pfc[local] <= LOCAL_SHARE[1], (
        f"PFC only: the local sender {local} took {pfc[local]:.0%}, not about half: {figures}")
    assert figures["pfc_only"]["pfc"] > 0, f"PFC only, yet no PFC sent: {figures}"
    off = {h: s for h, s in dcqcn.items() if not QUARTER[0] <= s <= QUARTER[1]}
    assert not off, f"with DCQCN, not each about a quarter: {off} ({figures})"


def pfc_quanta(frame: bytes, priority: int) -> int | None:
    """The quanta a PFC frame gives ``priority`` (None: not PFC, or not for it)."""
    if frame[:6] != PFC_DST_BYTES or frame[12:14] != b"\x88\x08" or frame[14:16] != b"\x01\x01":
        return None
    (vector,) = struct.unpack_from("!H", frame, 16)
    if not vector & (1 << priority):
        return None
    return struct.unpack_from("!8H", frame, 18)[priority]


def test_reference_pfc_timing(scenarios, evidence, fresh):
    """The pause a PFC frame asks for is the pause the switch keeps; refresh and XON as the
    buffer profile says."""
    roles = scenario(scenarios, "pfc_timing")
    lab = fresh()
    sender, receiver = roles["sender"], roles["receiver"]
    topo = lab.topology
    scale = lab.node_time_scale(topo.switches[0].name)
    nic = patterns.nic_settings(topo.nodes[receiver], DCQCN_OFF)
    priority = nic.roce.priority
    to_receiver = ref.attachment(topo, receiver)
    from_sender = ref.attachment(topo, sender)
    switch = topo.nodes[to_receiver.switch]
    tc, _ = tc_of_dscp(switch.config, from_sender.port, nic.roce.dscp)
    pg = str(pg_of_tc(switch.config, from_sender.port, tc)[0])
    pause_s = ref.MAX_QUANTA * ref.PAUSE_QUANTUM_BITS / to_receiver.speed_bps
    frame_s = (nic.roce.mtu + patterns.FRAME_OVERHEAD) * 8 / to_receiver.speed_bps
    iface = topo.interfaces(receiver)[0]
    pause = pfc_frame(bytes.fromhex(lab.mac(receiver, iface).replace(":", "")),
                      {priority: ref.MAX_QUANTA})
    sw_iface = next(k.a.iface if k.a.node == to_receiver.switch else k.b.iface
                    for k in topo.links if {k.a.node, k.b.node} == {receiver,
                                                                    to_receiver.switch})
    sw_iface_sender = next(k.a.iface if k.a.node == from_sender.switch else k.b.iface
                           for k in topo.links if {k.a.node, k.b.node} == {sender,
                                                                           from_sender.switch})
    agent = lab.agent(to_receiver.switch)

    def pg_state() -> dict:
        return agent.counters()["ports"][from_sender.port]["pgs"][pg]

    # the storm: enough pauses, each at half the pause time, for the line rate the paused
    # egress holds back to fill the sender's PG past its XOFF point half as much again
    before = pg_state()
    half_pause_bytes = from_sender.speed_bps / 8 * pause_s / 2
    storm = math.ceil(1.5 * (before["reserved"] + before["threshold"]) / half_pause_bytes) + 2
    run_s = (storm + 8) * pause_s
    size = ref.flow_size(to_receiver.speed_bps, run_s, nic.roce.mtu)
    wires = [(to_receiver.switch, sw_iface), (from_sender.switch, sw_iface_sender)]
    with lab.capture(where=wires, pcap_dir=evidence.path("pcap")) as capture:
        running = patterns.start(lab, [patterns.FlowSpec(sender, receiver, size, 1)],
                                 pattern="reference-pfc-timing", nic=DCQCN_OFF,
                                 timeout_s=lab.wall_s(run_s * scale))
        running.started()
        lab.wait(lab.wall_s(pause_s / 2 * scale))  # the sender at line rate by then
        # one pause alone: the switch's egress toward the receiver stops for its length
        lab.send_frames(receiver, iface, [pause])
        lab.wait(lab.wall_s(1.5 * pause_s * scale))
        # then the storm: the switch's queue fills, the sender's PG reaches XOFF and holds
        # it (refreshing) until the storm ends
        storm_end = (storm + 4) * pause_s * scale  # the lab's own clock
        xoff_seen = False
        for _ in range(storm):
            lab.send_frames(receiver, iface, [pause])
            lab.wait(lab.wall_s(pause_s / 2 * scale))
            xoff_seen = xoff_seen or pg_state()["xoff"]
        assert xoff_seen, f"{to_receiver.switch} PG {pg} of {from_sender.port} never reached " \
                          f"XOFF while its egress was paused: nothing to refresh"
        # the storm is over: watch the PG until it leaves XOFF, one frame time at a time
        assert lab.wait_for(lambda: not pg_state()["xoff"], storm_end,
                            step=frame_s * scale), "the PG never left XOFF after the storm"
        at_xon = pg_state()
        result = running.wait()
        capture.wait_quiet(0.01, 0.1)
        seen = capture.frames()
    drain(lab)
    profile = switch.config.qos.buffer_profiles[at_xon["profile"]]
    xon, offset = profile.xon or 0, profile.xon_offset or 0
    resume_at = max(xon, at_xon["reserved"] + at_xon["threshold"] - offset)
    # the pause: from its arrival at the switch to the first data frame the switch starts
    # toward the receiver after it
    toward = [s for s in seen if (s.node, s.iface) == wires[0]]
    arrivals = [s.time for s in toward if s.direction == "in" and pfc_quanta(s.frame, priority)]
    data_out = [s.time for s in toward if s.direction == "out" and s.info is not None]
    first = arrivals[0]
    resumed = next(t for t in data_out if t > first + frame_s)
    # refresh: the XOFFs the switch sends the sender while its PG holds XOFF
    xoffs = [(s.time, q) for s in seen if (s.node, s.iface) == wires[1]
             and s.direction == "out" and (q := pfc_quanta(s.frame, priority)) is not None]
    gaps, own_pause = [], None
    for (t0, q0), (t1, q1) in zip(xoffs, xoffs[1:]):
        if q0 and q1:
            gaps.append(t1 - t0)
            own_pause = q0 * ref.PAUSE_QUANTUM_BITS / from_sender.speed_bps
    figures = {"pause_expected_s": pause_s, "pause_measured_s": resumed - first,
               "frame_time_s": frame_s, "refresh_gaps_s": gaps[:20],
               "switch_pause_s": own_pause, "xon_at_bytes": at_xon["used"],
               "xon_expected_bytes": resume_at, "xon": xon, "xon_offset": offset,
               "threshold_at_xon": at_xon["threshold"], "reserved": at_xon["reserved"],
               "flow_complete": result["complete"]}
    save(evidence, "pfc-timing", figures)
    for pcap in sorted(evidence.path("pcap").glob("*.pcapng")):
        record_evidence(evidence.request, pcap)
    assert pause_s - CLOCK_S <= resumed - first <= pause_s + frame_s, (
        f"a 0xFFFF pause held the egress {(resumed - first) * 1e6:.2f} us, not "
        f"{pause_s * 1e6:.2f} us within one frame time ({frame_s * 1e9:.0f} ns): {figures}")
    assert gaps, f"{from_sender.switch} sent no XOFF refresh while its PG held XOFF: {figures}"
    assert max(gaps) <= own_pause / 2 + frame_s, (
        f"XOFF refreshed after {max(gaps) * 1e6:.1f} us, more than half its pause "
        f"({own_pause / 2 * 1e6:.1f} us): {figures}")
    # XON leaves as the frame that takes the PG to resume_at or below departs (one frame
    # below it at most), and the PG is read up to one frame time later (one more frame)
    frame = nic.roce.mtu + patterns.FRAME_OVERHEAD
    assert resume_at - 2 * frame <= at_xon["used"] <= resume_at, (
        f"XON at {at_xon['used']} B, not at max(xon, XOFF - xon_offset) = {resume_at} B "
        f"(within two frames): {figures}")
    assert json.dumps(figures)  # evidence is JSON
