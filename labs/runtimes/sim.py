"""The virtual-time runtime: a lab run in this process, in simulated time, at real line rate
(S = 1 by default), deterministic for a given seed.

``SimLab`` answers everything checks and traffic ask of a lab (``labs.lab.Lab`` is the live
one): switch counters and traces through ``agent(node)``, pings and traceroutes, captures,
probe frames, RoCE flows. Time given in wall seconds by a caller written for the live lab
(timeouts, quiet periods, trace intervals) is the same span of *fabric* time as on the live
lab: ``wall / S_live`` of fabric time, run here as ``x S_sim`` of simulated time.

Nothing lives beyond the process: ``up`` builds the network (validation first, so a lab the
simulator cannot model is refused in one line), ``down`` closes open traces.
"""
from __future__ import annotations

import ipaddress
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from labs.lab import LinkStatus, NodeStatus, Ping
from labs.nic import NicSettings
from labs.runtimes.netns import LabError
from labs.sim.engine import PS, to_ps
from labs.sim.host import HOST_TTL, SimError, SimHost
from labs.sim.network import SimNetwork, derived_seed
from labs.sim.switch import SimSwitch
from labs import topology
from labs.topology import DEFAULT_TIME_SCALE, Topology
from traffic.capture import Direction, PcapFiles, Sighting
from traffic.nic import Nic

PING_WAIT_S = 2.0  # wall seconds a live ping waits (-W 2): the same fabric time here
START_JITTER_FABRIC_S = 1e-6  # flows start within this much fabric time of each other
DONE_POLL_FABRIC_S = 20e-6  # how often a run looks whether every flow is complete


class SimAgent:
    """The calls ``fabric.client.AgentClient`` makes of a live agent, on a simulated switch."""

    def __init__(self, lab: SimLab, switch: SimSwitch) -> None:
        self.lab = lab
        self.switch = switch

    def ping(self) -> dict:
        return {"ok": True, "pid": None, "uptime": self.lab.engine.now}

    def counters(self) -> dict:
        return self.switch.counters()

    def set_port(self, port: str, up: bool) -> None:
        self.lab.set_port(self.switch.name, port, up)

    def clear_fidelity(self) -> None:
        self.switch.switch.clear_fidelity()

    def pfc_watchdog(self, profile: str) -> None:
        self.switch.set_watchdog_profile(profile)

    def trace_start(self, path: str | Path, interval_ms: float = 1.0,
                    ports: list[str] | None = None) -> dict:
        ports = ports or sorted(self.switch.wires)
        return self.switch.trace_start(Path(path), self.lab.sim_s(interval_ms / 1e3), ports)

    def trace_stop(self) -> int:
        return self.switch.trace_stop()


