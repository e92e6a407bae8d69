"""``traffic.*``: crafted probes, RoCE patterns, perftest and the TCP baseline in a lab."""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from invoke import Collection, Exit, task
from rich.table import Table

from ...labs.lab import Lab

from ...labs.runtimes.sim import simulated
from ...labs.errors import LabError
from .common import REUSE_HELP, USER_ERRORS, console, fail, using
from ...traffic import patterns, softroce, tcp_baseline
from ...traffic import probe as probes
from ...traffic import summary as traffic_summary


@task(help={"lab": "lab name (default: the only running lab)", "src": "sending host",
            "dst": "destination host", "kind": "v2 (RoCEv2), v1 (RoCEv1) or pfc",
            "count": "frames to send",
            "dscp": "DSCP of RoCE frames (default: the sending host's NIC settings)",
            "ecn": "ECN of RoCE frames (0 not ECT, 1 ECT1, 2 ECT0, 3 CE)",
            "pcp": "802.1p priority (RoCE tag; the priority a PFC frame pauses; default: "
                   "the sending host's NIC settings)",
            "vlan": "tag on RoCE frames: 0 priority tag (default), N for VID N, none",
            "pcap": "folder for one pcapng per interface (Wireshark evidence)",
            "reuse": REUSE_HELP})
def probe(c, src, dst, lab="", kind="v2", count=3, dscp=-1, ecn=2, pcp=-1, vlan="0", pcap="",
          reuse=False):
    """Send crafted RoCE/PFC frames from a host; show where they went and what changed."""
    if vlan.lower() != "none" and not vlan.isdigit():
        raise fail(f"--vlan {vlan!r} is not a VLAN id or 'none'")
    try:
        with using(lab, reuse) as handle, console.status(f"probing {kind} {src} -> {dst}"):
            if src not in handle.topology.nodes:
                raise fail(f"--src {src}: no such node in lab {handle.name}")
            roce = patterns.nic_settings(handle.topology.nodes[src], None).roce
            result = probes.probe(handle, src, dst, kind, count=count,
                                  dscp=roce.dscp if dscp < 0 else dscp, ecn=ecn,
                                  pcp=roce.priority if pcp < 0 else pcp, vlan=None if vlan.lower() == "none" else int(vlan),
                                  pcap_dir=Path(pcap) if pcap else None)
    except (*USER_ERRORS, probes.ProbeError) as e:
        raise fail(e) from None
    console.print(_probe_table(handle.name, result))
    console.print(result.verdict())
    if result.pcap_dir is not None:
        console.print(f"evidence: {result.pcap_dir} (one pcapng per interface)")


def _hosts(text: str, lab: Lab) -> list[str]:
    """A comma-separated host list; empty means every host of the lab."""
    names = [h.strip() for h in text.split(",") if h.strip()]
    return names or [h.name for h in lab.topology.hosts]


@contextmanager
def _traffic_lab(spec: str, reuse: bool, runtime: str, time_scale: float,
                 seed: int) -> Iterator:
    """The running lab (live), or the lab's files in virtual time (``--runtime sim``)."""
    if runtime == "sim":
        sim = simulated(spec, float(time_scale), int(seed))
        try:
            yield sim
        finally:
            sim.down()
    elif runtime in ("netns", "containerlab", "live"):
        with using(spec, reuse) as handle:
            yield handle
    else:
        raise LabError(f"--runtime {runtime!r}: say netns (the running lab) or sim")


