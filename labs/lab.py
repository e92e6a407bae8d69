"""The Lab API: bring a lab up or down, look at it, run things in it, prove it forwards.

Tasks, checks and tests all go through here, so a lab behaves the same whichever of them
drives it. A running lab is found by name from its recorded state, from any process.
``up``, ``down`` and ``cleanup`` hold the lab's lock exclusively (``labs.lock``); ``checked``
finds a running lab and refuses it when it is not what its files say (``labs.fingerprint``).
"""
from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from ipaddress import IPv4Interface, IPv6Interface, ip_interface
from pathlib import Path

from pyroute2 import netns

from ..fabric.client import AgentClient, AgentError
from . import fingerprint
from . import load, lock
from . import state as states
from . import topology
from .interrupt import deferred, interruptible
from .runtimes.containerlab import ContainerlabRuntime, runs_rocelab_switch
from .errors import LabError
from .runtimes.netns import NetnsRuntime, agent_alive, open_namespace, remove_namespace
from .state import LabState
from .topology import Node, Topology, TopologyError

RUNTIMES: dict[str, type[NetnsRuntime | ContainerlabRuntime]] = {
    "netns": NetnsRuntime, "containerlab": ContainerlabRuntime}
HOST_TTL = 64  # Linux's default initial TTL: hops = HOST_TTL - reply TTL
REACHABLE_TIMEOUT_S = 30.0  # a BGP lab's routes reach every agent within this
TTL_RE = re.compile(r"ttl=(\d+)")
TIME_EXCEEDED_RE = re.compile(
    r"From (\S+) icmp_seq=\d+ Time (?:to live exceeded|exceeded: Hop limit)")
ADDRESS_FAMILIES = (socket.AF_INET, socket.AF_INET6)  # a host's address: IPv4 first
RT_SCOPE_UNIVERSE = 0  # a global address (not link-local fe80::, not host ::1)


@dataclass
class NodeStatus:
    name: str
    kind: str
    namespace: str
    namespace_present: bool
    agent_pid: int | None = None
    agent_alive: bool | None = None  # None: not a switch
    agent_error: str = ""
    counters: dict = field(default_factory=dict)


@dataclass
class LinkStatus:
    a: str
    b: str
    mtu: int
    up: bool


@dataclass
class Ping:
    src: str
    dst: str
    dst_ip: str
    ok: bool
    hops: int | None  # routers that decremented TTL on the way back
    error: str = ""  # why it could not even be tried (a host missing or without address)


@dataclass
class Cleanup:
    removed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # lab -> why it could not be removed


def runtime_for(name: str) -> NetnsRuntime | ContainerlabRuntime:
    if name == "sim":
        raise LabError("the sim runtime lives in the process that uses it, so there is no "
                       "lab to bring up or down: run invoke check LAB --runtime sim, or "
                       "invoke traffic.incast|alltoall|allreduce LAB --runtime sim")
    if name not in RUNTIMES:
        raise LabError(f"unknown runtime {name!r} (available: {', '.join(RUNTIMES)}, "
                       "and sim for checks and traffic)")
    return RUNTIMES[name]()


