"""PFC and ECN stop drops under incast, and each protection's absence brings them back.

Every check drives real RoCE traffic (``traffic.patterns``: RC QPs on the hosts' endpoints)
through the running lab, or through a copy of it with one thing changed, and keeps as
evidence the switches' counters before and after, a time series from every switch, the
PFC frames captured on the congested switch's upstream wire (pcapng), the endpoints'
statistics and plots. Each records the emulation's fidelity before its verdict: a run
that could not keep up says so in the report, whatever the verdict.

Sizes: every sender opens QPS QPs (more where it takes more to have the incast in flight),
each writing MESSAGES messages, sized from what brings the congested switch's RoCE PG to
XOFF and through its headroom (``Incast.flows``, ``checks.thresholds``): without flow
control something must give. A sender wired to the congested switch writes its input's
share; those wired elsewhere together write one more. The ECN comparison runs a longer incast twice, with and
without DCQCN (``ecn_load``), and judges both after DCQCN's start-up (STARTUP_S).
"""
from __future__ import annotations

import json

import pytest

from rocelab.checks import classes
from rocelab.checks import congestion as cg
from rocelab.checks import incast as ic
from rocelab.checks.congestion import (
    MAX_SLOWDOWN, MAX_XOFF_FRACTION, MESSAGES, MIN_BOTTLENECK_SHARE, QPS, STARTUP_S,
    after_startup, ecn_load, load,
)
from rocelab.checks import variants
from rocelab.labs import actions
from rocelab.checks import plots
from rocelab.checks.outcome import inconclusive
from rocelab.checks.report import record_evidence, record_fidelity, record_figures
from rocelab.fabric.model.watchdog import FABRIC, STORM_CHECK
from rocelab.fabric.qos import bound, pg_of_tc, queue_of_tc, tc_of_dscp
from rocelab.traffic import patterns

DCQCN_OFF = {"*": {"dcqcn": {"enabled": False}}}
STORM_S = 1.5
START_S = 20.0
TIMING_SLACK_S = 0.05  # the agent's event loop may run a poll this late


@pytest.fixture(scope="session")
def lossy_dscp(lab) -> int:
    """A DSCP no switch makes lossless (nor the CNPs'), from the lab's maps: the lossy class."""
    e = classes.of_topology(lab.topology)
    found = classes.control_dscp([n.config for n in lab.topology.switches], e.lossless,
                                 avoid=[e.cnp_dscp])
    if found is None:
        pytest.skip(f"lab {lab.name}: every DSCP is lossless somewhere, no lossy class")
    return found


@pytest.fixture(scope="session")
def congestion_dir(results):
    folder = results / "congestion"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def lossless_run(lab, incast, congestion_dir):
    """The incast with PFC doing all the work (DCQCN off), shared by the checks that
    compare against it."""
    sent = load(lab, incast)
    return cg.run_incast(lab, incast, congestion_dir, "lossless", flows=sent.flows,
                         nic=DCQCN_OFF, timeout_s=sent.timeout_s)


def keep(request, run: cg.Run, incast: ic.Incast) -> None:
    """Attach a run's evidence, plots and fidelity to the check."""
    record_fidelity(request, run.fidelity)
    for name in ("summary.json", "flows.json", "counters.json", "counters-startup.json"):
        if (run.folder / name).is_file():
            record_evidence(request, run.folder / name)
    for trace in run.traces.values():
        record_evidence(request, trace)
    for pcap in sorted((run.folder / "pcap").glob("*.pcapng")):
        record_evidence(request, pcap)
    record_figures(request, cg.figures(run, incast))


def test_lossless_incast(request, lab, incast, lossless_run):
    """N:1 on the RoCE priority: PFC holds the senders back, nothing is lost."""
    run = lossless_run
    keep(request, run, incast)
    lost = {"PG drops": run.pg_drops(incast.pg), "queue drops": run.queue_drops(incast.queue),
            "retransmitted": run.flows("retransmitted"), "timeouts": run.flows("timeouts")}
    assert run.result["complete"], f"not every message arrived: {run.summary()}"
    assert not any(lost.values()), f"lossless class lost frames: {lost}"
    sent = run.pfc_sent(incast.switch, incast.priority)
    assert sent > 0, (f"{incast.switch} sent no PFC for priority {incast.priority}: the "
                      f"incast never reached XOFF, so nothing was proven")
    assert run.pfc_received(incast.priority) > 0, "no switch or host upstream received PFC"
    assert run.pfc_frames > 0, f"no PFC frame captured on {incast.switch}'s upstream wires"