def _run_pattern(lab: str, pattern: str, build, json_path: str, timeout: float,
                 dcqcn: str, reuse: bool, runtime: str = "netns", time_scale: float = 1.0,
                 seed: int = 0) -> None:
    """Run a pattern with a progress bar, print the flow table, write JSON, exit 1 unless
    every message arrived."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeElapsedColumn
    nic = None
    if dcqcn:
        if dcqcn not in ("on", "off"):
            raise fail(f"--dcqcn {dcqcn!r}: say on or off")
        nic = {"*": {"dcqcn": {"enabled": dcqcn == "on"}}}
    try:
        with _traffic_lab(lab, reuse, runtime, time_scale, seed) as handle, \
                Progress("[progress.description]{task.description}", BarColumn(),
                         DownloadColumn(), TimeElapsedColumn(), console=console) as bar:
            flows = build(handle)
            job = bar.add_task(f"{pattern}: {len(flows)} flows", total=None)
            result = patterns.run(handle, flows, pattern=pattern, timeout_s=timeout, nic=nic,
                                  progress=lambda done, total: bar.update(job, completed=done,
                                                                          total=total))
    except (*USER_ERRORS, patterns.PatternError) as e:
        raise fail(e) from None
    console.print(traffic_summary.flow_table(result))
    console.print(traffic_summary.verdict(result))
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=1) + "\n")
        console.print(f"results: {json_path}")
    if not result["complete"]:
        raise Exit(code=1)


PATTERN_HELP = {"lab": "lab name or topology path", "size": "message bytes",
                "count": "messages per flow", "qps": "QPs per pair of hosts",
                "json": "write every flow's results here", "timeout": "seconds before giving up",
                "dcqcn": "on or off for every host (default: the hosts' NIC settings)",
                "reuse": REUSE_HELP,
                "runtime": "netns (default: the running lab) or sim (the lab's files in "
                           "virtual time, at real line rate; docs/runtimes.md)",
                "time_scale": "sim only: S (default 1)", "seed": "sim only: the seed"}


@task(help={**PATTERN_HELP, "to": "receiving host", "from": "sending hosts (default: all others)"})
def incast(c, lab, to="", from_="", size=65536, count=16, qps=1, json="", timeout=60,
           dcqcn="", reuse=False, runtime="netns", time_scale=1.0, seed=0):
    """N:1 RoCE incast (RDMA WRITE over RC QPs) through the lab."""
    if not to:
        raise fail("give the receiver: --to h1")
    _run_pattern(lab, "incast", lambda h: patterns.incast(
        to, [s for s in _hosts(from_, h) if s != to], size, count, qps), json, timeout, dcqcn,
        reuse, runtime, time_scale, seed)


@task(help={**PATTERN_HELP, "hosts": "hosts, comma-separated (default: all)"})
def alltoall(c, lab, hosts="", size=65536, count=8, qps=1, json="", timeout=60, dcqcn="",
             reuse=False, runtime="netns", time_scale=1.0, seed=0):
    """Every host sends to every other host at once."""
    _run_pattern(lab, "alltoall", lambda h: patterns.alltoall(_hosts(hosts, h), size, count,
                                                               qps), json, timeout, dcqcn, reuse,
                 runtime, time_scale, seed)


@task(help={**{k: v for k, v in PATTERN_HELP.items() if k not in ("count", "qps")},
            "hosts": "ring order, comma-separated (default: all hosts)",
            "size": "bytes each host reduces (split in N chunks)"})
def allreduce(c, lab, hosts="", size=4 << 20, json="", timeout=60, dcqcn="", reuse=False,
              runtime="netns", time_scale=1.0, seed=0):
    """Ring all-reduce: 2(N-1) steps, each host's step waiting for its neighbour's chunk."""
    _run_pattern(lab, "allreduce", lambda h: patterns.ring_allreduce(_hosts(hosts, h), size),
                 json, timeout, dcqcn, reuse, runtime, time_scale, seed)


@task(help={"lab": "lab name or topology path", "src": "client host (sends)",
            "dst": "server host (receives)", "test": "write_bw or send_lat",
            "size": "message bytes (0: every size, perftest -a)",
            "iterations": "iterations per size", "reuse": REUSE_HELP})
def perftest(c, lab, src="", dst="", test="write_bw", size=65536, iterations=1000,
             reuse=False):
    """perftest over Soft-RoCE (rdma_rxe) between two hosts; says what is missing if it can't."""
    if not src or not dst:
        raise fail("give both hosts: --src h2 --dst h1")
    found = softroce.detect()
    if not found.available:
        raise Exit(f"rocelab: {found.reason}", code=1)
    try:
        with using(lab, reuse) as handle, \
                console.status(f"{softroce.TESTS.get(test, test)} {src} -> {dst}"):
            run = softroce.run(handle, src, dst, test, size=size or None, iterations=iterations)
    except (*USER_ERRORS, softroce.SoftRoceError, tcp_baseline.TcpBaselineError) as e:
        raise fail(e) from None
    columns = list(run.rows[0])
    table = Table(title=f"{softroce.TESTS[test]} {src} -> {dst} in {handle.name} (Soft-RoCE)")
    for col in columns:
        table.add_column(col, justify="right")
    for row in run.rows:
        table.add_row(*(f"{row[col]:g}" for col in columns))
    console.print(table)


