"""``lab.*``: bring a lab up and down, look at it, run a command or a trace in it."""
from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

from invoke import Collection, Exit, task
from rich.markup import escape
from rich.table import Table

from ...labs import live

from ...labs.lab import Lab

from ...labs.calibrate import calibrated
from ...labs.topology import table_notes
from ...labs import show
from ...labs import state as states
from .common import REUSE_HELP, USER_ERRORS, console, fail, interrupted, using


@task(help={"name": "lab name (topologies/NAME) or path to a .clab.yml",
            "runtime": "netns (default, embedded) or containerlab (docs/containerlab.md)"})
def up(c, name, runtime="netns"):
    """Bring a lab up: namespaces, veth wires, switch agents, host addresses."""
    try:
        with console.status(f"bringing up {name}"):
            lab = live.up(name, runtime, warn=lambda line: console.print(line, style="yellow"))
    except USER_ERRORS as e:
        raise fail(e) from None
    except KeyboardInterrupt as e:
        raise interrupted(e, f"lab {name} rolled back") from None
    console.print(f"[green]lab {lab.name} is up[/]: {len(lab.topology.nodes)} nodes, "
                  f"{len(lab.topology.links)} links (state in {lab.state.dir})")
    if lab.state.calibration:
        console.print(calibrated(lab.name, lab.state.calibration), soft_wrap=True)
    if lab.state.convergence:
        c = lab.state.convergence
        console.print(f"BGP: every session Established in {c['sessions']:g} s, every host "
                      f"pair reachable in {c.get('reachable', 0):g} s")
    _print_table_notes(lab)


@task(help={"name": "lab name or topology path"})
def down(c, name):
    """Take a lab down and remove every trace of it (safe to repeat)."""
    try:
        removed = live.down(name)
    except USER_ERRORS as e:
        raise fail(e) from None
    kept = states.kept_logs(live.lab_name(name))
    console.print(f"lab {name} " + (f"removed (agent logs kept in {kept})" if removed
                                    and kept.is_dir() else "removed" if removed
                                    else "was not running"))


@task(help={"name": "lab name (default: the only running lab)", "reuse": REUSE_HELP})
def status(c, name="", reuse=False):
    """Nodes, agents, links and counters of a running lab."""
    try:
        with using(name, reuse) as lab:
            nodes, links = lab.status()
    except USER_ERRORS as e:
        raise fail(e) from None
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
    _print_bgp(lab)
    _print_table_notes(lab)
    drops = show.drop_totals(n.counters for n in nodes)
    if drops:
        console.print("drops by reason: " + ", ".join(f"{r} {v}" for r, v in sorted(drops.items())))
    if any(n.agent_alive is False or not n.namespace_present for n in nodes):
        raise Exit("rocelab: lab is degraded (see the table)", code=1)


def _print_bgp(lab: Lab) -> None:
    """Per BGP switch: its sessions as bgpd sees them and its routes by source."""
    bgp = lab.bgp_status()
    if not bgp:
        return
    sessions = Table(title="BGP sessions (bgpd) and routes (agent forwarding table)")
    for col in ("switch", "neighbour", "AS", "state", "prefixes", "routes"):
        sessions.add_column(col)
    for switch, entry in bgp.items():
        routes = ", ".join(f"{src} {n}" for src, n in sorted(entry["routes"].items()))
        if entry["error"]:
            sessions.add_row(switch, "", "", f"[red]{entry['error']}[/]", "", routes)
        for peer, s in entry["sessions"].items():
            state = s["state"] if s["state"] == "Established" else f"[red]{s['state']}[/]"
            sessions.add_row(switch, f"{peer} {s['description']}".strip(),
                             str(s["remote_as"]), state, str(s["prefixes_received"]), routes)
            switch = routes = ""
    console.print(sessions)


