"""The embedded runtime: one network namespace per node, one veth pair per link.

No container engine needed: this is what ``lab.up`` uses by default. Switch nodes get a
``fabric.agent`` process inside their namespace; host nodes are real Linux stacks that run the
topology's ``exec`` commands. ``up`` is all-or-nothing: the state is recorded before anything
is created, and any failure tears down what exists and names the step that failed.
"""
from __future__ import annotations

import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pyroute2 import NetNS, netns

from ...fabric.client import AgentClient, AgentError
from ...fabric.tables import UNEMULATED_LABEL
from ..errors import LabError, step
from ..interrupt import deferred
from ..project import PROJECT_ROOT
from . import netns_bgp
from ..state import (AgentState, LabState, keep_logs, kept_logs, log_tail, pid_alive,
                     process_start)
from ..topology import Node, Topology

# More folders the agents may write traces in (os.pathsep between them), besides the
# repository's results/ and the lab's state folder; see traces_allowed_in.
TRACE_ROOTS_ENV = "ROCELAB_TRACE_ROOTS"
AGENT_START_TIMEOUT_S = 15.0
LINKS_UP_TIMEOUT_S = 5.0
STOP_TIMEOUT_S = 3.0
# Hosts compute their own checksums and segment their own TCP: the switch is a userspace
# program reading raw frames, so offloaded (partial) checksums and 64 KB GSO frames would
# reach it unfinished.
HOST_OFFLOADS_OFF = ["tx", "off", "tso", "off", "gso", "off", "gro", "off"]


def namespace_name(lab: str, node: str) -> str:
    return f"{lab}-{node}"


def require_capabilities() -> None:
    """Say plainly what is missing, before anything is created."""
    if os.geteuid() != 0:
        raise LabError("the netns runtime needs root (it creates network namespaces and "
                       "veth pairs); run as root. Without root: config.lint, unit tests and "
                       "topology validation still work")
    for tool, package in (("ip", "iproute2"), ("ethtool", "ethtool")):
        if shutil.which(tool) is None:
            raise LabError(f"'{tool}' not found: install the {package} package "
                           "(scripts/install.sh does)")


@contextmanager
def open_namespace(ns: str) -> Iterator[NetNS]:
    """A netlink socket in an existing namespace. pyroute2's NetNS creates a namespace that
    does not exist: a vanished node would be silently replaced by an empty one. Only deploy
    creates namespaces (netns.create); everything else opens them with flags=0."""
    try:
        ipr = NetNS(ns, flags=0)
    except FileNotFoundError:
        raise LabError(f"namespace {ns} is missing") from None
    with ipr:
        yield ipr


