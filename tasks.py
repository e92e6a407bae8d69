"""invoke tasks: the user's entry points. Thin: the work lives in labs/, fabric/, traffic/."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from invoke import Collection, Exit, task
from rich.console import Console
from rich.table import Table

from fabric.client import AgentError
from fabric.config import ConfigError
from labs import lab as labs
from labs import actions, lock, show
from labs import state as states
from labs.runtimes.netns import LabError
from labs.topology import TopologyError
from traffic import patterns, softroce, tcp_baseline
from traffic import probe as probes
from traffic import summary as traffic_summary

console = Console(width=None if sys.stdout.isatty() else 110)
USER_ERRORS = (LabError, TopologyError, ConfigError, AgentError, states.StateError)
# a file that is not what it must be: nothing was done (exit 2, as for a bad argument)
BAD_INPUT = (TopologyError, ConfigError, states.StateError)


def _fail(e: Exception | str) -> Exit:
    """One line on stderr. Exit 2 for bad input (a file, an argument: nothing was done), 1
    for an operation that failed, so a CI job can tell a typo from a broken fabric."""
    return Exit(f"rocelab: {e}", code=2 if isinstance(e, (str, *BAD_INPUT)) else 1)


def _interrupted(e: KeyboardInterrupt, what: str) -> Exit:
    """Ctrl-C, SIGTERM or SIGHUP: say what was undone; exit 128 + the signal, as a shell
    reports a process the signal stopped."""
    signum = getattr(e, "signum", 2)
    return Exit(f"rocelab: interrupted ({'SIGINT' if signum == 2 else str(e)}): {what}",
                code=128 + signum)


REUSE_HELP = ("use a running lab whose files changed since lab.up, or that was brought up "
              "from another path (warns instead of refusing)")


@contextmanager
def _using(spec: str, reuse: bool | None = None) -> Iterator[labs.Lab]:
    """The running lab ``spec`` names (the only one when empty) under a shared lock: no up,
    down or check of it meanwhile. With ``reuse`` given, it is refused when stale
    (labs.lab.checked)."""
    name = labs.name_of(spec)
    with lock.hold(name, exclusive=False):
        if reuse is None:
            yield labs.running(name)
        else:
            yield labs.checked(spec, reuse=reuse,
                               warn=lambda line: console.print(f"[yellow]{line}[/]"))


@task(help={"name": "lab name (topologies/NAME) or path to a .clab.yml",
            "runtime": "netns (default, embedded) or containerlab (docs/containerlab.md)"})
def up(c, name, runtime="netns"):
    """Bring a lab up: namespaces, veth wires, switch agents, host addresses."""
    try:
        with console.status(f"bringing up {name}"):
            lab = labs.up(name, runtime, warn=lambda line: console.print(line, style="yellow"))
    except USER_ERRORS as e:
        raise _fail(e) from None
    except KeyboardInterrupt as e:
        raise _interrupted(e, f"lab {name} rolled back") from None
    console.print(f"[green]lab {lab.name} is up[/]: {len(lab.topology.nodes)} nodes, "
                  f"{len(lab.topology.links)} links (state in {lab.state.dir})")


@task(help={"name": "lab name or topology path"})
def down(c, name):
    """Take a lab down and remove every trace of it (safe to repeat)."""
    try:
        removed = labs.down(name)
    except USER_ERRORS as e:
        raise _fail(e) from None
    kept = states.kept_logs(labs.lab_name(name))
    console.print(f"lab {name} " + (f"removed (agent logs kept in {kept})" if removed
                                    and kept.is_dir() else "removed" if removed
                                    else "was not running"))


@task(help={"name": "lab name (default: the only running lab)", "reuse": REUSE_HELP})
def status(c, name="", reuse=False):
    """Nodes, agents, links and counters of a running lab."""
    try:
        with _using(name, reuse) as lab:
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
    drops = show.drop_totals(n.counters for n in nodes)
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
        with _using(name) as lab, console.status("pinging all host pairs"):
            results = lab.ping_all()
    except USER_ERRORS as e:
        raise _fail(e) from None
    hosts = sorted(h.name for h in lab.topology.hosts)
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
    for problem in sorted({r.error for r in failed if r.error}):
        console.print(f"[red]{problem}[/]")
    if failed:
        raise Exit("rocelab: unreachable: " + ", ".join(f"{r.src}->{r.dst}" for r in failed),
                   code=1)


@task(help={"node": "node name", "lab": "lab name (default: the only running lab)"})
def exec_(c, node, lab=""):
    """Run a command inside a node: invoke lab.exec h1 -- ping -c1 10.1.2.13"""
    argv = _command_after_ddash(c.remainder)
    if not argv:
        raise Exit("rocelab: give the command after --, e.g. invoke lab.exec h1 -- ip addr", 2)
    try:
        with _using(lab) as handle:
            code = subprocess.call(handle.runtime.exec_argv(handle.state, node, argv))
    except USER_ERRORS as e:
        raise _fail(e) from None
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
        with _using(lab) as handle:
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


def _command_after_ddash(remainder: str) -> list[str]:
    """The words after ``--`` as the shell passed them. invoke hands a task only their
    space-joined text, which loses the shell's quoting (``echo "it's"`` arrives as
    ``echo it's``): when this process's own argv holds exactly that remainder, its words are
    used; otherwise (invoke driven from Python) the text is split with shell rules."""
    if "--" in sys.argv:
        words = sys.argv[sys.argv.index("--") + 1:]
        if " ".join(words) == remainder:
            return words
    try:
        return shlex.split(remainder)
    except ValueError as e:
        raise _fail(f"the command after --: {e}") from None


@task(help={"node": "switch node name", "lab": "lab name (default: the only running lab)"})
def trace_stop(c, node, lab=""):
    """Stop switch NODE's trace (one started from Python, or a lab.trace cut short), or
    collect one that ended at its time or size limit: its path, size and why it ended."""
    try:
        handle = labs.running(lab) if lab else labs.the_only_running()
        end = handle.agent(node).trace_end()
    except USER_ERRORS as e:
        raise _fail(e) from None
    console.print(f"{end['path']}: {end['samples']} samples, {end['bytes']} bytes, "
                  f"{end['seconds']:g} s, ended: {end['reason']}", soft_wrap=True)


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
    if unreadable := states.unreadable():
        console.print(f"no readable state ({states.state_root()}): {', '.join(unreadable)}; "
                      "invoke lab.cleanup --all removes them", markup=False, soft_wrap=True)


@task(help={"all": "remove every lab, healthy or not"})
def cleanup(c, all=False):
    """Remove leftovers of crashed runs (labs whose deploy crashed or whose agents died, and
    variant labs of a check that is gone); each lab on its own, failures said per lab."""
    done = labs.cleanup(everything=all)
    console.print("removed: " + (", ".join(done.removed) if done.removed else "nothing"))
    for name, why in done.failed.items():
        console.print(f"[red]not removed[/]: {name}: {why}", soft_wrap=True)
    if done.failed:
        raise Exit(f"rocelab: {len(done.failed)} lab(s) not removed: "
                   f"{', '.join(done.failed)}", code=1)


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
            "results": "results folder (default: a new results/<lab>-<YYYYmmdd-HHMMSS>[-N]/); "
                       "refused when not empty unless --overwrite",
            "overwrite": "replace the previous run's results in --results",
            "reuse": REUSE_HELP,
            "runtime": "netns (default: the live lab), containerlab, or sim (virtual time, "
                       "docs/runtimes.md)",
            "time_scale": "sim only: S (default 1: real line rate)",
            "seed": "sim only: the seed of every random choice (default 0)"})
def check(c, name, k="", results="", overwrite=False, reuse=False, runtime="netns",
          time_scale=1.0, seed=0):
    """Run the checks (checks/) against a lab: [PASS]/[FAIL] per check, JUnit + JSON."""
    from checks import run as checks
    extra = ["--time-scale", str(float(time_scale)), "--seed", str(int(seed))] \
        if runtime == "sim" else []
    try:
        code, folder = checks.run(name, k=k or None, results=results or None,
                                  say=console.print, reuse=reuse, overwrite=overwrite,
                                  runtime=runtime, extra=extra)
    except USER_ERRORS as e:
        raise _fail(e) from None
    except KeyboardInterrupt as e:
        raise _interrupted(e, "the checks stopped after their teardown; every lab the run "
                              "brought up is down (summary.json says incomplete)") from None
    if code == checks.INCONCLUSIVE_EXIT:
        raise Exit(f"rocelab: checks inconclusive (exit {code}): the emulation lost fidelity; "
                   f"rerun with --runtime sim or a larger S; evidence in {folder}", code=code)
    if code:
        raise Exit(f"rocelab: checks failed (exit {code}); evidence in {folder}", code=code)


@task(help={"lab": "lab name (default: the only running lab)", "src": "sending host",
            "dst": "destination host", "kind": "v2 (RoCEv2), v1 (RoCEv1) or pfc",
            "count": "frames to send", "dscp": "DSCP of RoCE frames",
            "ecn": "ECN of RoCE frames (0 not ECT, 1 ECT1, 2 ECT0, 3 CE)",
            "pcp": "802.1p priority (RoCE tag; the priority a PFC frame pauses)",
            "vlan": "tag on RoCE frames: 0 priority tag (default), N for VID N, none",
            "pcap": "folder for one pcapng per interface (Wireshark evidence)",
            "reuse": REUSE_HELP})
def probe(c, src, dst, lab="", kind="v2", count=3, dscp=26, ecn=2, pcp=3, vlan="0", pcap="",
          reuse=False):
    """Send crafted RoCE/PFC frames from a host; show where they went and what changed."""
    if vlan.lower() != "none" and not vlan.isdigit():
        raise _fail(f"--vlan {vlan!r} is not a VLAN id or 'none'")
    try:
        with _using(lab, reuse) as handle, console.status(f"probing {kind} {src} -> {dst}"):
            result = probes.probe(handle, src, dst, kind, count=count, dscp=dscp, ecn=ecn,
                                  pcp=pcp, vlan=None if vlan.lower() == "none" else int(vlan),
                                  pcap_dir=Path(pcap) if pcap else None)
    except (*USER_ERRORS, probes.ProbeError) as e:
        raise _fail(e) from None
    console.print(_probe_table(handle.name, result))
    console.print(result.verdict())
    if result.pcap_dir is not None:
        console.print(f"evidence: {result.pcap_dir} (one pcapng per interface)")


def _hosts(text: str, lab: labs.Lab) -> list[str]:
    """A comma-separated host list; empty means every host of the lab."""
    names = [h.strip() for h in text.split(",") if h.strip()]
    return names or [h.name for h in lab.topology.hosts]


@contextmanager
def _traffic_lab(spec: str, reuse: bool, runtime: str, time_scale: float,
                 seed: int) -> Iterator:
    """The running lab (live), or the lab's files in virtual time (``--runtime sim``)."""
    if runtime == "sim":
        sim = labs.simulated(spec, float(time_scale), int(seed))
        try:
            yield sim
        finally:
            sim.down()
    elif runtime in ("netns", "containerlab", "live"):
        with _using(spec, reuse) as handle:
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
            raise _fail(f"--dcqcn {dcqcn!r}: say on or off")
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
        raise _fail(e) from None
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
        raise _fail("give the receiver: --to h1")
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
        raise _fail("give both hosts: --src h2 --dst h1")
    found = softroce.detect()
    if not found.available:
        raise Exit(f"rocelab: {found.reason}", code=1)
    try:
        with _using(lab, reuse) as handle, \
                console.status(f"{softroce.TESTS.get(test, test)} {src} -> {dst}"):
            run = softroce.run(handle, src, dst, test, size=size or None, iterations=iterations)
    except (*USER_ERRORS, softroce.SoftRoceError, tcp_baseline.TcpBaselineError) as e:
        raise _fail(e) from None
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
            "dscp": "DSCP of every flow (TOS = DSCP << 2): 26 lossless class, 0 lossy",
            "reuse": REUSE_HELP})