class SimLab:
    runtime_name = "sim"

    def __init__(self, topo: Topology, time_scale: float = 1.0, seed: int = 0) -> None:
        self.topology = topo
        self.topology_path = str(topo.path)
        self.seed = seed
        self.net = SimNetwork(topo, time_scale, seed)
        self.engine = self.net.engine
        self.time_scale = time_scale
        # the S a live run of this lab uses: wall times given by its callers map through it
        self.live_scale = max((n.time_scale for n in topo.switches), default=DEFAULT_TIME_SCALE)
        self._ident = 0
        self._rng = random.Random(derived_seed(seed, "flows"))

    @property
    def name(self) -> str:
        return self.topology.name

    def sim_s(self, wall_s: float) -> float:
        """Simulated seconds for a span a live caller gives in wall seconds."""
        return wall_s / self.live_scale * self.time_scale

    def node_time_scale(self, node: str) -> float:
        return self.time_scale

    def variant(self, clab: str) -> SimLab:
        """An edited copy of this lab, simulated with the same S and seed."""
        return up(topology.load(clab), self.time_scale, self.seed)

    def run_for(self, seconds: float) -> None:
        self.engine.run(self.engine.now_ps + to_ps(seconds))

    def down(self, logs: Path | None = None) -> None:
        """Close open traces; nothing else outlives the process (no agent logs either)."""
        for switch in self.net.switches.values():
            switch.trace_stop()

    # --- switches -------------------------------------------------------------------------

    def agent(self, node: str) -> SimAgent:
        switch = self.net.switches.get(node)
        if switch is None:
            raise LabError(f"{node} is not a switch of lab {self.name} "
                           f"(switches: {', '.join(self.net.switches)})")
        return SimAgent(self, switch)

    def set_port(self, node: str, port: str, up: bool) -> None:
        """A switch port and its cable down or up: the switch stops using it and the
        wires both ways carry nothing, as when the link partner goes dark."""
        switch = self.net.switches[node]
        switch.set_port_up(port, up)
        iface = switch.ifaces[port]
        peer = self.topology.peer(node, iface)
        for end in ((node, iface), (peer.node, peer.iface) if peer else None):
            if end is not None and end in self.net.wires:
                self.net.wires[end].up = up

    def status(self) -> tuple[list[NodeStatus], list[LinkStatus]]:
        nodes = []
        for node in self.topology.nodes.values():
            st = NodeStatus(node.name, node.kind, "", True)
            if node.name in self.net.switches:
                st.agent_alive = True
                st.counters = self.net.switches[node.name].counters()
            nodes.append(st)
        links = [LinkStatus(str(k.a), str(k.b), k.mtu,
                            self.net.wires[k.a.node, k.a.iface].up
                            and self.net.wires[k.b.node, k.b.iface].up)
                 for k in self.topology.links]
        return nodes, links

    # --- hosts ----------------------------------------------------------------------------

    def _host(self, name: str) -> SimHost:
        host = self.net.hosts.get(name)
        if host is None:
            raise LabError(f"lab {self.name} has no host {name!r}")
        return host

    def exec(self, node: str, argv: list[str], timeout: float | None = None):
        raise LabError(f"the sim runtime runs no commands in nodes ({node}: {' '.join(argv)}); "
                       "use the live runtime (--runtime netns) for that")

    def host_addresses(self) -> dict[str, str]:
        return {name: str(h.address.ip) for name, h in self.net.hosts.items() if h.address}

    def host_interfaces(self) -> dict[str, list[ipaddress.IPv4Interface]]:
        return {name: list(h.config.addresses.values()) for name, h in self.net.hosts.items()}

    def default_gateway(self, host: str) -> str | None:
        gateway = self._host(host).config.gateway
        return None if gateway is None else str(gateway)

    def mac(self, host: str, iface: str) -> str:
        return ":".join(f"{b:02x}" for b in self._host(host).macs[iface])

    def host_iface(self, host: str, ip: str) -> str:
        for iface, address in self._host(host).config.addresses.items():
            if str(address.ip) == ip:
                return iface
        raise LabError(f"{host} has no address {ip}")

    def route(self, host: str, dst_ip: str) -> tuple[str, str | None]:
        """(interface, gateway or None when on-link) ``host`` uses toward ``dst_ip``."""
        hop = self._host(host).route(int(ipaddress.IPv4Address(dst_ip)))
        if hop is None:
            raise LabError(f"{host} has no route to {dst_ip}")
        nh = str(ipaddress.IPv4Address(hop[1]))
        return hop[0], None if nh == dst_ip else nh

    def neighbour(self, host: str, iface: str, ip: str) -> str | None:
        """``host``'s MAC for ``ip``, resolving it (an echo) when it has none yet."""
        sim = self._host(host)
        key = int(ipaddress.IPv4Address(ip))
        if key not in sim.neighbours:
            self._echo(sim, ip, HOST_TTL)
        mac = sim.neighbours.get(key)
        return None if mac is None else ":".join(f"{b:02x}" for b in mac)

    def _echo(self, host: SimHost, ip: str, ttl: int):
        self._ident = (self._ident + 1) & 0xFFFF
        key = (self._ident, 1)
        if not host.ping(ip, *key, ttl=ttl):
            return None
        deadline = self.engine.now_ps + to_ps(self.sim_s(PING_WAIT_S))
        self.engine.run(deadline, stop=lambda: key in host.replies)
        return host.replies.pop(key, None)

    def ping(self, src: str, dst: str, dst_ip: str, count: int = 2) -> Ping:
        host = self._host(src)
        replies = [self._echo(host, dst_ip, HOST_TTL) for _ in range(count)]
        got = [r for r in replies if r is not None and r.kind == "reply"]
        return Ping(src, dst, dst_ip, len(got) == count,
                    HOST_TTL - got[-1].ttl if got else None)

    def ping_all(self) -> list[Ping]:
        addrs = self.host_addresses()
        return [self.ping(s, d, addrs[d]) for s in addrs for d in addrs if s != d]

    def trace(self, src: str, dst_ip: str, max_hops: int = 8) -> list[str]:
        host, hops = self._host(src), []
        for ttl in range(1, max_hops + 1):
            reply = self._echo(host, dst_ip, ttl)
            if reply is None:
                hops.append("*")
            elif reply.kind == "time-exceeded":
                hops.append(reply.from_ip)
            else:
                hops.append(dst_ip)
                return hops
        return hops

    # --- frames ---------------------------------------------------------------------------

    def send_frames(self, host: str, iface: str, frames: Iterable[bytes]) -> None:
        """Frames put on ``host``'s wire as its NIC would send them (raw)."""
        wire = self.net.wires.get((host, iface))
        if wire is None:
            raise LabError(f"lab {self.name}: {host} has no wired interface {iface}")
        for frame in frames:
            wire.send(frame)

    def capture(self, *, where: Iterable[tuple[str, str]] | None = None,
                pcap_dir: Path | None = None, match: Callable[[bytes], bool] | None = None,
                bpf: Any = None) -> SimCapture:
        """What ``traffic.capture.Capture`` records live (``bpf`` is the live kernel
        prefilter; ``match`` decides here)."""
        return SimCapture(self, where, pcap_dir, match)

    # --- RoCE flows -----------------------------------------------------------------------

    def run_endpoints(self, specs: dict[str, dict], timeout_s: float,
                      on_progress: Callable[[int], Any] | None = None
                      ) -> tuple[dict[str, dict], float]:
        """Every host's NIC core driven by the engine, from the same specs the live
        endpoints read (``traffic.patterns.specs``); (each host's done report, elapsed)."""
        nics: dict[str, Nic] = {}
        for name, spec in specs.items():
            host = self._host(name)
            settings = NicSettings.model_validate(spec["nic"])
            nic = Nic(settings, spec["speed_mbps"] * 1e6 / self.time_scale, self.time_scale,
                      rate_sample_s=self.sim_s(0.005))
            src = host.address
            iface = spec["iface"]
            for flow in spec["send"]:
                mac = self._next_hop_mac(name, flow["peer_ip"])
                common = dict(src_mac=self.mac(name, iface), dst_mac=mac, src_ip=str(src.ip),
                              dst_ip=flow["peer_ip"], sport=flow["sport"])
                nic.add_sender(flow, nic.headers("data", **common))
            for flow in spec["receive"]:
                mac = self._next_hop_mac(name, flow["peer_ip"])
                common = dict(src_mac=self.mac(name, iface), dst_mac=mac, src_ip=str(src.ip),
                              dst_ip=flow["peer_ip"], sport=flow["sport"])
                nic.add_receiver(flow, nic.headers("ack", **common), nic.headers("cnp", **common))
            nics[name] = nic
        engine = self.engine
        t0 = engine.now
        jitter = to_ps(START_JITTER_FABRIC_S * self.time_scale)
        for name, nic in nics.items():
            host = self.net.hosts[name]
            host.nic, host.nic_iface = nic, specs[name]["iface"]
            engine.at(engine.now_ps + self._rng.randrange(jitter + 1), self._start, host)
        state = {"done": False}
        poll_ps = to_ps(DONE_POLL_FABRIC_S * self.time_scale)

        def look() -> None:
            state["done"] = all(n.complete for n in nics.values())
            if on_progress is not None:
                on_progress(sum(n.progress()["sent_bytes"] for n in nics.values()))
            if not state["done"]:
                engine.after(poll_ps, look)

        engine.after(poll_ps, look)
        limit = engine.now_ps + to_ps(self.sim_s(timeout_s))
        try:
            engine.run(limit, stop=lambda: state["done"])
        finally:
            now = engine.now
            done = {name: {"event": "done", **nic.results(t0, now, timed_out=not nic.complete),
                           "kernel_rx_drops": 0, "tx_errors": 0}
                    for name, nic in nics.items()}
            for name in nics:
                self.net.hosts[name].nic = None
        return done, engine.now - t0

    @staticmethod
    def _start(host: SimHost) -> None:
        host.nic.start(host.engine.now)
        host.kick()

    def _next_hop_mac(self, host: str, ip: str) -> str:
        iface, gateway = self.route(host, ip)
        mac = self.neighbour(host, iface, gateway or ip)
        if mac is None:
            raise LabError(f"{host} cannot resolve the next hop toward {ip} (no ARP reply)")
        return mac