def test_negative_control_without_pfc(request, lab, incast, congestion_dir):
    """The same incast on a copy of the configs without pfc_enable must lose frames."""
    sent = load(lab, incast)
    with variants.variant(lab, "nopfc", congestion_dir, actions.without_pfc) as other:
        run = cg.run_incast(other, incast, congestion_dir, "without-pfc", flows=sent.flows,
                            nic=DCQCN_OFF, timeout_s=sent.timeout_s)
    keep(request, run, incast)
    drops = run.drop_reasons()
    assert run.pfc_sent() == 0, f"PFC sent although no port enables it: {run.summary()}"
    # the class's own buffers, not a start-up drop elsewhere (an unresolved neighbour's)
    lost = run.pg_drops(incast.pg) + run.queue_drops(incast.queue)
    assert lost > 0 and run.flows("retransmitted") > 0, (
        f"without PFC the incast lost nothing in PG {incast.pg} or queue {incast.queue} "
        f"({drops}, {run.flows('retransmitted')} retransmitted): this check could not tell "
        "a lossless fabric from a lossy one")


def test_ecn_before_pfc(request, lab, incast, congestion_dir):
    """With DCQCN on, CE marks and CNPs slow the senders before PFC must. Like with like:
    the same incast, ``ecn_load`` long, runs with DCQCN on and off, and both are judged
    after STARTUP_S (counters read then and at the end): with DCQCN the congested switch
    pauses its inputs for less of that time than without, and for less than half of it,
    and the bottleneck keeps at least MIN_BOTTLENECK_SHARE of its line rate and at least
    1 / MAX_SLOWDOWN of what PFC alone keeps."""
    sent = ecn_load(lab, incast)
    runs = {name: cg.run_incast(lab, incast, congestion_dir, name, flows=sent.flows, nic=nic,
                                timeout_s=sent.timeout_s, startup_s=STARTUP_S)
            for name, nic in (("dcqcn", None), ("dcqcn-off", DCQCN_OFF))}
    for run in runs.values():
        keep(request, run, incast)
    with_dcqcn, without = (after_startup(lab, incast, runs[n]) for n in ("dcqcn", "dcqcn-off"))
    figures = {"startup_s": STARTUP_S, "with_dcqcn": with_dcqcn, "without": without}
    path = runs["dcqcn"].folder / "comparison.json"
    path.write_text(json.dumps(figures, indent=1) + "\n")
    record_evidence(request, path)
    assert with_dcqcn["complete"] and without["complete"], \
        f"not every message arrived: {figures}"
    assert with_dcqcn["retransmitted"] == 0, f"DCQCN's slow senders retransmitted: {figures}"
    assert with_dcqcn["marks"] > 0 and with_dcqcn["cnps"] > 0 \
        and with_dcqcn["cnps_received"] > 0, f"no ECN feedback loop: {figures}"
    assert without["xoff_fraction"] > 0, (
        f"without DCQCN {incast.switch} paused nothing after the start-up, so there is "
        f"nothing to compare: {figures}")
    fan_in = (f"{len(incast.senders)} senders x {sent.qps} QPs into {incast.switch} {incast.port}; "
              "DCQCN and wide incasts: docs/lab-guide.md, \"Generating a fabric\"")
    assert with_dcqcn["xoff_fraction"] < without["xoff_fraction"], \
        f"DCQCN did not reduce pausing ({fan_in}): {figures}"
    assert with_dcqcn["xoff_fraction"] < MAX_XOFF_FRACTION, (
        f"{incast.switch} spent most of the time after the start-up in XOFF ({fan_in}): "
        f"{figures}")
    # DCQCN must save pauses without wasting the link
    assert with_dcqcn["bottleneck_share"] >= MIN_BOTTLENECK_SHARE, (
        f"with DCQCN the incast kept {with_dcqcn['bottleneck_share']:.0%} of {incast.switch} "
        f"{incast.port}'s line rate, below {MIN_BOTTLENECK_SHARE:.0%}: {figures}")
    slower = without["bottleneck_share"] / with_dcqcn["bottleneck_share"]
    assert slower <= MAX_SLOWDOWN, (
        f"with DCQCN the bottleneck carried {1 / slower:.0%} of what it carries under PFC "
        f"alone (less than 1 / {MAX_SLOWDOWN}): {figures}")