def tcp_incast(c, lab, to="", from_="", seconds=5, bytes_=0, dscp=0, reuse=False):
    """N:1 TCP incast with iperf3: the kernel-TCP baseline for the RoCE incast."""
    srcs = [s.strip() for s in from_.split(",") if s.strip()]
    if not to or not srcs:
        raise _fail("give the receiver and the senders: --to h1 --from h2,h3")
    try:
        with _using(lab, reuse) as handle, console.status(f"TCP incast {','.join(srcs)} -> {to}"):
            result = tcp_baseline.incast(handle, to, srcs, seconds=None if bytes_ else seconds,
                                         nbytes=bytes_ or None, dscp=dscp)
    except (*USER_ERRORS, tcp_baseline.TcpBaselineError) as e:
        raise _fail(e) from None
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


@task(help={"name": "lab name (topologies/NAME) or path to a .clab.yml",
            "format": "clabernetes (Kubernetes manifests: a Topology and its ConfigMaps)",
            "out": "output folder (default: build/clabernetes/<lab>/)",
            "connectivity": "vxlan (default) or slurpeeth (TCP tunnels, no VXLAN MTU limit)"})
def export_lab(c, name, format="clabernetes", out="", connectivity="vxlan"):
    """Write the lab as clabernetes manifests, for kubectl apply (docs/scale-out.md)."""
    from labs import export as exports
    try:
        done = exports.export(name, format, Path(out) if out else None, connectivity)
    except USER_ERRORS as e:
        raise _fail(e) from None
    console.print(f"wrote {done.path}: Topology {done.topology} and {done.config_maps} "
                  f"ConfigMaps; apply with: kubectl apply -f {done.path}")
    if done.largest_mtu and done.connectivity == "vxlan":
        console.print(f"links carry MTU {done.largest_mtu}: clabernetes' VXLAN adds "
                      f"{exports.VXLAN_OVERHEAD} bytes, so the pod network needs MTU >= "
                      f"{done.largest_mtu + exports.VXLAN_OVERHEAD} (docs/scale-out.md)")