class SimCapture:
    """Frames on chosen wires, both directions as each node sees them, stamped with
    simulated time; pcapng to the nanosecond."""

    def __init__(self, lab: SimLab, where: Iterable[tuple[str, str]] | None,
                 pcap_dir: Path | None, match: Callable[[bytes], bool] | None) -> None:
        topo = lab.topology
        self.lab = lab
        self.where = list(where) if where is not None else [
            (node, iface) for node in topo.nodes for iface in topo.interfaces(node)]
        self.pcap = PcapFiles(pcap_dir) if pcap_dir is not None else None
        self.match = match
        self._records: list[tuple[int, str, str, Direction, bytes]] = []
        self._taps: list[tuple[list, Callable]] = []

    def __enter__(self) -> SimCapture:
        net = self.lab.net
        for node, iface in self.where:
            out = net.wires.get((node, iface))
            peer = self.lab.topology.peer(node, iface)
            if out is None or peer is None:
                raise LabError(f"lab {self.lab.name} has no wired interface {node}:{iface}")
            back = net.wires[peer.node, peer.iface]
            for taps, direction in ((out.tx_taps, "out"), (back.rx_taps, "in")):
                tap = self._tap(node, iface)
                taps.append(tap)
                self._taps.append((taps, tap))
        return self

    def _tap(self, node: str, iface: str):
        def tap(direction: Direction, when_ps: int, frame: bytes) -> None:
            if self.match is None or self.match(frame):
                self._records.append((when_ps, node, iface, direction, frame))
                if self.pcap is not None:
                    self.pcap.write(node, iface, direction, when_ps // 1000, frame)
        return tap

    def __exit__(self, *exc: object) -> None:
        for taps, tap in self._taps:
            taps.remove(tap)
        self._taps.clear()
        if self.pcap is not None:
            self.pcap.close()

    def wait_quiet(self, quiet: float = 0.2, timeout: float = 3.0) -> bool:
        """Let the fabric run until no recorded frame for ``quiet`` (a live wall span)."""
        lab, engine = self.lab, self.lab.engine
        quiet_ps, deadline = to_ps(lab.sim_s(quiet)), engine.now_ps + to_ps(lab.sim_s(timeout))
        while engine.now_ps < deadline:
            last = self._records[-1][0] if self._records else 0
            target = min(max(last, engine.now_ps) + quiet_ps, deadline)
            engine.run(target)
            if (self._records[-1][0] if self._records else 0) <= last:
                return True
        return False

    def frames(self, match: Callable[[bytes], bool] | None = None) -> list[Sighting]:
        return [Sighting.of(node, iface, direction, when_ps / PS, frame)
                for when_ps, node, iface, direction, frame in sorted(self._records,
                                                                     key=lambda r: r[0])
                if match is None or match(frame)]

    def kernel_drops(self) -> int:
        return 0


def up(topo: Topology, time_scale: float = 1.0, seed: int = 0) -> SimLab:
    """A lab in virtual time; a topology the simulator cannot model is one LabError line."""
    try:
        return SimLab(topo, time_scale, seed)
    except SimError as e:
        raise LabError(f"{topo.path}: {e}") from None