def test_lossy_class_drops_and_never_pauses(request, lab, incast, congestion_dir, lossy_dscp):
    """The same incast in a lossy class (a DSCP the lab's maps keep lossless nowhere): drops,
    and no PFC for it anywhere. A lossy class may take far more than the lossless PG before
    it drops, so the incast is sized to outgrow its own limit (``Incast.class_fill``: its
    ingress PG's or its egress queue's, whichever is tighter), with enough QPs to have
    that much in flight (``Incast.qps_to_overflow``)."""
    switch = lab.topology.nodes[incast.switch].config
    tc, _ = tc_of_dscp(switch, incast.port, lossy_dscp)
    pg, _ = pg_of_tc(switch, incast.port, tc)
    queue, _ = queue_of_tc(switch, incast.port, tc)
    fill = incast.class_fill(switch, pg, queue)
    if fill is None:
        pytest.skip(f"no buffer limits PG {pg} or queue {queue} of {incast.switch} "
                    f"{incast.port}: DSCP {lossy_dscp} cannot drop there")
    mtu = ic.roce_mtu(lab, incast)
    flows = incast.flows(incast.qps_to_overflow(QPS, mtu, fill), MESSAGES + 1, mtu, fill)
    # long enough to finish, retransmissions included
    timeout = ic.time_limit(lab, incast, ic.flow_bits(flows), 90.0)
    run = cg.run_incast(lab, incast, congestion_dir, "lossy", flows=flows, timeout_s=timeout,
                        dscp=lossy_dscp,
                        nic={"*": {"dcqcn": {"enabled": False}, "roce": {"ecn": False}}})
    keep(request, run, incast)
    assert run.pfc_sent() == 0, f"a lossy class triggered PFC: {run.summary()}"
    # at ingress (the PG's limit) or at egress (the queue's BUFFER_QUEUE limit), whichever
    # the buffer profiles make the tighter one
    assert run.pg_drops(pg) + run.queue_drops(queue) > 0, (
        f"DSCP {lossy_dscp} (TC {tc}, PG {pg}, queue {queue}) lost nothing under the "
        f"incast: {run.drop_reasons()}")


def test_headroom_too_small_drops(request, lab, incast, congestion_dir, lossless_run):
    """Headroom below the bytes that arrive after XOFF: the lossless PG drops them.

    The headroom is cut to a quarter of one RoCE frame: the frame that crosses XOFF spills
    past it on its own, and so does any frame already on its way. The emulation then
    exceeds its headroom on purpose, so the fidelity recorded leaves that out."""
    frame = ic.roce_mtu(lab, incast)
    shrunk = frame // 4
    sent = load(lab, incast)
    with variants.variant(lab, "headroom", congestion_dir, actions.headroom_of(shrunk)) as other:
        run = cg.run_incast(other, incast, congestion_dir, "small-headroom", flows=sent.flows,
                            nic=DCQCN_OFF,
                            timeout_s=sent.timeout_s, on_purpose="after XOFF")
    keep(request, run, incast)
    drops = run.drop_reasons()
    assert run.pfc_sent() > 0, f"the incast never reached XOFF: {run.summary()}"
    assert drops.get("headroom_exhausted", 0) > 0, (
        f"a headroom of {shrunk} B, a quarter frame, dropped nothing: {drops}")


