"""invoke tasks: the user's entry points. Thin: the work lives in labs/, fabric/, traffic/."""
from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

from invoke import Collection, Exit, task
from rich.console import Console
from rich.table import Table

from fabric.client import AgentError
from fabric.config import ConfigError
from labs import lab as labs
from labs import state as states
from labs.runtimes.netns import LabError
from labs.topology import TopologyError
from traffic import probe as probes

console = Console(width=None if sys.stdout.isatty() else 110)
USER_ERRORS = (LabError, TopologyError, ConfigError, AgentError)


def _fail(e: Exception) -> Exit:
    return Exit(f"rocelab: {e}", code=1)


@task(help={"name": "lab name (topologies/NAME) or path to a .clab.yml",
            "runtime": "netns (default, embedded) or containerlab (docs/containerlab.md)"})
def up(c, name, runtime="netns"):
    """Bring a lab up: namespaces, veth wires, switch agents, host addresses."""
    try:
        with console.status(f"bringing up {name}"):
            lab = labs.up(name, runtime)
    except USER_ERRORS as e:
        raise _fail(e) from None
    console.print(f"[green]lab {lab.name} is up[/]: {len(lab.topology.nodes)} nodes, "
                  f"{len(lab.topology.links)} links (state in {lab.state.dir})")


@task(help={"name": "lab name or topology path"})
def down(c, name):
    """Take a lab down and remove every trace of it (safe to repeat)."""
    try:
        removed = labs.down(name)
    except USER_ERRORS as e:
        raise _fail(e) from None
    console.print(f"lab {name} " + ("removed" if removed else "was not running"))


@task(help={"name": "lab name (default: the only running lab)"})
def status(c, name=""):
    """Nodes, agents, links and counters of a running lab."""
    try:
        lab = labs.running(name) if name else labs.the_only_running()
        nodes, links = lab.status()
    except USER_ERRORS as e:
        raise _fail(e) from None
    table = Table(title=f"lab {lab.name} ({lab.state.runtime}, {lab.state.status})")
    for col in ("node", "kind", "namespace", "agent", "S", "rx pkts", "tx pkts", "drops",
                "fidelity"):
        table.add_column(col, justify="right" if "pkts" in col or col == "drops" else "left")
    for n in nodes:
        ports = n.counters.get("ports", {}).values()
        rx = sum(p.get("rx_packets", 0) for p in ports)
        tx = sum(p.get("tx_packets", 0) for p in ports)
        drops = sum(n.counters.get("drops", {}).values())
        agent = ("-" if n.agent_alive is None else
                 f"[green]alive[/] pid {n.agent_pid}" if n.agent_alive else
                 f"[red]dead[/] {n.agent_error}")
        ns = n.namespace if n.namespace_present else f"[red]{n.namespace} missing[/]"
        counts = (str(rx), str(tx), str(drops)) if n.agent_alive else ("", "", "")
        scale = n.counters.get("time_scale")
        table.add_row(n.name, n.kind, ns, agent, "" if scale is None else f"{scale:g}",
                      *counts, _fidelity_cell(n.counters.get("fidelity")))
    console.print(table)
    wires = Table(title="links")
    for col in ("a", "b", "mtu", "state"):
        wires.add_column(col)
    for link in links:
        wires.add_row(link.a, link.b, str(link.mtu), "[green]up[/]" if link.up else "[red]down[/]")
    console.print(wires)
    drops = {r: v for n in nodes for r, v in n.counters.get("drops", {}).items() if v}
    if drops:
        console.print("drops by reason: " + ", ".join(f"{r} {v}" for r, v in sorted(drops.items())))
    if any(n.agent_alive is False or not n.namespace_present for n in nodes):
        raise Exit("rocelab: lab is degraded (see the table)", code=1)


def _fidelity_cell(verdict: dict | None) -> str:
    """ok, or LOST with the first reason (the emulation did not keep up)."""
    if verdict is None:
        return ""
    if verdict["ok"]:
        return "[green]ok[/]"
    more = len(verdict["problems"]) - 1
    return f"[red]LOST[/] {verdict['problems'][0]}" + (f" (+{more} more)" if more else "")


@task(help={"name": "lab name (default: the only running lab)"})
def pingall(c, name=""):
    """Every host pings every other host, both ways; shows router hops on each path."""
    try:
        lab = labs.running(name) if name else labs.the_only_running()
        with console.status("pinging all host pairs"):
            results = lab.ping_all()
    except USER_ERRORS as e:
        raise _fail(e) from None
    hosts = sorted({r.src for r in results})
    table = Table(title=f"reachability in {lab.name} (cell: router hops, from the reply TTL)")
    table.add_column("from \\ to")
    for h in hosts:
        table.add_column(h, justify="center")
    cell = {(r.src, r.dst): r for r in results}
    for s in hosts:
        table.add_row(s, *("-" if s == d else
                           f"[green]ok[/] {cell[s, d].hops}" if cell[s, d].ok else "[red]FAIL[/]"
                           for d in hosts))
    console.print(table)
    failed = [r for r in results if not r.ok]
    console.print(f"{len(results) - len(failed)}/{len(results)} host pairs reachable")
    if failed:
        raise Exit("rocelab: unreachable: " + ", ".join(f"{r.src}->{r.dst}" for r in failed),
                   code=1)