@task(help={"engine": "container engine CLI: docker (default) or podman",
            "mirror": "Debian mirror for the base image (default: the one apt uses here)"})
def build_images(c, engine="docker", mirror=""):
    """Build rocelab-switch and rocelab-host, the images --runtime containerlab deploys, on a
    base built from Debian packages (no image registry needed; docs/containerlab.md)."""
    from labs import images
    try:
        built = images.build_images(
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


@task(name="generate", auto_shortflags=False,
      help={"name": "lab name; the folder is topologies/NAME unless --out is given",
            "hosts_per_leaf": "hosts on each leaf (a rack: one /24 and VLAN)",
            "leaves": "leaves (racks)",
            "spines": "spines of a two-tier fabric (a divisor of the uplinks per leaf); "
                      "0: the fewest that fit, or three tiers beyond one spine's radix",
            "speed": "every port's speed: 100G or 400G",
            "oversubscription": "host over uplink bandwidth per leaf: 1 (non-blocking), 3 (3:1)",
            "radix": "ports per switch",
            "roce_dscp": "DSCP of RoCEv2 data", "roce_priority": "lossless RoCE priority",
            "cnp_dscp": "DSCP of CNPs", "cnp_priority": "priority (strict queue) of CNPs",
            "out": "folder to write (default topologies/NAME)",
            "force": "replace the folder if it exists"})
def generate(c, name, hosts_per_leaf=2, leaves=2, spines=0, speed="100G", oversubscription=1.0,
             radix=64, roce_dscp=26, roce_priority=3, cnp_dscp=48, cnp_priority=6, out="",
             force=False):
    """Write a lab folder for a leaf-spine RoCE fabric of a given size, with a complete
    lossless profile per switch (docs/lab-guide.md, "Generating a fabric")."""
    from labs import generate as gen
    spec = gen.Spec(name, hosts_per_leaf, leaves, spines, speed, oversubscription, radix,
                    roce_dscp, roce_priority, cnp_dscp, cnp_priority)
    try:
        done = gen.write(spec, Path(out) if out else None, force)
    except gen.GenerateError as e:
        raise Exit(f"rocelab: {e}", code=2) from None
    console.print(f"wrote {done.path}: {gen.describe(done.fabric)}", soft_wrap=True)


@task(help={"name": "lab name (topologies/NAME) or path to a .clab.yml",
            "results": "folder for both runs (default: results/compare-<lab>-<time>/)",
            "seed": "the simulated run's seed"})
def compare(c, name, results="", seed=0):
    """Each congestion scenario live and in virtual time at the lab's S, side by side:
    verdicts, PFC frames, pause time, completion time, frames lost (docs/runtimes.md)."""
    from checks import compare as cmp
    from checks import run as checks
    try:
        folder = Path(results) if results else checks.fresh_results(
            f"compare-{labs.lab_name(name)}")
        rows = cmp.compare(name, folder, say=console.print, seed=int(seed))
    except USER_ERRORS as e:
        raise _fail(e) from None
    table = Table(title=f"live vs simulated at the lab's S ({folder})")
    for col in ("scenario", "verdict live / sim", *(f"{f} live / sim" for f in cmp.FIGURES)):
        table.add_column(col)
    for row in rows:
        cells = [row.scenario, f"{row.live.get('verdict')} / {row.sim.get('verdict')}"
                 + ("" if row.verdicts_agree else " [red]differ[/]")]
        for f in cmp.FIGURES:
            a, b = row.live.get(f), row.sim.get(f)
            mark = "" if row.agrees(f) else " [yellow]>15%[/]"
            cells.append(f"{a:.4g} / {b:.4g}{mark}" if a is not None and b is not None
                         else f"{a} / {b}")
        table.add_row(*cells)
    console.print(table)
    if not all(r.verdicts_agree for r in rows):
        raise Exit("rocelab: live and simulated verdicts differ", code=1)


# --------------------------------------------------------------------------- operator views


def _show_task(view: str, doc: str):
    """A ``show.<view>`` task: the view of one switch or of every switch, deltas since the
    last ``clear.<view>`` where SONiC keeps them (labs/show.py)."""
    @task(name=view, help={"switch": "one switch (default: every switch)",
                           "lab": "lab name (default: the only running lab)",
                           "nonzero": "only rows with a count", "json": "print JSON rows"})
    def show_view(c, switch="", lab="", nonzero=False, json=False):
        try:
            with _using(lab) as handle:
                names = [switch] if switch else [s.name for s in handle.topology.switches]
                counters = {s: handle.agent(s).counters() for s in names}
                snaps = show.load_snapshots(states.lab_dir(handle.name), names)
        except USER_ERRORS as e:
            raise _fail(e) from None
        rows = show.view(view, counters, snaps, nonzero)
        _print_rows(f"show {view.replace('-', ' ')} ({handle.name}"
                    + (", since clear" if snaps and view in show.CLEARABLE else "") + ")",
                    rows, json)
    show_view.__doc__ = doc
    return show_view


def _clear_task(view: str):
    @task(name=view, help={"lab": "lab name (default: the only running lab)"})
    def clear_view(c, lab=""):
        try:
            with _using(lab) as handle:
                n = show.clear(handle, view, states.lab_dir(handle.name))
        except USER_ERRORS as e:
            raise _fail(e) from None
        console.print(f"{view} cleared on {n} switches of {handle.name}: show.{view} "
                      + ("prints peaks from now" if view in show.WATERMARKS
                         else "prints deltas since now"))
    clear_view.__doc__ = (f"Reset every switch's {view.replace('-', ' ')}s to now."
                          if view in show.WATERMARKS else
                          f"Snapshot every switch's counters: show.{view} (and every other "
                          "clearable view) then prints deltas since this moment.")
    return clear_view


def _print_rows(title: str, rows: list[dict], as_json: bool) -> None:
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    if not rows:
        console.print(f"{title}: nothing to show")
        return
    table = Table(title=title)
    for col in rows[0]:
        table.add_column(col, justify="left" if col in ("switch", "host") or not isinstance(
            rows[0][col], (int, float)) else "right")
    for row in rows:
        table.add_row(*(f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)
                        for v in row.values()))
    console.print(table)


