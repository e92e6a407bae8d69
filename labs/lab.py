"""The Lab API: bring a lab up or down, look at it, run things in it, prove it forwards.

Tasks, checks and tests all go through here, so a lab behaves the same whichever of them
drives it. A running lab is found by name from its recorded state, from any process.
"""
from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from ipaddress import IPv4Interface
from pathlib import Path

import yaml
from pyroute2 import NetNS, netns

from fabric.client import AgentClient, AgentError
from labs import state as states
from labs import topology
from labs.runtimes.containerlab import ContainerlabRuntime, runs_rocelab_switch
from labs.runtimes.netns import LabError, NetnsRuntime, agent_alive, remove_namespace
from labs.state import LabState
from labs.topology import Node, Topology

RUNTIMES: dict[str, type[NetnsRuntime | ContainerlabRuntime]] = {
    "netns": NetnsRuntime, "containerlab": ContainerlabRuntime}
HOST_TTL = 64  # Linux's default initial TTL: hops = HOST_TTL - reply TTL
TTL_RE = re.compile(r"ttl=(\d+)")
TIME_EXCEEDED_RE = re.compile(r"From (\S+) icmp_seq=\d+ Time to live exceeded")


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


def runtime_for(name: str) -> NetnsRuntime | ContainerlabRuntime:
    if name not in RUNTIMES:
        raise LabError(f"unknown runtime {name!r} (available: {', '.join(RUNTIMES)})")
    return RUNTIMES[name]()


def up(spec: str, runtime: str = "netns") -> "Lab":
    """Validate everything first (nothing is created on bad input), then deploy."""
    topo = topology.load(spec)
    existing = states.load(topo.name)
    if existing is not None:
        raise LabError(f"lab {topo.name} is already {existing.status} "
                       f"(invoke lab.down {topo.name}, or lab.cleanup if it crashed)")
    state = runtime_for(runtime).up(topo)
    return Lab(state, topo)


def lab_name(spec: str) -> str:
    """A lab's name from its name or its topology path, without validating the topology."""
    if topology.NAME_RE.match(spec) and not Path(spec).exists():
        return spec
    path = topology.resolve(spec)
    name = (yaml.safe_load(path.read_text()) or {}).get("name")
    if not isinstance(name, str) or not topology.NAME_RE.match(name):
        raise LabError(f"{path}: name: not a valid lab name")
    return name


def down(spec: str) -> bool:
    """Remove every trace of the lab; False when there was nothing to remove."""
    state = states.load(lab_name(spec))
    if state is None:
        return False
    runtime_for(state.runtime).down(state)
    return True


def running(spec: str) -> "Lab":
    name = lab_name(spec)
    state = states.load(name)
    if state is None:
        raise LabError(f"lab {name} is not running (invoke lab.up {name})")
    return Lab(state, topology.load(state.topology))


def the_only_running() -> "Lab":
    labs = states.all_labs()
    if len(labs) != 1:
        raise LabError(f"{len(labs)} labs are running"
                       + (f" ({', '.join(s.lab for s in labs)}): name one" if labs
                          else ""))
    return running(labs[0].lab)


def cleanup(everything: bool = False) -> list[str]:
    """Remove labs whose deploy crashed or whose agents died (every lab with everything)."""
    removed = []
    for state in states.all_labs():
        crashed = state.status == "deploying" and not states.pid_alive(state.deployer_pid)
        dead = state.status == "up" and not all(agent_alive(a) for a in state.agents.values())
        if everything or crashed or dead:
            runtime_for(state.runtime).down(state)
            removed.append(state.lab)
    if everything:
        for name in states.unreadable():  # no record of what it made: go by the name prefix
            for ns in netns.listnetns():
                if ns.startswith(f"{name}-"):
                    remove_namespace(ns)
            shutil.rmtree(states.lab_dir(name), ignore_errors=True)
            removed.append(name)
    return removed