@task(help={"node": "node name", "lab": "lab name (default: the only running lab)"})
def exec_(c, node, lab=""):
    """Run a command inside a node: invoke lab.exec h1 -- ping -c1 10.1.2.13"""
    argv = shlex.split(c.remainder)
    if not argv:
        raise Exit("rocelab: give the command after --, e.g. invoke lab.exec h1 -- ip addr", 2)
    try:
        handle = labs.running(lab) if lab else labs.the_only_running()
        command = handle.runtime.exec_argv(handle.state, node, argv)
    except USER_ERRORS as e:
        raise _fail(e) from None
    code = subprocess.call(command)
    if code:
        raise Exit(code=code)


@task(help={"node": "switch node name", "seconds": "how long to trace (wall seconds)",
            "out": "JSON-lines file (default: results/trace-<lab>-<node>-<time>.jsonl)",
            "interval_ms": "wall milliseconds between samples (data-plane times are "
                           "stretched by S: at S=3000, 1 ms is ~0.33 us emulated)",
            "lab": "lab name (default: the only running lab)"})
def trace(c, node, seconds=5.0, out="", interval_ms=1.0, lab=""):
    """Record a switch's queue depths, PG occupancy and pause state over time, for plots
    (docs/lab-guide.md, "Time series")."""
    try:
        handle = labs.running(lab) if lab else labs.the_only_running()
        path = Path(out) if out else _default_trace_path(handle.name, node)
        path.parent.mkdir(parents=True, exist_ok=True)
        agent = handle.agent(node)
        agent.trace_start(path, interval_ms=interval_ms)
        try:
            with console.status(f"tracing {node} for {seconds:g} s"):
                time.sleep(seconds)
        finally:
            samples = agent.trace_stop()
    except USER_ERRORS as e:
        raise _fail(e) from None
    console.print(f"{path.resolve()}: {samples} samples")