@task(name="nic-counters", help={"results": "a traffic run's results (--json of "
                                            "traffic.incast, alltoall, allreduce)",
                                 "priority": "the RoCE priority (default: from the lab's "
                                             "first host NIC settings, else 3)"})
def show_nic_counters(c, results="", priority=-1):
    """Host NIC counters named as mlx5 names them, next to rocelab's own names."""
    if not results:
        raise _fail("give a traffic run's results: --results FILE")
    try:
        result = json.loads(Path(results).read_text())
    except (OSError, ValueError) as e:
        raise _fail(f"{results}: {e}") from None
    if priority < 0:
        try:
            lab = labs.running(result["lab"])
            host = lab.topology.hosts[0]
            priority = host.nic.roce.priority if host.nic else 3
        except (*USER_ERRORS, KeyError, IndexError):
            priority = 3
    _print_rows(f"NIC counters ({results})", show.nic_counters(result, priority), False)


VIEW_DOCS = {
    "pfc-counters": "show pfc counters: PFC frames received and sent per priority, per port.",
    "queue-counters": "show queue counters: per queue, packets and bytes sent, dropped, "
                      "ECN-marked, and the depth now.",
    "queue-watermark": "show queue watermark unicast: the deepest each queue has been.",
    "pg-watermark": "show priority-group watermark shared/headroom: the most each ingress "
                    "PG has held.",
    "pfcwd-stats": "show pfcwd stats: per watched queue, state, storms and watchdog drops.",
    "interfaces-counters": "show interfaces counters: state, RX/TX OK and drops per port.",
}
show_tasks = Collection("show", show_nic_counters,
                        *(_show_task(v, VIEW_DOCS[v]) for v in show.VIEWS))