def up(spec: str, runtime: str = "netns", parent: str | None = None,
       warn: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> "Lab":
    """Validate everything first (nothing is created on bad input), then deploy, holding
    the lab's lock; record what it was deployed from. SIGTERM and SIGHUP roll back as
    Ctrl-C does. ``parent``: the lab whose check brings this variant up. A lab this machine
    cannot hold live is refused, one it may not hold is warned about (``labs.load``)."""
    topo = topology.load(spec)
    if runtime == "netns" and parent is None:
        estimate = load.estimate(topo)
        if refusal := estimate.refusal(topo.name):
            raise LabError(refusal)
        if warning := estimate.warning(topo.name):
            warn(warning)
    with lock.hold(topo.name, exclusive=True), interruptible():
        existing = states.load(topo.name)
        if existing is not None:
            raise LabError(f"lab {topo.name} is already {existing.status} "
                           f"(invoke lab.down {topo.name}, or lab.cleanup if it crashed)")
        files = fingerprint.of(topo)
        state = runtime_for(runtime).up(topo)
        try:
            state.fingerprint, state.parent = files, parent
            if "sessions" in state.convergence:  # a BGP lab is up once its routes carry
                started = time.monotonic()
                Lab(state, topo).await_reachable()
                state.convergence["reachable"] = round(
                    state.convergence["sessions"] + time.monotonic() - started, 3)
            state.save()
        except BaseException:
            with deferred():
                _down(state)
            raise
    return Lab(state, topo)


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
    runtime = runtime_for(state.runtime)
    if isinstance(runtime, NetnsRuntime):
        runtime.down(state, logs)  # keeps the logs once the agents have stopped writing
    else:
        states.keep_logs(state, logs)
        runtime.down(state)


def running(spec: str) -> "Lab":
    """The running lab, as recorded: no lock, no staleness check (a check's pytest runs
    under the lock its ``invoke check`` holds; tasks use ``checked``)."""
    name = lab_name(spec)
    state = states.load(name)
    if state is None:
        raise LabError(f"lab {name} is not running (invoke lab.up {name})")
    return Lab(state, topology.load(state.topology))


def the_only_running() -> "Lab":
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
            warn: Callable[[str], None] = print) -> "Lab":
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
    return Lab(state, topo)


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


def table_notes(topology: Topology) -> dict[str, dict[str, list[str]]]:
    """Per switch, the config tables that are not in force here: ``not_emulated`` (no
    data-plane meaning) and ``skipped`` (their meaning is not emulated; the lab runs
    without them by its rocelab.unemulated-tables label). fabric/tables.py says why."""
    out = {}
    for node in topology.switches:
        config = node.config
        if config is not None and (config.not_emulated or config.skipped):
            out[node.name] = {"not_emulated": list(config.not_emulated),
                              "skipped": list(config.skipped)}
    return out


def simulated(spec: str, time_scale: float = 1.0, seed: int = 0, jitter_s: float = 0.0):
    """The lab in virtual time, in this process (``labs.runtimes.sim``): nothing to bring
    up or down outside it. ``jitter_s``: mean timing jitter per frame per hop, fabric
    seconds (``labs.sim.link``); 0 runs exact clocks."""
    from .runtimes import sim  # the simulator imports this module's result types
    return sim.up(topology.load(spec), time_scale, seed, jitter_s)