def _default_trace_path(lab: str, node: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(__file__).resolve().parent / "results" / f"trace-{lab}-{node}-{stamp}.jsonl"


@task(name="list")
def list_(c):
    """Running labs."""
    table = Table(title="labs")
    for col in ("lab", "status", "runtime", "nodes", "topology"):
        table.add_column(col)
    for s in states.all_labs():
        table.add_row(s.lab, s.status, s.runtime, str(len(s.namespaces)), s.topology)
    console.print(table)


@task(help={"all": "remove every lab, healthy or not"})
def cleanup(c, all=False):
    """Remove leftovers of crashed runs (labs whose deploy died or whose agents died)."""
    removed = labs.cleanup(everything=all)
    console.print("removed: " + (", ".join(removed) if removed else "nothing"))


@task
def test(c, unit=False):
    """The test suite (integration tests need root and are skipped without it)."""
    args = [sys.executable, "-m", "pytest", "tests"] + (["-m", "not root"] if unit else [])
    raise Exit(code=subprocess.call(args))


@task(help={"only": "comma list of lifecycle, forwarding, incast (default: all)"})
def bench(c, only=""):
    """Benchmarks: lab.up/down against bare iproute2, agent forwarding against a bare relay,
    incast fidelity against S."""
    names = [name for name in only.split(",") if name]
    raise Exit(code=subprocess.call([sys.executable, "-m", "bench", *names]))


@task(help={"name": "lab name (topologies/NAME) or path to a .clab.yml (brought up and down "
                    "again if it is not running)",
            "k": "only the checks matching this pytest -k expression",
            "results": "results folder (default: results/<lab>-<YYYYmmdd-HHMMSS>/)"})
def check(c, name, k="", results=""):
    """Run the checks (checks/) against a live lab: [PASS]/[FAIL] per check, JUnit + JSON."""
    from checks import run as checks
    try:
        code, folder = checks.run(name, k=k or None, results=results or None,
                                  say=console.print)
    except USER_ERRORS as e:
        raise _fail(e) from None
    if code:
        raise Exit(f"rocelab: checks failed (exit {code}); evidence in {folder}", code=code)


@task(help={"lab": "lab name (default: the only running lab)", "src": "sending host",
            "dst": "destination host", "kind": "v2 (RoCEv2), v1 (RoCEv1) or pfc",
            "count": "frames to send", "dscp": "DSCP of RoCE frames",
            "ecn": "ECN of RoCE frames (0 not ECT, 1 ECT1, 2 ECT0, 3 CE)",
            "pcp": "802.1p priority (RoCE tag; the priority a PFC frame pauses)",
            "vlan": "tag on RoCE frames: 0 priority tag (default), N for VID N, none",
            "pcap": "folder for one pcapng per interface (Wireshark evidence)"})
def probe(c, src, dst, lab="", kind="v2", count=3, dscp=26, ecn=2, pcp=3, vlan="0", pcap=""):
    """Send crafted RoCE/PFC frames from a host; show where they went and what changed."""
    if vlan.lower() != "none" and not vlan.isdigit():
        raise _fail(f"--vlan {vlan!r} is not a VLAN id or 'none'")
    try:
        handle = labs.running(lab) if lab else labs.the_only_running()
        with console.status(f"probing {kind} {src} -> {dst}"):
            result = probes.probe(handle, src, dst, kind, count=count, dscp=dscp, ecn=ecn,
                                  pcp=pcp, vlan=None if vlan.lower() == "none" else int(vlan),
                                  pcap_dir=Path(pcap) if pcap else None)
    except (*USER_ERRORS, probes.ProbeError) as e:
        raise _fail(e) from None
    console.print(_probe_table(handle.name, result))
    console.print(result.verdict())
    if result.pcap_dir is not None:
        console.print(f"evidence: {result.pcap_dir} (one pcapng per interface)")


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


@task(help={"name": "lab name (topologies/NAME) or path to a .clab.yml",
            "format": "clabernetes (Kubernetes manifests: a Topology and its ConfigMaps)",
            "out": "output folder (default: build/clabernetes/<lab>/)"})
def export_lab(c, name, format="clabernetes", out=""):
    """Write the lab as clabernetes manifests, for kubectl apply (docs/scale-out.md)."""
    from labs import export as exports
    try:
        done = exports.export(name, format, Path(out) if out else None)
    except USER_ERRORS as e:
        raise _fail(e) from None
    console.print(f"wrote {done.path}: Topology {done.topology} and {done.config_maps} "
                  f"ConfigMaps; apply with: kubectl apply -f {done.path}")
    if done.largest_mtu:
        console.print(f"links carry MTU {done.largest_mtu}: clabernetes' VXLAN adds "
                      f"{exports.VXLAN_OVERHEAD} bytes, so the cluster network needs MTU >= "
                      f"{done.largest_mtu + exports.VXLAN_OVERHEAD} (docs/scale-out.md)")


@task(help={"engine": "container engine CLI: docker (default) or podman",
            "mirror": "Debian mirror for the base image (default: the one apt uses here)"})
def build_images(c, engine="docker", mirror=""):
    """Build rocelab-switch and rocelab-host, the images --runtime containerlab deploys, on a
    base built from Debian packages (no image registry needed; docs/containerlab.md)."""
    from labs.runtimes import containerlab
    try:
        built = containerlab.build_images(
            engine, mirror=mirror or None,
            say=lambda line: console.print(f"image.build: {line}", markup=False, soft_wrap=True))
    except USER_ERRORS as e:
        raise _fail(e) from None
    console.print("built: " + ", ".join(built))


@task(help={"name": "lab name (topologies/NAME) or path to a .clab.yml",
            "priority": "lossless RoCE priority (default: label rocelab.roce-priority, else 3)",
            "dscp": "DSCP of RoCEv2 data", "cnp_dscp": "DSCP of CNPs",
            "json": "print the findings as JSON instead of a table"})
def lint(c, name, priority=-1, dscp=26, cnp_dscp=48, json=False):
    """Static checks of the switch configs (no root, no lab): the lossless path, headroom,
    ECN before PFC, CNP queue, PFC watchdog, references, consistency, host NIC DSCP
    (docs/lint.md)."""
    from checks import lint as lints
    try:
        lab = lints.load_lab(name, None if priority < 0 else priority, dscp, cnp_dscp)
    except USER_ERRORS as e:
        raise _fail(e) from None
    findings = lints.lint(lab)
    counts = lints.counts(findings)
    if json:
        print(lints.as_json(lab, findings))
    else:
        if findings:
            console.print(_lint_table(lab, findings))
        console.print(f"{lab.topology.name}: {counts['error']} errors, {counts['warning']} "
                      f"warnings, {counts['info']} info in {len(lab.configs)} switch configs "
                      f"(RoCE priority {lab.settings.priority}, DSCP {lab.settings.dscp}, "
                      f"CNP DSCP {lab.settings.cnp_dscp})")
    if counts["error"]:
        raise Exit(code=1)


def _lint_table(lab, findings) -> Table:
    """One row per finding; files relative to the lab's folder, which every one is under."""
    table = Table(title=f"config.lint {lab.topology.path}", show_lines=True)
    for col in ("severity", "rule", "file", "where", "why", "fix"):
        table.add_column(col, overflow="fold")
    colour = {"error": "red", "warning": "yellow", "info": "blue"}
    base = lab.topology.path.parent
    for f in findings:
        path = Path(f.file)
        shown = path.relative_to(base) if path.is_relative_to(base) else path
        table.add_row(f"[{colour[f.severity]}]{f.severity}[/]", f.rule, str(shown), f.where,
                      f.why, f.fix)
    return table


lab_tasks = Collection("lab", up, down, status, pingall, list_, cleanup, trace)
lab_tasks.add_task(exec_, name="exec")
lab_tasks.add_task(export_lab, name="export")
traffic_tasks = Collection("traffic", probe)
ns = Collection(lab_tasks, traffic_tasks, test, bench, check)
ns.add_collection(Collection("image", build=build_images))
ns.add_collection(Collection("config", lint))
