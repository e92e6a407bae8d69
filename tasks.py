"""invoke tasks: the user's entry points. Thin: the work lives in labs/, fabric/, traffic/."""
from __future__ import annotations

import shlex
import subprocess
import sys

from invoke import Collection, Exit, task
from rich.console import Console
from rich.table import Table

from fabric.client import AgentError
from fabric.config import ConfigError
from labs import lab as labs
from labs import state as states
from labs.runtimes.netns import LabError
from labs.topology import TopologyError

console = Console(width=None if sys.stdout.isatty() else 110)
USER_ERRORS = (LabError, TopologyError, ConfigError, AgentError)


def _fail(e: Exception) -> Exit:
    return Exit(f"rocelab: {e}", code=1)


@task(help={"name": "lab name (topologies/NAME) or path to a .clab.yml",
            "runtime": "netns (default, embedded)"})
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
    for col in ("node", "kind", "namespace", "agent", "rx pkts", "tx pkts", "drops"):
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
        table.add_row(n.name, n.kind, ns, agent, *counts)
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
        namespace = handle.state.namespaces.get(node)
        if namespace is None:
            raise LabError(f"lab {handle.name} has no node {node!r}")
    except USER_ERRORS as e:
        raise _fail(e) from None
    code = subprocess.call(["ip", "netns", "exec", namespace, *argv])
    if code:
        raise Exit(code=code)


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


@task
def bench(c):
    """Benchmarks: lab.up/down against bare iproute2, agent forwarding against a bare relay."""
    raise Exit(code=subprocess.call([sys.executable, "-m", "bench"]))


lab_tasks = Collection("lab", up, down, status, pingall, list_, cleanup)
lab_tasks.add_task(exec_, name="exec")
ns = Collection(lab_tasks, test, bench)
