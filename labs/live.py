"""Live labs (netns or containerlab): bring one up or down, find a running one, look at it,
run things in it, prove it forwards. ``LiveLab`` is the live ``labs.lab.Lab``.

Tasks, checks and tests all go through here, so a lab behaves the same whichever of them
drives it. A running lab is found by name from its recorded state, from any process.
``up``, ``down`` and ``cleanup`` hold the lab's lock exclusively (``labs.lock``); ``checked``
finds a running lab and refuses it when it is not what its files say (``labs.fingerprint``).
"""
from __future__ import annotations

import shutil
import subprocess
import time
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from pyroute2 import netns

from ..fabric.client import AgentClient, AgentError
from . import fingerprint
from . import calibrate, load, lock
from . import state as states
from . import topology
from .interrupt import deferred, interruptible
from .capture import Capture, open_sockets
from .endpoints import Running, Storm
from .errors import LabError
from .lab import NodeHandle
from .live_hosts import LiveHosts
from .records import Cleanup, LinkStatus, NodeStatus
from .runtimes import netns_bgp
from .runtimes.netns import agent_alive, open_namespace, remove_namespace
from .runtimes.registry import runtime_for
from .state import LabState
from .topology import Topology, TopologyError



def up(spec: str, runtime: str = "netns", parent: str | None = None,
       warn: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> "LiveLab":
    """Validate everything first (nothing is created on bad input), then deploy, holding
    the lab's lock; record what it was deployed from. SIGTERM and SIGHUP roll back as
    Ctrl-C does. ``parent``: the lab whose check brings this variant up. A lab this machine
    cannot hold live is refused, one it may not hold is warned about (``labs.load``)."""
    topo, calibration = calibrate.calibrate(topology.load(spec))
    if runtime == "netns" and parent is None:
        estimate = load.estimate(topo)
        if refusal := estimate.refusal(topo.name):
            raise LabError(refusal)
        if warning := estimate.warning(topo.name):
            warn(warning)
    if calibration is not None and calibration.capped:
        warn(calibration.line(topo.name))
    with lock.hold(topo.name, exclusive=True), interruptible():
        existing = states.load(topo.name)
        if existing is not None:
            raise LabError(f"lab {topo.name} is already {existing.status} "
                           f"(invoke lab.down {topo.name}, or lab.cleanup if it crashed)")
        files = fingerprint.of(topo)
        state = runtime_for(runtime).up(topo)
        try:
            state.fingerprint, state.parent = files, parent
            if calibration is not None:
                state.time_scale, state.calibration = (calibration.time_scale,
                                                       calibration.as_record())
            if "sessions" in state.convergence:  # a BGP lab is up once its routes carry
                started = time.monotonic()
                LiveLab(state, topo).await_reachable()
                state.convergence["reachable"] = round(
                    state.convergence["sessions"] + time.monotonic() - started, 3)
            state.save()
        except BaseException:
            with deferred():
                _down(state)
            raise
    return LiveLab(state, topo)


def lab_name(spec: str) -> str:
    """A lab's name from its name or its topology path, without validating the topology."""
    if topology.NAME_RE.match(spec) and not Path(spec).exists():
        return spec
    return topology.read_name(spec)


def down(spec: str, logs: Path | None = None) -> bool:
    """Remove every trace of the lab, its agent logs kept (in ``logs``, default under the
    state root); False when there was nothing to remove."""
    name = lab_name(spec)
    with lock.hold(name, exclusive=True), deferred():
        state = states.load(name)
        if state is None:
            return False
        _down(state, logs)
    return True


def _down(state: LabState, logs: Path | None = None) -> None:
    runtime_for(state.runtime).down(state, logs)  # it keeps the agents' logs


def running(spec: str) -> "LiveLab":
    """The running lab, as recorded: no lock, no staleness check (a check's pytest runs
    under the lock its ``invoke check`` holds; tasks use ``checked``)."""
    name = lab_name(spec)
    state = states.load(name)
    if state is None:
        raise LabError(f"lab {name} is not running (invoke lab.up {name})")
    return LiveLab(state, topology.load(state.topology))


def the_only_running() -> "LiveLab":
    return running(name_of(""))


def name_of(spec: str) -> str:
    """The lab ``spec`` names (a name or a topology path); empty: the only running lab."""
    if spec:
        return lab_name(spec)
    labs = states.all_labs()
    if len(labs) != 1:
        raise LabError(f"{len(labs)} labs are running"
                       + (f" ({', '.join(s.lab for s in labs)}): name one" if labs
                          else ""))
    return labs[0].lab


def checked(spec: str = "", reuse: bool = False,
            warn: Callable[[str], None] = print) -> "LiveLab":
    """The running lab ``spec`` names (the only running lab when empty), refused in one line
    when it was brought up from another topology path or its files changed since lab.up;
    with ``reuse`` it is used anyway, after a warning."""
    name = name_of(spec)
    state = states.load(name)
    if state is None:
        raise LabError(f"lab {name} is not running (invoke lab.up {spec or name})")
    try:
        topo: Topology | None = topology.load(state.topology)
        broken = None
    except TopologyError as e:  # edited into something invalid: stale, and says why
        topo, broken = None, e
    reason = fingerprint.stale_reason(state, expected_path(spec), topo)
    if reason and not reuse:
        raise LabError(f"{reason}: invoke lab.down {name} and lab.up again, or pass --reuse")
    if reason:
        warn(f"warning: {reason} (--reuse: checking it anyway)")
    if broken is not None:
        raise broken
    return LiveLab(state, topo)


def expected_path(spec: str) -> Path | None:
    """The clab file ``spec`` names (a path, or a lab under topologies/); None for a bare
    name of a lab that has no folder there (the running lab's own file is then the one)."""
    if not spec:
        return None
    try:
        return topology.resolve(spec).resolve()
    except TopologyError:
        return None


def cleanup(everything: bool = False) -> Cleanup:
    """Remove labs whose deploy crashed, whose agents died, or variant labs nobody holds
    (every lab with everything). Each lab on its own, under its lock: one that had to go but
    is busy or fails to go is reported, and the others are still removed."""
    done = Cleanup()
    for seen in states.all_labs():
        name = seen.lab
        try:
            with lock.hold(name, exclusive=True), deferred():
                state = states.load(name)  # again, under the lock: it may have changed
                if state is not None and (everything or broken(state)
                                          or state.parent is not None):
                    _down(state)
                    done.removed.append(name)
        except lock.LabBusy as e:  # in use: a failure only if it had to go
            if everything or broken(seen):
                done.failed[name] = _one_line(e)
        except Exception as e:  # noqa: BLE001 - any failure is this lab's, said in one line
            done.failed[name] = _one_line(e)
    if everything:
        for name in states.unreadable():  # no record of what it made: go by the name prefix
            try:
                with lock.hold(name, exclusive=True), deferred():
                    for ns in netns.listnetns():
                        if ns.startswith(f"{name}-"):
                            remove_namespace(ns)
                    shutil.rmtree(states.lab_dir(name), ignore_errors=True)
                done.removed.append(name)
            except Exception as e:  # noqa: BLE001
                done.failed[name] = _one_line(e)
    return done


def broken(state: LabState) -> bool:
    """A deploy whose deployer died, or a lab with a dead agent. (A check's variant lab is
    removed too when cleanup gets its lock: its check holds it while the variant is in use,
    so the check is gone.)"""
    crashed = state.status == "deploying" and not states.pid_alive(state.deployer_pid,
                                                                   state.deployer_started)
    dead = state.status == "up" and not all(agent_alive(a) for a in state.agents.values())
    return crashed or dead


def _one_line(e: Exception) -> str:
    text = " ".join(str(e).split())
    return text if isinstance(e, LabError) else f"{type(e).__name__}: {text}"


class LiveLab(LiveHosts):
    """A live lab (netns or containerlab), as ``labs.lab.Lab`` describes one; the simulated
    one is ``labs.runtimes.sim.SimLab``."""

    def __init__(self, state: LabState, topo: Topology) -> None:
        self.state = state
        self.topology = topo.with_time_scale(state.time_scale)  # as calibrated at lab.up
        self.runtime = runtime_for(state.runtime)

    @property
    def name(self) -> str:
        return self.state.lab

    def down(self, logs: Path | None = None) -> None:
        with lock.hold(self.name, exclusive=True), deferred():
            _down(self.state, logs)

    @property
    def runtime_name(self) -> str:
        return self.state.runtime

    @property
    def topology_path(self) -> str:
        return self.state.topology

    def node_time_scale(self, node: str) -> float:
        return self.topology.nodes[node].time_scale

    def variant(self, clab: str) -> "LiveLab":
        """An edited copy of this lab, up in the same runtime and recorded as its variant
        (its caller takes it down). A copy a killed run left goes first; a lab of that name
        that is not this one's variant is refused."""
        name = lab_name(clab)
        left = states.load(name)
        if left is not None and left.parent != self.name:
            raise LabError(f"variant name {name} is taken by a lab that is not a variant of "
                           f"{self.name}")
        down(name)
        return up(clab, self.runtime_name, parent=self.name)

    def sim_s(self, wall_s: float) -> float:
        """The span a live caller means by ``wall_s``: the same, here."""
        return wall_s

    def wall_s(self, lab_s: float) -> float:
        """A span of this lab's own clock as a live caller's wall seconds: the same, here."""
        return lab_s

    def wait(self, wall_s: float) -> None:
        """Let the fabric run ``wall_s`` with nothing added: a measurement window (a
        deadlock must still be there after it), not a wait for a condition."""
        time.sleep(wall_s)

    # --- traffic and frames (the simulator answers these in virtual time) -----------------

    def start_endpoints(self, specs: dict[str, dict], timeout_s: float,
                        on_progress: Callable[[int], object] | None = None) -> Running:
        """RoCE endpoint processes in the hosts (``labs.endpoints``), under way while the
        caller does something else; ``wait()`` gives their reports."""
        return Running(self, specs, timeout_s, on_progress)

    def wait_for(self, condition: Callable[[], bool], seconds: float,
                 step: float = 0.05) -> bool:
        """Until ``condition()`` holds, looking every ``step`` seconds, for at most
        ``seconds`` (wall time: the lab's own clock); whether it held."""
        deadline = time.monotonic() + seconds
        while not condition():
            if time.monotonic() >= deadline:
                return False
            time.sleep(step)  # the condition is read over the agent's socket: poll it
        return True

    def storm(self, host: str, priority: int, seconds: float) -> Storm:
        """A PFC storm from ``host`` (``traffic.storm`` in its namespace), under way."""
        return Storm(self, host, priority, seconds)

    def capture(self, *, where: Iterable[tuple[str, str]] | None = None,
                pcap_dir: Path | None = None, match: Callable[[bytes], bool] | None = None,
                bpf: list[tuple[int, int, int, int]] | None = None) -> Capture:
        """``labs.capture.Capture`` on this lab's wires (AF_PACKET in the namespaces)."""
        return Capture(self, where=where, pcap_dir=pcap_dir, match=match, bpf=bpf)

    def send_frames(self, host: str, iface: str, frames: Iterable[bytes]) -> None:
        """Raw frames out of ``host``'s interface, as its NIC would send them."""
        (sock,) = open_sockets(self.namespace(host), [iface])
        with sock:
            for frame in frames:
                sock.send(frame)

    def node(self, name: str) -> NodeHandle:
        return NodeHandle(self, name)

    def exec(self, node: str, argv: list[str],
             timeout: float | None = None) -> subprocess.CompletedProcess:
        return self.runtime.exec(self.state, node, argv, timeout)

    def popen(self, node: str, argv: list[str], **kwargs) -> subprocess.Popen:
        """``argv`` started inside ``node`` and left running: ``subprocess.Popen``'s keywords."""
        return subprocess.Popen(self.runtime.exec_argv(self.state, node, argv), **kwargs)

    def namespace(self, node: str) -> str:
        """The network namespace (netns) or container (containerlab) the node lives in."""
        if node not in self.state.namespaces:
            raise LabError(f"lab {self.name} has no node {node!r} "
                           f"(nodes: {', '.join(self.state.namespaces)})")
        return self.state.namespaces[node]

    def agent(self, node: str) -> AgentClient:
        if node not in self.state.agents:
            raise LabError(f"{node} is not a switch of lab {self.name} "
                           f"(switches: {', '.join(self.state.agents)})")
        return AgentClient(self.state.agents[node].control)

    def status(self) -> tuple[list[NodeStatus], list[LinkStatus]]:
        present = set(netns.listnetns())
        nodes = []
        for node in self.topology.nodes.values():
            ns = self.state.namespaces.get(node.name, "")
            st = NodeStatus(node.name, node.kind, ns, ns in present)
            agent = self.state.agents.get(node.name)
            if self.runtime.runs_agent(node):
                st.agent_alive = agent is not None and agent_alive(agent)
                st.agent_pid = agent.pid if agent else None
                if st.agent_alive:
                    try:
                        st.counters = self.agent(node.name).counters()
                    except AgentError as e:
                        st.agent_alive, st.agent_error = False, str(e)
                else:
                    st.agent_error = states.log_tail(agent.log) if agent else "never started"
            nodes.append(st)
        oper = {n.name: self._oper_up(n.name, present) for n in self.topology.nodes.values()}
        links = [LinkStatus(str(link.a), str(link.b), link.mtu,
                            oper[link.a.node].get(link.a.iface, False)
                            and oper[link.b.node].get(link.b.iface, False))
                 for link in self.topology.links]
        return nodes, links

    def _oper_up(self, node: str, present: set[str]) -> dict[str, bool]:
        ns = self.state.namespaces.get(node)
        if ns not in present:
            return {}
        try:
            with open_namespace(ns) as ipr:
                return {link.get_attr("IFLA_IFNAME"): link.get_attr("IFLA_OPERSTATE") == "UP"
                        for link in ipr.get_links()}
        except LabError:  # removed since the listing: its links are down
            return {}

    def bgp_status(self) -> dict[str, dict]:
        """Per BGP switch: its sessions (bgpd's view) and its forwarding table's routes by
        source (the agent's view), where the runtime runs FRR."""
        out: dict[str, dict] = {}
        if not self.runtime.runs_frr:
            return out
        for node in netns_bgp.bgp_switches(self.topology):
            entry: dict = {"sessions": {}, "routes": {}, "error": ""}
            try:
                entry["sessions"] = netns_bgp.sessions(self.name, node.name)
            except (netns_bgp.FrrError, OSError, subprocess.SubprocessError) as e:
                entry["error"] = str(e)
            try:
                for route in self.agent(node.name).counters().get("routes", []):
                    entry["routes"][route["source"]] = entry["routes"].get(route["source"], 0) + 1
            except AgentError as e:
                entry["error"] = entry["error"] or str(e)
            out[node.name] = entry
        return out