def test_pfc_storm_watchdog(request, lab, incast, evidence):
    """A host pauses its link without end: the watchdog detects the storm within
    detection_time .. detection_time + poll, acts, restores after the storm and RoCE flows
    into the port again; other priorities keep flowing meanwhile.

    The watchdog's times run in fabric time (x S) in every other run; this check switches
    the congested switch to the ``storm-check`` profile, the configured times as wall time,
    for its own duration, so a storm of STORM_S shows detection and restoration."""
    # the stormer pauses the congested switch's port toward it: a sender wired to it
    local = [peer for _, peer, _ in incast.upstream if peer in incast.senders]
    if not local:
        pytest.skip(f"no incast sender is wired to {incast.switch}: no port of it to storm")
    stormer, source = local[0], incast.receiver
    switch = lab.topology.nodes[incast.switch]
    link = next(k for k in lab.topology.links
                if {k.a.node, k.b.node} == {stormer, incast.switch})
    port = lab.topology.port(incast.switch, link.a.iface if link.a.node == incast.switch
                             else link.b.iface)
    wd = switch.config.qos.pfc_wd.get(port)
    if wd is None:
        pytest.fail(f"{incast.switch} {port} pauses on priority {incast.priority} but has no "
                    "PFC_WD entry: a storm from its neighbour would stop the port for good "
                    "(nothing detects it); give the port a PFC watchdog")
    poll = switch.config.qos.pfc_wd_poll_interval_ms / 1000
    # ~4 s at line rate: still flowing when a storm that a busy machine started late begins
    flows = [patterns.FlowSpec(source, stormer, 1 << 21, 8)]
    # the storm, captured as the switch gets it
    wire = (incast.switch, lab.topology.iface(incast.switch, port))
    agent = lab.agent(incast.switch)
    agent.pfc_watchdog(STORM_CHECK)
    request.addfinalizer(lambda: agent.pfc_watchdog(FABRIC))
    rlo = wd.restoration_time_ms / 1000

    def restored() -> bool:
        events = agent.counters()["ports"][port]["watchdog"][str(incast.queue)]["events"]
        return any(e["kind"] == "restore" for e in events)

    with cg.observe(lab, evidence.dir, [wire]) as seen:
        # the flow must outlast the storm and the restoration, in the lab's own clock
        roce = patterns.start(lab, flows, pattern="storm", nic=DCQCN_OFF,
                              timeout_s=60 + lab.wall_s(STORM_S + rlo + poll))
        if not roce.flowing(START_S):  # the queue must hold RoCE when the storm begins
            roce.wait()
            pytest.fail(f"no RoCE flowed {source} -> {stormer} within {START_S} s")
        storming = lab.storm(stormer, incast.priority, STORM_S)
        addr = lab.host_addresses()[stormer]
        pings = [lab.ping(source, stormer, addr, count=3) for _ in range(2)]
        storm = storming.result()
        lab.wait_for(restored, rlo + poll + TIMING_SLACK_S, step=poll)  # the lab's clock
        result = roce.wait()
        # restored means RoCE flows again: a fresh QP, since the storm's own may have
        # exhausted its retries meanwhile, as a real NIC's would (retry-exceeded)
        after = patterns.run(lab, [patterns.FlowSpec(source, stormer, 1 << 16, 1)],
                             pattern="after-storm", timeout_s=30, nic=DCQCN_OFF)
    record_fidelity(request, seen.fidelity)
    record_figures(request, plots.RunFigures(tuple(seen.traces.values()),
                                             evidence.path("pauses.png")))
    watchdog = [c["ports"][port]["watchdog"][str(incast.queue)]["events"]
                for c in (seen.before[incast.switch], seen.after[incast.switch])]
    events = watchdog[1][len(watchdog[0]):]
    evidence.json("storm", {"storm": storm, "events": events, "pings": [p.ok for p in pings],
                            "flow": result["flows"][0], "flow_after": after["flows"][0],
                            "pfc_captured": seen.pfc_frames})
    assert seen.pfc_frames >= storm["frames"], (
        f"{storm['frames']} PFC frames sent, {seen.pfc_frames} captured on {wire[0]}:{wire[1]}")
    detected = [e for e in events if e["kind"] == "storm"]
    restored = [e for e in events if e["kind"] == "restore"]
    held = result["flows"][0]["completion_s"]["max"]  # None: no message completed
    if not detected and held is not None and held < STORM_S:
        inconclusive(f"the storm ({STORM_S} s) held no RoCE message (the longest took "
                     f"{held:.2f} s): it began after the flow had ended, the machine too busy "
                     "to start it in time; a watchdog sees no storm on an empty queue")
    assert detected, f"{incast.switch} {port} queue {incast.queue}: storm never detected"
    delay = detected[0]["time"] - storm["first"]
    lo, hi = wd.detection_time_ms / 1000, wd.detection_time_ms / 1000 + poll + TIMING_SLACK_S
    assert lo <= delay <= hi, f"detected {delay * 1e3:.0f} ms after the storm began, " \
                              f"not within {lo * 1e3:.0f}..{hi * 1e3:.0f} ms"
    assert detected[0]["action"] == wd.action
    assert restored, "the watchdog never restored the queue after the storm ended"
    back = restored[0]["time"] - storm["last"]
    assert rlo <= back <= rlo + poll + TIMING_SLACK_S, (
        f"restored {back * 1e3:.0f} ms after the last PFC, not within "
        f"{rlo * 1e3:.0f}..{(rlo + poll + TIMING_SLACK_S) * 1e3:.0f} ms")
    assert all(p.ok for p in pings), "other priorities stopped during the storm (ping failed)"
    assert after["complete"], (
        f"RoCE into the stormed port did not flow again after the watchdog restored it "
        f"(the storm's own flow: {result['flows'][0]['failed'] or 'complete'})")