class Lab:
    """A live lab (netns or containerlab). ``labs.runtimes.sim.SimLab`` answers the same
    calls in virtual time: checks and traffic use only what both provide."""

    def __init__(self, state: LabState, topo: Topology) -> None:
        self.state = state
        self.topology = topo
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

    def variant(self, clab: str) -> "Lab":
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

    def start_endpoints(self, specs: dict[str, dict], timeout_s: float, on_progress=None):
        """RoCE endpoint processes in the hosts (``labs.endpoints``), under way while the
        caller does something else; ``wait()`` gives their reports."""
        from . import endpoints
        return endpoints.Running(self, specs, timeout_s, on_progress)

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

    def storm(self, host: str, priority: int, seconds: float):
        """A PFC storm from ``host`` (``traffic.storm`` in its namespace), under way."""
        from . import endpoints
        return endpoints.Storm(self, host, priority, seconds)

    def capture(self, **kw):
        """``labs.capture.Capture`` on this lab's wires (AF_PACKET in the namespaces)."""
        from .capture import Capture
        return Capture(self, **kw)

    def send_frames(self, host: str, iface: str, frames) -> None:
        """Raw frames out of ``host``'s interface, as its NIC would send them."""
        from .capture import open_sockets
        (sock,) = open_sockets(self.state.namespaces[host], [iface])
        with sock:
            for frame in frames:
                sock.send(frame)

    def host_interfaces(self) -> dict[str, list[IPv4Interface | IPv6Interface]]:
        """Each host's IPv4 and global IPv6 addresses with their prefixes, on its wired
        interfaces."""
        out: dict[str, list[IPv4Interface | IPv6Interface]] = {}
        for host in self.topology.hosts:
            wired = set(self.topology.interfaces(host.name))
            with open_namespace(self.state.namespaces[host.name]) as ipr:
                names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
                out[host.name] = [
                    ip_interface(f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}")
                    for family in ADDRESS_FAMILIES for a in ipr.get_addr(family=family)
                    if names.get(a["index"]) in wired and a["scope"] == RT_SCOPE_UNIVERSE]
        return out

    def default_gateway(self, host: str) -> str | None:
        """The host's default gateway, from its kernel: the IPv4 one, else the IPv6 one."""
        with open_namespace(self.state.namespaces[host]) as ipr:
            for family in ADDRESS_FAMILIES:
                for route in ipr.get_routes(family=family):
                    if route["dst_len"] == 0 and route.get_attr("RTA_GATEWAY"):
                        return route.get_attr("RTA_GATEWAY")
        return None

    def route(self, host: str, dst_ip: str) -> tuple[str, str | None]:
        """(interface, gateway or None when on-link) ``host``'s kernel uses toward ``dst_ip``."""
        route = self._ip_json(host, ["route", "get", dst_ip])[0]
        return route["dev"], route.get("gateway")

    def mac(self, host: str, iface: str) -> str:
        return self._ip_json(host, ["link", "show", "dev", iface])[0]["address"]

    def host_iface(self, host: str, ip: str) -> str:
        """The interface of ``host`` that holds address ``ip``."""
        return self._ip_json(host, ["addr", "show", "to", ip])[0]["ifname"]

    def neighbour(self, host: str, iface: str, ip: str) -> str | None:
        """The MAC ``host`` has for ``ip``; one ping to make its kernel resolve it first."""
        def lladdr() -> str | None:
            # no entry yet is an empty list, not an error (_ip_json would raise on it)
            proc = self.exec(host, ["ip", "-j", "neigh", "show", "to", ip, "dev", iface],
                             timeout=10)
            if proc.returncode != 0:
                raise LabError(f"{host}: ip neigh show to {ip} dev {iface}: "
                               f"{proc.stderr.strip()}")
            entries = json.loads(proc.stdout or "[]")
            return next((e["lladdr"] for e in entries if "lladdr" in e), None)
        mac = lladdr()
        if mac is None:
            self.exec(host, ["ping", "-n", "-c", "1", "-W", "1", ip], timeout=5)
            mac = lladdr()
        return mac

    def _ip_json(self, host: str, args: list[str]) -> list[dict]:
        proc = self.exec(host, ["ip", "-j", *args], timeout=10)
        data = json.loads(proc.stdout or "[]") if proc.returncode == 0 else []
        if not data:
            raise LabError(f"{host}: ip {' '.join(args)}: "
                           f"{proc.stderr.strip() or 'nothing found'}")
        return data

    def exec(self, node: str, argv: list[str],
             timeout: float | None = None) -> subprocess.CompletedProcess:
        return self.runtime.exec(self.state, node, argv, timeout)

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
            if self._runs_agent(node):
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

    def _runs_agent(self, node: Node) -> bool:
        """Every switch under netns; under containerlab only the project's switch image, since
        a SONiC-VS switch has no rocelab agent to be alive or dead."""
        if self.state.runtime == "containerlab":
            return runs_rocelab_switch(node)
        return node.is_switch

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

    def host_addresses(self) -> dict[str, str]:
        """Each host's first IPv4 address on a wired interface, else its first global IPv6
        one, read from its kernel (hosts without one are left out; a host whose namespace
        is gone is an error)."""
        out = {}
        for host in self.topology.hosts:
            if (addr := self.host_address(host.name)) is not None:
                out[host.name] = addr
        return out

    def host_address(self, host: str) -> str | None:
        wired = set(self.topology.interfaces(host))
        ns = self.state.namespaces.get(host, "")
        try:
            with open_namespace(ns) as ipr:
                names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
                for family in ADDRESS_FAMILIES:
                    for addr in ipr.get_addr(family=family):
                        if names.get(addr["index"]) in wired \
                                and addr["scope"] == RT_SCOPE_UNIVERSE:
                            return addr.get_attr("IFA_ADDRESS")
        except LabError as e:
            raise LabError(f"host {host}: {e} (invoke lab.status {self.name})") from None
        return None

    def ping(self, src: str, dst: str, dst_ip: str, count: int = 2) -> Ping:
        proc = self.exec(src, ["ping", "-n", "-c", str(count), "-i", "0.2", "-W", "2", dst_ip],
                         timeout=10 + count)
        ttls = [int(t) for t in TTL_RE.findall(proc.stdout)]
        return Ping(src, dst, dst_ip, proc.returncode == 0 and bool(ttls),
                    HOST_TTL - ttls[-1] if ttls else None)

    def ping_all(self) -> list[Ping]:
        """Every host of the topology to every other, both directions, in parallel; a pair
        with a host that is missing or has no address fails, saying so."""
        hosts = [h.name for h in self.topology.hosts]
        addrs: dict[str, str] = {}
        problems: dict[str, str] = {}
        for host in hosts:
            try:
                addr = self.host_address(host)
            except LabError as e:
                problems[host] = str(e)
                continue
            if addr is None:
                problems[host] = f"host {host} has no IP address on a wired interface"
            else:
                addrs[host] = addr

        def one(src: str, dst: str) -> Ping:
            problem = problems.get(src) or problems.get(dst)
            if problem:
                return Ping(src, dst, addrs.get(dst, ""), False, None, problem)
            return self.ping(src, dst, addrs[dst])

        pairs = [(s, d) for s in hosts for d in hosts if s != d]
        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(lambda p: one(*p), pairs))

    def await_reachable(self, timeout_s: float = REACHABLE_TIMEOUT_S) -> None:
        """Ping every host pair until all answer (a BGP lab: its sessions are up, its
        routes still on their way to the agents); the error names the pairs that never did."""
        deadline = time.monotonic() + timeout_s
        while True:
            failed = [p for p in self.ping_all() if not p.ok]
            if not failed:
                return
            if time.monotonic() > deadline:
                raise LabError(f"{len(failed)} host pairs still unreachable after "
                               f"{timeout_s:.0f} s: " + ", ".join(
                                   f"{p.src} -> {p.dst} ({p.dst_ip or p.error})"
                                   for p in failed[:8]) + " (lab.status shows each "
                               "switch's BGP sessions and routes)")

    def bgp_status(self) -> dict[str, dict]:
        """Per BGP switch: its sessions (bgpd's view) and its forwarding table's routes by
        source (the agent's view). Only the netns runtime runs FRR."""
        from .runtimes import netns_bgp
        out: dict[str, dict] = {}
        if self.state.runtime != "netns":
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

    def trace(self, src: str, dst_ip: str, max_hops: int = 8) -> list[str]:
        """The routers on the path, from ICMP time-exceeded replies to TTL-limited pings."""
        hops = []
        for ttl in range(1, max_hops + 1):
            proc = self.exec(src, ["ping", "-n", "-c", "1", "-W", "2", "-t", str(ttl), dst_ip],
                             timeout=10)
            match = TIME_EXCEEDED_RE.search(proc.stdout)
            if match:
                hops.append(match.group(1))
            elif proc.returncode == 0:
                hops.append(dst_ip)
                return hops
            else:
                hops.append("*")
        return hops