@task(name="tcp-incast",
      help={"lab": "lab name or topology path", "to": "receiving host",
            "from": "sending hosts, comma-separated",
            "seconds": "how long each flow sends (whole seconds)",
            "bytes": "send this many bytes per flow instead of for --seconds",
            "dscp": "DSCP of every flow (TOS = DSCP << 2); 0 (default) is the usual lossy class",
            "reuse": REUSE_HELP})
def tcp_incast(c, lab, to="", from_="", seconds=5, bytes_=0, dscp=0, reuse=False):
    """N:1 TCP incast with iperf3: the kernel-TCP baseline for the RoCE incast."""
    srcs = [s.strip() for s in from_.split(",") if s.strip()]
    if not to or not srcs:
        raise fail("give the receiver and the senders: --to h1 --from h2,h3")
    try:
        with using(lab, reuse) as handle, console.status(f"TCP incast {','.join(srcs)} -> {to}"):
            result = tcp_baseline.incast(handle, to, srcs, seconds=None if bytes_ else seconds,
                                         nbytes=bytes_ or None, dscp=dscp)
    except (*USER_ERRORS, tcp_baseline.TcpBaselineError) as e:
        raise fail(e) from None
    table = Table(title=f"TCP incast {','.join(srcs)} -> {to} in {handle.name} (DSCP {dscp})")
    for col in ("from", "port", "seconds", "sent bytes", "received bytes", "goodput Mb/s",
                "retransmits"):
        table.add_column(col, justify="left" if col == "from" else "right")
    for f in result.flows:
        table.add_row(f.src, str(f.port), f"{f.seconds:.2f}", f"{f.sent_bytes:,}",
                      f"{f.received_bytes:,}", f"{f.goodput_bps / 1e6:.2f}", str(f.retransmits))
    table.add_row("total", "", "", f"{result.sent_bytes:,}", f"{result.received_bytes:,}",
                  f"{result.goodput_bps / 1e6:.2f}", str(result.retransmits), style="bold")
    console.print(table)


def _probe_table(lab: str, result: probes.ProbeResult) -> Table:
    """One row per interface and direction; values that differ from what was sent in yellow."""
    table = Table(title=f"{result.kind} probe {result.src} -> {result.dst} in {lab} "
                        f"({len(result.sent)} frames sent)")
    for col in ("node", "iface", "dir", "frames", "TTL", "DSCP", "ECN", "VID/PCP", "ICRC"):
        table.add_column(col, justify="right" if col == "frames" else "left")

    def cell(obs: probes.Observation, text: str, *fields: str) -> str:
        return f"[yellow]{text}[/]" if set(fields) & set(obs.changed) else text

    for obs in result.changes():
        tags = "-" if obs.vid == (None,) else f"{_values(obs.vid)}/{_values(obs.pcp)}"
        icrc = ",".join("-" if ok is None else "[green]ok[/]" if ok else "[red]BAD[/]"
                        for ok in obs.icrc_ok)
        table.add_row(obs.node, obs.iface, obs.direction, str(obs.frames),
                      cell(obs, _values(obs.ttl), "ttl"), cell(obs, _values(obs.dscp), "dscp"),
                      cell(obs, _values(obs.ecn), "ecn"), cell(obs, tags, "vid", "pcp"), icrc)
    return table


def _values(values: tuple) -> str:
    return ",".join("-" if v is None else str(v) for v in values)



ns = Collection("traffic", probe, incast, alltoall, allreduce, perftest, tcp_incast)