def misclassified(lab, overrides: patterns.NicOverrides, result: dict, before: dict,
                  after: dict) -> list[str]:
    """Hosts whose RoCE landed in a lossy PG on their switch, each as one line naming the
    host, its DSCP and the switch table that put it there. A host counts when a lossy PG
    of its port took at least as many frames as it sent data packets (ARP, pings and CNPs
    are a few frames, never a message's worth)."""
    findings = []
    for host in lab.topology.hosts:
        sent = sum(f["packets_sent"] for f in result["flows"] if f["src"] == host.name)
        link = next((k for k in lab.topology.links if host.name in (k.a.node, k.b.node)), None)
        if not sent or link is None:
            continue
        end = link.b if link.a.node == host.name else link.a
        node = lab.topology.nodes[end.node]
        if not node.is_switch:
            continue
        port = lab.topology.port(end.node, end.iface)
        pgs_before = before[end.node]["ports"][port]["pgs"]
        for pg, now in after[end.node]["ports"][port]["pgs"].items():
            if now["lossless"] or now["rx_packets"] - pgs_before[pg]["rx_packets"] < sent:
                continue
            dscp = patterns.nic_settings(host, overrides).roce.dscp
            table, key = bound(node.config.qos, port, "dscp_to_tc_map")
            tc, _ = tc_of_dscp(node.config, port, dscp)
            findings.append(f"{host.name} marks RoCE with DSCP {dscp}: {end.node} "
                            f"DSCP_TO_TC_MAP|{table} (PORT_QOS_MAP|{key}) maps it to TC "
                            f"{tc}, PG {pg} on {port}, which is lossy")
    return findings


def ring(lab) -> list[patterns.FlowSpec]:
    """One small message from every host to the next one it reaches: each host's marking
    is seen once. Each host pings its next hosts in turn until one answers (one ping
    each, in a fabric where all reach all), not every pair."""
    hosts = sorted(h.name for h in lab.topology.hosts)
    addrs = lab.host_addresses()
    flows = []
    for i, src in enumerate(hosts):
        dst = next((d for d in hosts[i + 1:] + hosts[:i] if src in addrs and d in addrs
                    and lab.ping(src, d, addrs[d]).ok), None)
        if dst is not None:
            flows.append(patterns.FlowSpec(src, dst, 64 * 1024, 1))
    return flows


@pytest.mark.parametrize("mismarked", [False, True], ids=["hosts", "negative-control"])
def test_dscp_mismatch(request, lab, incast, evidence, mismarked, lossy_dscp):
    """Every host's RoCE lands in a lossless PG on its switch; and a host re-marked to the
    lossy class (the negative control) is reported by host, DSCP and switch table."""
    culprit = incast.senders[0]
    overrides = {culprit: {"roce": {"dscp": lossy_dscp}}} if mismarked else {}
    flows = ring(lab)
    with cg.observe(lab, evidence.dir, []) as seen:
        result = patterns.run(lab, flows, pattern="dscp", timeout_s=60, nic=overrides)
    record_fidelity(request, seen.fidelity)
    findings = misclassified(lab, overrides, result, seen.before, seen.after)
    evidence.json("findings", {"overrides": overrides, "findings": findings,
                               "flows": [f["name"] for f in result["flows"]]})
    if mismarked:
        assert len(findings) == 1 and findings[0].startswith(
            f"{culprit} marks RoCE with DSCP {lossy_dscp}"), (
            f"the re-marked {culprit} was not (only) reported: {findings}")
        assert "DSCP_TO_TC_MAP|" in findings[0]
    else:
        assert not findings, "; ".join(findings)