clear_tasks = Collection("clear", *(_clear_task(v) for v in (*show.CLEARABLE,
                                                               *show.WATERMARKS)))


# --------------------------------------------------------------------------- actions


@task(name="link-down", help={"a": "node or node:iface", "b": "node or node:iface",
                              "lab": "lab name (default: the only running lab)"})
def link_down(c, a, b, lab=""):
    """Take the link between A and B down at both ends, as a pulled cable."""
    _set_link(a, b, lab, False)


@task(name="link-up", help={"a": "node or node:iface", "b": "node or node:iface",
                            "lab": "lab name (default: the only running lab)"})
def link_up(c, a, b, lab=""):
    """Bring the link between A and B back up at both ends."""
    _set_link(a, b, lab, True)


def _set_link(a: str, b: str, lab: str, up: bool) -> None:
    try:
        with _using(lab) as handle:
            link = actions.set_link(handle, a, b, up)
    except USER_ERRORS as e:
        raise _fail(e) from None
    console.print(f"{link.a} - {link.b} {'up' if up else 'down'} in {handle.name}")


@task(name="pfc-storm", help={"host": "the host whose NIC storms", "seconds": "how long",
                              "priority": "the priority it pauses (default: the host's "
                                          "RoCE priority)",
                              "lab": "lab name (default: the only running lab)"})