def simulated(spec: str, time_scale: float = 1.0, seed: int = 0):
    """The lab in virtual time, in this process (``labs.runtimes.sim``): nothing to bring
    up or down outside it."""
    from labs.runtimes import sim  # the simulator imports this module's result types
    return sim.up(topology.load(spec), time_scale, seed)


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

    @property
    def runtime_name(self) -> str:
        return self.state.runtime

    @property
    def topology_path(self) -> str:
        return self.state.topology

    def node_time_scale(self, node: str) -> float:
        return self.topology.nodes[node].time_scale

    def variant(self, clab: str) -> "Lab":
        """Another lab (an edited copy of this one) up in the same runtime; its caller takes
        it down. A copy left over by a killed run goes first."""
        down(clab)
        return up(clab, self.runtime_name)

    def sim_s(self, wall_s: float) -> float:
        """The span a live caller means by ``wall_s``: the same, here."""
        return wall_s

    # --- traffic and frames (the simulator answers these in virtual time) -----------------

    def run_endpoints(self, specs: dict[str, dict], timeout_s: float,
                      on_progress=None) -> tuple[dict[str, dict], float]:
        """RoCE endpoint processes in the hosts (``labs.endpoints``)."""
        from labs import endpoints
        return endpoints.run(self, specs, timeout_s, on_progress)

    def capture(self, **kw):
        """``traffic.capture.Capture`` on this lab's wires (AF_PACKET in the namespaces)."""
        from traffic.capture import Capture
        return Capture(self, **kw)

    def send_frames(self, host: str, iface: str, frames) -> None:
        """Raw frames out of ``host``'s interface, as its NIC would send them."""
        from traffic.capture import open_sockets
        (sock,) = open_sockets(self.state.namespaces[host], [iface])
        with sock:
            for frame in frames:
                sock.send(frame)

    def host_interfaces(self) -> dict[str, list[IPv4Interface]]:
        """Each host's IPv4 addresses with their prefixes, on its wired interfaces."""
        out: dict[str, list[IPv4Interface]] = {}
        for host in self.topology.hosts:
            wired = set(self.topology.interfaces(host.name))
            with NetNS(self.state.namespaces[host.name]) as ipr:
                names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
                out[host.name] = [
                    IPv4Interface(f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}")
                    for a in ipr.get_addr(family=socket.AF_INET)
                    if names.get(a["index"]) in wired]
        return out

    def default_gateway(self, host: str) -> str | None:
        """The host's IPv4 default gateway, from its kernel."""
        with NetNS(self.state.namespaces[host]) as ipr:
            for route in ipr.get_routes(family=socket.AF_INET):
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
        return self._ip_json(host, ["-4", "addr", "show", "to", ip])[0]["ifname"]

    def neighbour(self, host: str, iface: str, ip: str) -> str | None:
        """The MAC ``host`` has for ``ip``; one ping to make its kernel resolve it first."""
        def lladdr() -> str | None:
            entries = self._ip_json(host, ["neigh", "show", "to", ip, "dev", iface])
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

    def down(self) -> None:
        self.runtime.down(self.state)

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
                    st.agent_error = _last_line(agent.log) if agent else "never started"
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
        with NetNS(ns) as ipr:
            return {link.get_attr("IFLA_IFNAME"): link.get_attr("IFLA_OPERSTATE") == "UP"
                    for link in ipr.get_links()}

    def host_addresses(self) -> dict[str, str]:
        """Each host's first IPv4 address on a wired interface, read from its kernel."""
        out = {}
        for host in self.topology.hosts:
            wired = set(self.topology.interfaces(host.name))
            with NetNS(self.state.namespaces[host.name]) as ipr:
                names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
                for addr in ipr.get_addr(family=socket.AF_INET):
                    if names.get(addr["index"]) in wired:
                        out[host.name] = addr.get_attr("IFA_ADDRESS")
                        break
        return out

    def ping(self, src: str, dst: str, dst_ip: str, count: int = 2) -> Ping:
        proc = self.exec(src, ["ping", "-n", "-c", str(count), "-i", "0.2", "-W", "2", dst_ip],
                         timeout=10 + count)
        ttls = [int(t) for t in TTL_RE.findall(proc.stdout)]
        return Ping(src, dst, dst_ip, proc.returncode == 0 and bool(ttls),
                    HOST_TTL - ttls[-1] if ttls else None)

    def ping_all(self) -> list[Ping]:
        """Every host to every other host, both directions, in parallel."""
        addrs = self.host_addresses()
        pairs = [(s, d) for s in addrs for d in addrs if s != d]
        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(lambda p: self.ping(p[0], p[1], addrs[p[1]]), pairs))

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


def _last_line(path: str) -> str:
    try:
        lines = Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "exited without output"
