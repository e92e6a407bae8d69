"""Congestion scenarios for the checks: an N:1 RoCE incast (``checks.incast``: which one
the lab has and how much each sender writes) run through a lab, with the evidence a verdict
rests on (counters before and after, a time series from every switch, a capture of PFC
frames, the endpoints' statistics, plots) and the emulation's fidelity; ``observe`` gives
any other scenario (a PFC storm, a DSCP mismatch) the same evidence. Also the loads the
congestion checks run (``load``, ``ecn_load``) and the ECN check's bounds.

Variants of a lab (``pfc_enable`` removed, headroom shrunk) are copies of its topology
folder with edited ``config_db.json`` files, brought up under another name next to it and
always taken down again (``checks.variants``).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from . import plots
from .incast import (
    Incast, bottleneck_bps, flow_bits, line_span, roce_mtu, time_limit, whole_mtus,
)
from .rerun import decided
from ..fabric import afpacket
from ..fabric.client import MIN_FRAMES_FOR_P99, closest, fidelity
from ..labs.lab import Lab
from ..traffic import patterns
from ..nic.roce import PFC_DST

TRACE_INTERVAL_MS = 2.0  # wall ms between a switch trace's samples (fabric time / S), ...
TRACE_POINTS = 20_000  # ... or longer, so that a scenario's line-rate time holds this many
PAUSE_POINTS = 2_000  # ... on the switches whose trace only feeds the pause timeline
# the congestion checks' incast: QPS QPs per sender, each writing MESSAGES messages
MESSAGES = 2
QPS = 4
# the ECN check (checks/test_congestion.py::test_ecn_before_pfc) and ``tune``'s verdict
MIN_BOTTLENECK_SHARE = 0.70  # with DCQCN, of the bottleneck's line rate after the start-up
MAX_SLOWDOWN = 1.5  # PFC alone's bottleneck share over DCQCN's, after the start-up
ECN_RUN_S = 8e-3  # fabric seconds of the bottleneck at line rate: the DCQCN comparison
STARTUP_S = 2e-3  # fabric seconds of DCQCN's start-up the comparison leaves out (< ECN_RUN_S)
MAX_XOFF_FRACTION = 0.5  # with DCQCN, of the time after the start-up
PFC_DST_BYTES = bytes.fromhex(PFC_DST.replace(":", ""))
PFC_ONLY = afpacket.dst_mac_filter(PFC_DST_BYTES)


def trace_interval_ms(span_s: float | None, points: int = TRACE_POINTS) -> float:
    """A switch trace's sample interval for a scenario whose traffic takes ``span_s`` wall
    seconds at line rate (``incast.line_span``; None: not known): TRACE_INTERVAL_MS, or
    longer so that span holds ``points`` samples: TRACE_POINTS on the congested switch,
    whose queues are plotted, PAUSE_POINTS (two per pixel of the plot's time axis) on the
    others, whose traces only draw the pause timeline. A plot shows no more, and a trace
    costs the simulator a sample of every moved port of every busy switch: a 255:1 incast at
    400G (``sizing-256``, 24 ms of fabric time at S = 12000) took 147 k samples of 64 ports
    on its congested leaf, 1.2 GB of traces for one check, and taking and reading them back
    was seven tenths of its time. The verdicts read counters, never a trace."""
    if span_s is None:
        return TRACE_INTERVAL_MS
    return max(TRACE_INTERVAL_MS, span_s * 1e3 / points)


@dataclass
class Observation:
    """What the switches showed during one scenario: counters before and after, a time
    series from each, the PFC frames captured on chosen wires, and the fidelity verdict."""

    folder: Path
    before: dict[str, dict]
    traces: dict[str, Path]
    after: dict[str, dict] = field(default_factory=dict)
    pfc_frames: int = 0
    fidelity: dict = field(default_factory=dict)


@dataclass(kw_only=True)
class Run(Observation):
    """One incast and what it left behind: what was observed, and the endpoints' results."""

    name: str
    result: dict
    startup_s: float = 0.0  # fabric seconds of start-up that ``window_s`` and the figures
    #                         over it leave out
    startup: dict[str, dict] = field(default_factory=dict)  # every switch's counters then

    def ports(self, counters: dict[str, dict]) -> Iterator[tuple[str, str, dict]]:
        for node, c in counters.items():
            for name, port in c["ports"].items():
                yield node, name, port

    def _sum(self, pick: Callable[[str, str, dict], float]) -> float:
        now = sum(pick(n, p, c) for n, p, c in self.ports(self.after))
        then = sum(pick(n, p, c) for n, p, c in self.ports(self.before))
        return now - then

    def pg_drops(self, pg: int) -> int:
        """Frames the ingress buffers of every switch dropped in ``pg``."""
        return int(self._sum(lambda n, p, c: c["pgs"][str(pg)]["drops"]))

    def queue_drops(self, queue: int) -> int:
        """Frames every switch dropped from egress ``queue`` (WRED, watchdog, port down)."""
        return int(self._sum(lambda n, p, c: sum(c["queues"][str(queue)]["dropped"].values())))

    def drop_reasons(self) -> dict[str, int]:
        """Every ingress and egress drop reason with its count, over all switches."""
        out: dict[str, int] = {}
        for side in (self.before, self.after):
            sign = 1 if side is self.after else -1
            for _, _, c in self.ports(side):
                for reason, n in c["drops"].items():
                    out[reason] = out.get(reason, 0) + sign * n
                for reason, n in c["egress_drops"].items():
                    out[reason] = out.get(reason, 0) + sign * n
        return {k: v for k, v in out.items() if v}

    def pfc_sent(self, node: str | None = None, priority: int | None = None) -> int:
        return int(self._sum(lambda n, p, c: 0 if node not in (None, n) else
                             sum(c["pfc_tx"]) if priority is None else c["pfc_tx"][priority]))

    def pfc_sent_from(self, ports: set[tuple[str, str]]) -> int:
        """PFC frames sent from ``ports``: (switch, SONiC port) pairs."""
        return int(self._sum(lambda n, p, c: sum(c["pfc_tx"]) if (n, p) in ports else 0))

    def pfc_received(self, priority: int) -> int:
        """PFC frames the switches and the hosts received for ``priority``."""
        switches = self._sum(lambda n, p, c: c["pfc_rx"][priority])
        hosts = sum(h["pfc_received"]["xoff"] + h["pfc_received"]["xon"]
                    for h in self.result["hosts"].values())
        return int(switches + hosts)

    def paused_s(self, priority: int | None = None) -> float:
        """Seconds of wall time transmitters spent paused on ``priority`` (None: on any),
        summed over every switch port and host. A host's NIC pauses its RoCE priority only
        (``paused_priority``), so it counts once, on that priority."""
        switches = self._sum(lambda n, p, c: (
            sum(c["paused_s"]) if priority is None else c["paused_s"][priority]))
        return switches + sum(h["paused_s"] for h in self.result["hosts"].values()
                              if priority is None or h.get("paused_priority") == priority)

    def marks(self) -> int:
        return int(self._sum(lambda n, p, c: c["ecn_marked"]))

    def flows(self, key: str) -> int:
        return sum(f[key] for f in self.result["flows"])

    def cnps(self) -> int:
        return sum(f["receiver"]["cnps_sent"] for f in self.result["flows"])

    def window_s(self) -> float:
        """The run's own seconds (wall live, simulated in sim) after its start-up."""
        return self.result["elapsed_s"] - self.startup_s * self.result["time_scale"]

    def xoff_fraction(self, switch: str, ports: list[str], pg: int) -> float:
        """After the start-up: the largest share of that time any of ``ports`` of
        ``switch`` held ``pg`` in XOFF, pausing its upstream."""
        def held(counters: dict[str, dict], port: str) -> float:
            return counters[switch]["ports"][port]["pgs"][str(pg)]["xoff_seconds"]
        return max(held(self.after, p) - held(self.startup, p) for p in ports) / self.window_s()

    def line_share(self, switch: str, port: str, speed_bps: float) -> float:
        """After the start-up: what ``port`` of ``switch`` sent (frame bytes, as the wire
        carries them) as a share of its line rate over that time (speed / S live)."""
        sent = (self.after[switch]["ports"][port]["tx_bytes"]
                - self.startup[switch]["ports"][port]["tx_bytes"])
        return sent * 8 / (self.window_s() * speed_bps / self.result["time_scale"])

    def summary(self) -> dict:
        return {"name": self.name, "complete": self.result["complete"],
                "elapsed_s": self.result["elapsed_s"], "time_scale": self.result["time_scale"],
                "delivered_bytes": self.flows("delivered_bytes"),
                "retransmitted": self.flows("retransmitted"), "naks": self.flows("naks_received"),
                "timeouts": self.flows("timeouts"), "cnps": self.cnps(), "ecn_marks": self.marks(),
                "drops": self.drop_reasons(), "pfc_sent": self.pfc_sent(),
                "paused_s": self.paused_s(),
                "pfc_frames_captured": self.pfc_frames, "fidelity": self.fidelity}


@contextmanager
def observe(lab: Lab, out: Path, wires: list[tuple[str, str]], span_s: float | None = None,
            focus: str | None = None) -> Iterator[Observation]:
    """Observe the block: every switch's fidelity figures cleared (the scenario is judged by
    its own), counters read, traces running (``trace_interval_ms`` of ``span_s``, the
    scenario's ``incast.line_span``: TRACE_POINTS on ``focus``, the congested switch,
    PAUSE_POINTS on the others), PFC captured on ``wires`` (filtered in the kernel: reading
    a busy wire in Python would cost the agents their fidelity)."""
    out.mkdir(parents=True, exist_ok=True)
    switches = [s.name for s in lab.topology.switches]
    for s in switches:
        lab.agent(s).clear_fidelity()
    seen = Observation(out, {s: lab.agent(s).counters() for s in switches},
                       {s: out / f"trace-{s}.jsonl" for s in switches})
    for s in switches:
        points = TRACE_POINTS if focus in (None, s) else PAUSE_POINTS
        lab.agent(s).trace_start(seen.traces[s], interval_ms=trace_interval_ms(span_s, points))
    try:
        with lab.capture(where=wires, pcap_dir=out / "pcap", bpf=PFC_ONLY,
                         match=lambda f: f[:6] == PFC_DST_BYTES) as capture:
            yield seen
            capture.wait_quiet(0.1, 1.0)
            seen.pfc_frames = len(capture.frames())
    finally:
        for s in switches:
            lab.agent(s).trace_stop()
    seen.after = {s: lab.agent(s).counters() for s in switches}
    problems, worst = [], None
    for s in switches:
        verdict = fidelity(seen.after[s])
        problems += [f"{s}: {p}" for p in verdict["problems"]]
        if (w := verdict.get("worst")) is not None:
            worst = closest(worst, f"{s} {w['where']}", w["what"], w["p99_s"], w["bound_s"])
    seen.fidelity = {"ok": not problems, "problems": problems, "worst": worst,
                     "runtime": lab.runtime_name,
                     "time_scale": max((lab.node_time_scale(n.name)
                                        for n in lab.topology.switches), default=None)}
    (out / "counters.json").write_text(json.dumps({"before": seen.before,
                                                   "after": seen.after}) + "\n")


def run_incast(lab: Lab, incast: Incast, folder: Path, name: str, *,
               flows: list[patterns.FlowSpec], nic: patterns.NicOverrides | None = None,
               timeout_s: float = 90.0, dscp: int | None = None, startup_s: float = 0.0,
               rerun: bool = True, on_purpose: str | None = None) -> Run:
    """Run ``flows`` (the incast's, ``Incast.flows``, or other traffic through the same
    switch: ``tune``'s all-to-all) observed (PFC captured on every upstream wire of the congested
    switch: it leaves on whichever ingress PG reached XOFF), evidence in ``folder/name``.
    ``startup_s``: every switch's counters are also read that many fabric seconds into the
    run (``lab.wait``: the lab's own clock), so that figures can leave the start-up out.

    A live run that lost fidelity is run once more, with ``rerun``, on a slower copy of
    the lab (``checks.rerun``). ``on_purpose``: problems containing it are the scenario's
    doing (a headroom cut on purpose), not lost fidelity."""
    def attempt(at: Lab, label: str, factor: float) -> Run:
        run = _run_incast(at, incast, folder, label, flows=flows, nic=nic,
                          timeout_s=timeout_s * factor, dscp=dscp, startup_s=startup_s)
        if on_purpose:
            kept = [p for p in run.fidelity["problems"] if on_purpose not in p]
            run.fidelity.update(problems=kept, ok=not kept)
        return run
    return decided(lab, folder, name, attempt, lambda run: run.fidelity, rerun)


def _run_incast(lab: Lab, incast: Incast, folder: Path, name: str, *,
                flows: list[patterns.FlowSpec], nic: patterns.NicOverrides | None,
                timeout_s: float, dscp: int | None, startup_s: float) -> Run:
    out = folder / name
    if dscp is not None:
        every = (nic or {}).get("*", {})
        nic = {**(nic or {}), "*": {**every, "roce": {**every.get("roce", {}), "dscp": dscp}}}
    startup: dict[str, dict] = {}
    span = line_span(lab, incast, flow_bits(flows))
    with observe(lab, out, [(incast.switch, i) for i, _, _ in incast.upstream], span,
                 incast.switch) as seen:
        running = patterns.start(lab, flows, pattern="incast", timeout_s=timeout_s, nic=nic)
        if startup_s and running.started():  # the start-up counts from the flows' go
            lab.wait(lab.wall_s(startup_s * lab.node_time_scale(incast.receiver)))
            startup = {s: lab.agent(s).counters() for s in seen.before}
        result = running.wait()
    problems, worst = endpoint_problems(result, seen.fidelity.get("worst"))
    problems = seen.fidelity["problems"] + problems
    run = Run(**{**vars(seen), "fidelity": {**seen.fidelity, "ok": not problems,
                                            "problems": problems, "worst": worst}},
              name=name, result=result,
              startup_s=startup_s, startup=startup)
    (out / "flows.json").write_text(json.dumps(result, indent=1) + "\n")
    if startup:
        (out / "counters-startup.json").write_text(json.dumps(startup) + "\n")
    (out / "summary.json").write_text(json.dumps(run.summary(), indent=1) + "\n")
    return run


def endpoint_problems(result: dict, worst: dict | None = None
                      ) -> tuple[list[str], dict | None]:
    """Where the hosts' endpoints lost fidelity: frames the kernel dropped under them, and a
    p99 arrival lateness (the NIC got a frame later than its last bit crossed the cable,
    over at least MIN_FRAMES_FOR_P99 releases; an endpoint without a cable: its ingress lag)
    beyond one MTU frame time, the switches' own rule (``fabric.client.fidelity``); a late
    endpoint that ran without real-time scheduling (``fabric.realtime``) says why.
    Simulated endpoints report neither: they cannot lag. Also the p99 nearest its bound,
    starting from the switches' ``worst``."""
    problems = []
    for host, report in result["hosts"].items():
        if report.get("kernel_rx_drops"):
            problems.append(f"{host}: {report['kernel_rx_drops']} frames dropped in the "
                            f"kernel under its endpoint")
        key, what = ("arrival_lateness", "arrival lateness") if "arrival_lateness" in report \
            else ("ingress_lag", "ingress lag")
        lag, frame_s = report.get(key) or {}, report.get("mtu_frame_s")
        if frame_s and lag.get("count", 0) >= MIN_FRAMES_FOR_P99:
            worst = closest(worst, f"{host} endpoint", what, lag["p99_s"], frame_s)
        if frame_s and lag.get("count", 0) >= MIN_FRAMES_FOR_P99 and lag["p99_s"] > frame_s:
            scheduling = report.get("scheduling", "")
            problems.append(f"{host}: p99 {what} {lag['p99_s'] * 1e3:.2f} ms > one MTU "
                            f"frame ({frame_s * 1e3:.2f} ms) under its endpoint"
                            + (f" ({scheduling})" if scheduling.startswith("normal") else ""))
    return problems, worst


def figures(run: Run, incast: Incast) -> plots.RunFigures:
    """The run's plots: the bottleneck's queues and PGs, PFC pauses per link, the flows."""
    inputs = incast.ports()
    pg = run.after[incast.switch]["ports"][inputs[0]]["pgs"][str(incast.pg)]
    queues = plots.QueueFigure(run.traces[incast.switch], incast.port,
                               run.folder / "queues.png", {f"headroom PG{incast.pg}":
                                                           pg["headroom"]}, tuple(inputs))
    return plots.RunFigures(tuple(run.traces.values()), run.folder / "pauses.png", queues,
                            (run.result["flows"], run.folder / "flows.png"))


class Load(NamedTuple):
    """What the incast's senders write (``qps`` QPs each, MESSAGES messages per QP:
    ``Incast.flows``), and the run's time limit (``incast.time_limit``)."""

    qps: int
    flows: list[patterns.FlowSpec]
    timeout_s: float


def load(lab: Lab, incast: Incast) -> Load:
    """The incast: QPS QPs per sender, or as many as it takes to have it in flight
    (``Incast.qps_to_overflow``), each writing MESSAGES messages (``Incast.flows``); a time
    limit of at least 90 s live."""
    mtu = roce_mtu(lab, incast)
    qps = incast.qps_to_overflow(QPS, mtu)
    flows = incast.flows(qps, MESSAGES, mtu)
    return Load(qps, flows, time_limit(lab, incast, flow_bits(flows), 90.0))


def ecn_load(lab: Lab, incast: Incast) -> Load:
    """The ECN comparison's incast: at least ``load``'s, and enough to keep the bottleneck
    busy for ECN_RUN_S at line rate, every sender writing its part; a time limit of at least
    180 s live. DCQCN's claims (the
    queue held in the marking band, few pauses, the link kept busy) are about its steady
    state, and getting there is slow: every QP starts at line rate and the first cuts, with
    alpha at 1, take it to the floor, from which the firmware climbs back a 300 us timer
    step at a time (about 2 ms, STARTUP_S, to each QP's share with a dozen QPs). An incast
    sized by the buffers alone may last 2-3 ms at 100G: it would judge mostly the start-up
    (docs/checks.md, "The checks")."""
    mtu = roce_mtu(lab, incast)
    qps = incast.qps_to_overflow(QPS, mtu)  # ``load``'s
    per_message = (bottleneck_bps(lab, incast) * ECN_RUN_S / 8
                   / (len(incast.senders) * qps * MESSAGES))
    flows = incast.flows(qps, MESSAGES, mtu, at_least=whole_mtus(per_message, mtu))
    return Load(qps, flows, time_limit(lab, incast, flow_bits(flows), 180.0))


def after_startup(lab: Lab, incast: Incast, run: Run) -> dict:
    """A run's figures after STARTUP_S: the share of that time the congested switch held
    any of its inputs in XOFF on the RoCE PG (its pause fraction), and the bottleneck's
    share of its line rate."""
    return {"xoff_fraction": round(run.xoff_fraction(incast.switch, incast.ports(),
                                                     incast.pg), 3),
            "bottleneck_share": round(run.line_share(incast.switch, incast.port,
                                                     bottleneck_bps(lab, incast)), 3),
            "window_s": round(run.window_s(), 6), "marks": run.marks(), "cnps": run.cnps(),
            "cnps_received": run.flows("cnps_received"), "complete": run.result["complete"],
            "retransmitted": run.flows("retransmitted")}