def pfc_storm(c, host, seconds=1.5, priority=-1, lab=""):
    """A host sends PFC without end on one priority for SECONDS (a broken NIC)."""
    try:
        with _using(lab) as handle:
            node = handle.topology.nodes.get(host)
            if priority < 0:
                priority = node.nic.roce.priority if node is not None and node.nic else 3
            with console.status(f"{host} storming priority {priority} for {seconds:g} s"):
                storm = actions.pfc_storm(handle, host, priority, seconds)
    except USER_ERRORS as e:
        raise _fail(e) from None
    console.print(f"{host}: {storm.frames} PFC frames on priority {priority} over "
                  f"{storm.last - storm.first:.2f} s; see invoke show.pfcwd-stats")


VARIANTS = ("nopfc", "headroom", "remark", "nowd", "updown")


@task(help={"name": "lab name (topologies/NAME) or path to its .clab.yml",
            "kind": "nopfc (pfc_enable removed), headroom (xoff cut to --xoff), remark "
                    "(--host re-marks RoCE to --dscp), nowd (PFC watchdog off), updown "
                    "(summary routes removed)",
            "as_": "the variant's lab name (default: NAME-KIND)",
            "host": "remark: the host", "dscp": "remark: its DSCP (default 0)",
            "xoff": "headroom: bytes (default 1024)",
            "runtime": "netns (default) or containerlab"})