def _print_table_notes(lab: Lab) -> None:
    """Config tables not in force: skipped ones (data-plane meaning lost) warned in yellow,
    tables without data-plane meaning listed (fabric/tables.py); and the lossless PGs
    buffermgrd made at boot (fabric/buffermgrd.py), those it could not make in yellow."""
    for node, notes in table_notes(lab.topology).items():
        if notes["skipped"]:
            console.print(f"[yellow]warning: {node} runs without {', '.join(notes['skipped'])}"
                          " (data-plane meaning not emulated; label rocelab.unemulated-tables)[/]")
        if notes["not_emulated"]:
            console.print(f"{node}: not emulated (no data-plane meaning): "
                          + ", ".join(notes["not_emulated"]))
        for note in notes["derived_pgs"]:
            line = escape(f"{node}: buffermgrd at boot (not in the config): {note}")
            console.print(f"[yellow]warning: {line}[/]" if ": stays lossy: " in note else line)


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
        with using(name) as lab, console.status("pinging all host pairs"):
            results = lab.ping_all()
    except USER_ERRORS as e:
        raise fail(e) from None
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
        with using(lab) as handle:
            code = handle.node(node).popen(argv).wait()
    except USER_ERRORS as e:
        raise fail(e) from None
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
        with using(lab) as handle:
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
        raise fail(e) from None
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
        raise fail(f"the command after --: {e}") from None


@task(help={"node": "switch node name", "lab": "lab name (default: the only running lab)"})
def trace_stop(c, node, lab=""):
    """Stop switch NODE's trace (one started from Python, or a lab.trace cut short), or
    collect one that ended at its time or size limit: its path, size and why it ended."""
    try:
        handle = live.running(lab) if lab else live.the_only_running()
        end = handle.agent(node).trace_end()
    except USER_ERRORS as e:
        raise fail(e) from None
    console.print(f"{end['path']}: {end['samples']} samples, {end['bytes']} bytes, "
                  f"{end['seconds']:g} s, ended: {end['reason']}", soft_wrap=True)


def _default_trace_path(lab: str, node: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path.cwd() / "results" / f"trace-{lab}-{node}-{stamp}.jsonl"


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
    done = live.cleanup(everything=all)
    console.print("removed: " + (", ".join(done.removed) if done.removed else "nothing"))
    for name, why in done.failed.items():
        console.print(f"[red]not removed[/]: {name}: {why}", soft_wrap=True)
    if done.failed:
        raise Exit(f"rocelab: {len(done.failed)} lab(s) not removed: "
                   f"{', '.join(done.failed)}", code=1)


@task(help={"name": "lab name (topologies/NAME) or path to a .clab.yml",
            "format": "clabernetes (Kubernetes manifests: a Topology and its ConfigMaps)",
            "out": "output folder (default: build/clabernetes/<lab>/)",
            "connectivity": "vxlan (default) or slurpeeth (TCP tunnels, no VXLAN MTU limit)"})
def export_lab(c, name, format="clabernetes", out="", connectivity="vxlan"):
    """Write the lab as clabernetes manifests, for kubectl apply (docs/scale-out.md)."""
    from ...labs import export as exports
    try:
        done = exports.export(name, format, Path(out) if out else None, connectivity)
    except USER_ERRORS as e:
        raise fail(e) from None
    console.print(f"wrote {done.path}: Topology {done.topology} and {done.config_maps} "
                  f"ConfigMaps; apply with: kubectl apply -f {done.path}")
    if done.largest_mtu and done.connectivity == "vxlan":
        console.print(f"links carry MTU {done.largest_mtu}: clabernetes' VXLAN adds "
                      f"{exports.VXLAN_OVERHEAD} bytes, so the pod network needs MTU >= "
                      f"{done.largest_mtu + exports.VXLAN_OVERHEAD} (docs/scale-out.md)")


ns = Collection("lab", up, down, status, pingall, list_, cleanup, trace)
ns.add_task(trace_stop, name="trace-stop")
ns.add_task(exec_, name="exec")
ns.add_task(export_lab, name="export")