def in_namespace(namespace: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", namespace, *argv]


def run(argv: list[str], what: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise LabError(f"{what}: exit {proc.returncode}"
                       + (f": {detail[-1]}" if detail else ""))
    return proc


class NetnsRuntime:
    name = "netns"
    runs_frr = True  # a BGP switch's FRR runs in its namespace (netns_bgp)

    def up(self, topo: Topology) -> LabState:
        require_capabilities()
        bgp = netns_bgp.bgp_switches(topo)
        if bgp:
            try:
                netns_bgp.require_frr()
            except netns_bgp.FrrError as e:
                raise LabError(str(e)) from None
        state = LabState.new(topo.name, str(topo.path), self.name)
        clashes = [ns for ns in (namespace_name(topo.name, n) for n in topo.nodes)
                   if ns in netns.listnetns()]
        if clashes:
            raise LabError(f"namespaces already exist: {', '.join(clashes)} "
                           f"(a leftover? try: invoke lab.cleanup)")
        state.save()
        try:
            with step("create namespaces"):
                self._create_namespaces(topo, state)
            with step("wire links"):
                self._wire(topo, state)
            for node in bgp:
                with step(f"kernel addresses of {node.name}"):
                    netns_bgp.kernel_l3(state.namespaces[node.name], node.config,
                                        node.ports)
            for host in topo.hosts:
                with step(f"exec on {host.name}"):
                    self._exec_commands(host, state)
            with step("start switch agents"):
                self._start_agents(topo, state)
            with step("await links up"):
                self._await_links_up(topo, state)
            for node in bgp:
                with step(f"start FRR on {node.name}"):
                    netns_bgp.start(topo.name, node, state.namespaces[node.name], state)
            if bgp:
                with step("await BGP sessions"):
                    state.convergence["sessions"] = round(
                        netns_bgp.await_established(topo.name, bgp), 3)
        except LabError as e:
            with deferred():
                self.down(state)
            where = f" (agent logs kept in {kept_logs(state.lab)})" if state.agents else ""
            raise LabError(f"{e}{where}") from None
        except BaseException:
            with deferred():
                self.down(state)
            raise
        state.status = "up"
        state.save()
        return state

    def _create_namespaces(self, topo: Topology, state: LabState) -> None:
        for node in topo.nodes.values():
            ns = namespace_name(topo.name, node.name)
            state.namespaces[node.name] = ns
            state.save()  # recorded before it exists: a crash here is still cleanable
            netns.create(ns)
            with open_namespace(ns) as ipr:
                ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
            if node.is_switch:
                # The switch's kernel must stay silent on its ports: the agent speaks for it.
                self._sysctl(ns, "net/ipv6/conf/all/disable_ipv6", "1")
                self._sysctl(ns, "net/ipv6/conf/default/disable_ipv6", "1")

    @staticmethod
    def _sysctl(ns: str, key: str, value: str) -> None:
        run(in_namespace(ns, ["sysctl", "-q", "-w", f"{key.replace('/', '.')}={value}"]),
            f"sysctl {key} in {ns}")

    def _wire(self, topo: Topology, state: LabState) -> None:
        for link in topo.links:
            a_ns, b_ns = state.namespaces[link.a.node], state.namespaces[link.b.node]
            with open_namespace(a_ns) as ipr:
                ipr.link("add", ifname=link.a.iface, kind="veth", mtu=link.mtu,
                         peer={"ifname": link.b.iface, "net_ns_fd": b_ns, "mtu": link.mtu})
        for node in topo.nodes.values():
            ns = state.namespaces[node.name]
            with open_namespace(ns) as ipr:
                for iface in topo.interfaces(node.name):
                    ipr.link("set", index=ipr.link_lookup(ifname=iface)[0], state="up")
            if not node.is_switch:
                for iface in topo.interfaces(node.name):
                    run(in_namespace(ns, ["ethtool", "-K", iface, *HOST_OFFLOADS_OFF]),
                        f"ethtool -K {iface} in {ns}")

    @staticmethod
    def _await_links_up(topo: Topology, state: LabState) -> None:
        """The kernel reports carrier with a delay after both ends are up: a lab is up only
        when every wire is."""
        deadline = time.monotonic() + LINKS_UP_TIMEOUT_S
        waiting = {(state.namespaces[n], iface) for n in topo.nodes
                   for iface in topo.interfaces(n)}
        while waiting:
            for ns in {ns for ns, _ in waiting}:
                with open_namespace(ns) as ipr:
                    up = {link.get_attr("IFLA_IFNAME") for link in ipr.get_links()
                          if link.get_attr("IFLA_OPERSTATE") == "UP"}
                waiting -= {(ns, iface) for iface in up}
            if waiting and time.monotonic() > deadline:
                raise LabError("still down after "
                               f"{LINKS_UP_TIMEOUT_S:.0f} s: "
                               + ", ".join(f"{ns}:{i}" for ns, i in sorted(waiting)))
            if waiting:
                time.sleep(0.02)

    def _exec_commands(self, node: Node, state: LabState) -> None:
        for command in node.exec:
            argv = shlex.split(command)
            run(in_namespace(state.namespaces[node.name], argv), f"{node.name}: {command!r}")

    def _start_agents(self, topo: Topology, state: LabState) -> None:
        for node in topo.switches:
            ns = state.namespaces[node.name]
            control = state.dir / "control" / f"{node.name}.sock"
            log = state.dir / f"{node.name}.log"
            argv = in_namespace(ns, agent_argv(node, state, control))
            with open(log, "wb") as out:
                proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, cwd=PROJECT_ROOT,
                                        start_new_session=True)
            state.agents[node.name] = AgentState(node=node.name, namespace=ns, pid=proc.pid,
                                                 started=process_start(proc.pid),
                                                 control=str(control), log=str(log),
                                                 time_scale=node.time_scale)
            state.save()
        deadline = time.monotonic() + AGENT_START_TIMEOUT_S
        for agent in state.agents.values():
            await_agent(agent, deadline)

    def down(self, state: LabState, logs: Path | None = None) -> None:
        """Stop agents, keep their logs (in ``logs``, default under the state root), kill
        whatever runs in the lab's namespaces, delete them, forget the lab. Idempotent."""
        started = {a.pid: a.started for a in state.agents.values()}
        stop_processes(list(started), lambda pid: pid_alive(pid, started[pid]))
        keep_logs(state, logs)
        present = set(netns.listnetns())
        for ns in state.namespaces.values():
            if ns in present:
                remove_namespace(ns)
        netns_bgp.cleanup(state.lab)
        state.remove()

    def exec_argv(self, state: LabState, node: str, argv: list[str]) -> list[str]:
        """The command line that runs argv inside the node (for interactive use too)."""
        if node not in state.namespaces:
            raise LabError(f"lab {state.lab} has no node {node!r} "
                           f"(nodes: {', '.join(state.namespaces)})")
        return in_namespace(state.namespaces[node], argv)

    def exec(self, state: LabState, node: str, argv: list[str],
             timeout: float | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(self.exec_argv(state, node, argv), capture_output=True,
                              text=True, timeout=timeout)

    @staticmethod
    def runs_agent(node: Node) -> bool:
        """Every switch runs a rocelab agent in its namespace."""
        return node.is_switch


def agent_argv(node: Node, state: LabState, control: Path) -> list[str]:
    """The switch agent's command line. Its control socket goes in a folder the agent
    keeps root-only (0700); it may write traces only under ``trace_roots``."""
    roots = [arg for root in trace_roots(state) for arg in ("--trace-root", str(root))]
    unemulated = node.labels.get(UNEMULATED_LABEL, "refuse")
    return [sys.executable, "-m", "rocelab.fabric.agent", "--config", str(node.config_path),
            "--name", node.name, "--control", str(control), "--unemulated-tables", unemulated,
            "--ports", str(node.ports),
            "--time-scale", str(node.time_scale), "--ecn-marking", node.ecn_marking, *roots,
            *(["--pg-profile-lookup", str(node.pg_lookup_path)] if node.pg_lookup_path else [])]


def trace_roots(state: LabState) -> list[Path]:
    """Where a lab's agents may write traces: results/ in the directory ``lab.up`` ran in
    (the checks' and ``lab.trace``'s default) and in the repository, the lab's state folder,
    and each folder in $ROCELAB_TRACE_ROOTS as ``lab.up`` saw it."""
    extra = os.environ.get(TRACE_ROOTS_ENV, "").split(os.pathsep)
    roots = [Path.cwd().resolve() / "results", PROJECT_ROOT / "results", state.dir,
             *(Path(p).resolve() for p in extra if p)]
    return list(dict.fromkeys(roots))


@contextmanager
def traces_allowed_in(folder: Path | None) -> Iterator[None]:
    """Agents started inside the block may also write traces under ``folder`` (a check
    run's --results folder); None changes nothing."""
    if folder is None:
        yield
        return
    old = os.environ.get(TRACE_ROOTS_ENV)
    os.environ[TRACE_ROOTS_ENV] = os.pathsep.join(filter(None, (old, str(folder.resolve()))))
    try:
        yield
    finally:
        if old is None:
            del os.environ[TRACE_ROOTS_ENV]
        else:
            os.environ[TRACE_ROOTS_ENV] = old


def await_agent(agent: AgentState, deadline: float) -> None:
    """Ready means it answers on its control socket; dead means say why from its log."""
    client = AgentClient(agent.control, timeout=0.5)
    while True:
        if not agent_alive(agent):
            raise LabError(f"agent {agent.node} exited: {log_tail(agent.log)}")
        try:
            client.ping()
            return
        except AgentError:
            if time.monotonic() > deadline:
                raise LabError(f"agent {agent.node} did not answer within "
                               f"{AGENT_START_TIMEOUT_S:.0f} s: {log_tail(agent.log)}") from None
            time.sleep(0.02)


def agent_alive(agent: AgentState) -> bool:
    """Alive, not a zombie, and still our agent: the process with that pid *and* that start
    time (pids get reused; `ip netns exec` execs the agent in place, so the start time taken
    at launch is the agent's own)."""
    return pid_alive(agent.pid, agent.started)


def remove_namespace(ns: str) -> None:
    """Processes inside would keep it (and its veths) alive: stop them first."""
    try:
        inode = os.stat(f"/run/netns/{ns}").st_ino
    except OSError:
        inode = None

    def inside(pid: int) -> bool:
        try:
            return os.stat(f"/proc/{pid}/ns/net").st_ino == inode
        except OSError:
            return False

    stop_processes(namespace_pids(ns), inside)
    netns.remove(ns)


def namespace_pids(ns: str) -> list[int]:
    proc = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def stop_processes(pids: list[int], ours: Callable[[int], bool] = lambda pid: True) -> None:
    """SIGTERM them all, wait (on pidfds: no polling) for a short grace, SIGKILL the rest.

    Each pid is pinned with a pidfd first and checked with ``ours`` after: a pid reused by
    another process between the listing and the signal is left alone.
    """
    fds = {}
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        if not ours(pid):
            os.close(fd)
            continue
        fds[fd] = pid
        try:
            signal.pidfd_send_signal(fd, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + STOP_TIMEOUT_S
    try:
        pending = set(fds)
        while pending and (left := deadline - time.monotonic()) > 0:
            pending -= set(select.select(list(pending), [], [], left)[0])
        for fd in pending:
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if pending:
            select.select(list(pending), [], [], STOP_TIMEOUT_S)
    finally:
        for fd in fds:
            os.close(fd)
    for pid in fds.values():
        try:
            os.waitpid(pid, os.WNOHANG)  # reap it when it is our own child
        except ChildProcessError:
            pass