def variant(c, name, kind, as_="", host="", dscp=0, xoff=1024, runtime="netns"):
    """Bring up a variant of a lab under its own name, next to it (build/variants/NAME/)."""
    from checks import deadlock
    edits = {"nopfc": actions.without_pfc, "headroom": actions.headroom_of(xoff),
             "nowd": actions.without_watchdog, "updown": deadlock.up_down_routing,
             "remark": None}
    if kind not in edits:
        raise _fail(f"--kind {kind!r}: one of {', '.join(VARIANTS)}")
    if kind == "remark" and not host:
        raise _fail("--kind remark needs --host")
    try:
        source = labs.topology.resolve(name)
        new = as_ or f"{labs.lab_name(str(source))}-{kind}"
        clab = actions.write_variant(
            source, new, Path(__file__).resolve().parent / "build" / "variants" / new,
            edits[kind], actions.dscp_remarked(dscp) if kind == "remark" else None,
            (host,) if kind == "remark" else ())
        with console.status(f"bringing up {new}"):
            lab = labs.up(str(clab), runtime)
    except USER_ERRORS as e:
        raise _fail(e) from None
    console.print(f"[green]lab {lab.name} is up[/] ({kind} variant of {name}, files in "
                  f"{clab.parent}); invoke lab.down {lab.name} removes it")


action_tasks = Collection("action", link_down, link_up, pfc_storm, variant)


# --------------------------------------------------------------------------- exercises


@task(name="check", help={"n": "the exercise's number (docs/exercises.md)",
                          "runtime": "sim (default: virtual time, in this process) or live "
                                     "(the running lab, as the exercise left it)",
                          "answer": "your answer, for an exercise that asks for one"})
def exercise_check(c, n, runtime="sim", answer=""):
    """Self-check of exercise N: runs the check that proves its expected result."""
    from checks import exercises
    try:
        code = exercises.check(int(n), runtime, answer, say=console.print)
    except (*USER_ERRORS, exercises.ExerciseError) as e:
        raise _fail(e) from None
    if code:
        raise Exit(f"rocelab: exercise {n}: not yet (see the lines above)", code=code)


@task(name="list")
def exercise_list(c):
    """The exercises and the check each runs."""
    from checks import exercises
    for ex in exercises.EXERCISES:
        console.print(f"{ex.number:2d}. {ex.title}  [dim]({ex.lab}: {ex.describe()})[/]")


exercise_tasks = Collection("exercise", exercise_list)
exercise_tasks.add_task(exercise_check, name="check")


lab_tasks = Collection("lab", up, down, status, pingall, list_, cleanup, trace)
lab_tasks.add_task(trace_stop, name="trace-stop")
lab_tasks.add_task(exec_, name="exec")
lab_tasks.add_task(export_lab, name="export")
traffic_tasks = Collection("traffic", probe, incast, alltoall, allreduce, perftest, tcp_incast)
ns = Collection(lab_tasks, traffic_tasks, test, bench, check)
ns.add_collection(Collection("image", build=build_images))
ns.add_collection(Collection("config", lint))
ns.add_collection(Collection("topo", generate))
ns.add_collection(Collection("sim", compare))


for _collection in (show_tasks, clear_tasks, action_tasks, exercise_tasks):
    ns.add_collection(_collection)
