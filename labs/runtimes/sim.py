"""The virtual-time runtime: a lab run in this process, in simulated time, at real line rate
(S = 1 by default), deterministic for a given seed.

``SimLab`` answers everything checks and traffic ask of a lab (the ``labs.lab.Lab`` protocol;
``labs.live.LiveLab`` is the live one): switch counters and traces through ``agent(node)``, pings and traceroutes, captures,
probe frames, RoCE flows. Time given in wall seconds by a caller written for the live lab
(timeouts, quiet periods, trace intervals) is the same span of *fabric* time as on the live
lab: ``wall / S_live`` of fabric time, run here as ``x S_sim`` of simulated time.

Nothing lives beyond the process: ``up`` builds the network (validation first, so a lab the
simulator cannot model is refused in one line), ``down`` closes open traces.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..lab import NodeHandle
from ..records import LinkStatus, NodeStatus
from ..errors import LabError
from ..sim.engine import PS, to_ps
from ..sim.flows import SimRunning, SimStorm
from ..sim.hostconfig import SimError
from ..sim.hosts import SimHosts
from ..sim.link import End, Tap
from ..sim.network import SimNetwork, derived_seed
from ..sim.switch import SimSwitch
from .. import topology
from ..topology import DEFAULT_TIME_SCALE, Topology
from ..sighting import Direction, Sighting

if TYPE_CHECKING:
    from ..pcap import PcapFiles


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

    def clear_watermarks(self, kind: str) -> None:
        self.switch.switch.clear_watermarks(kind)

    def pfc_watchdog(self, profile: str) -> None:
        self.switch.set_watchdog_profile(profile)

    def trace_start(self, path: str | Path, interval_ms: float = 1.0,
                    ports: list[str] | None = None) -> dict:
        ports = ports or sorted(self.switch.wires)
        return self.switch.trace_start(Path(path), self.lab.sim_s(interval_ms / 1e3), ports)

    def trace_stop(self) -> int:
        return self.switch.trace_stop()


class SimLab(SimHosts):
    runtime_name = "sim"

    def __init__(self, topo: Topology, time_scale: float = 1.0, seed: int = 0,
                 jitter_s: float = 0.0) -> None:
        self.topology = topo
        self.topology_path = str(topo.path)
        self.seed = seed
        self.jitter_s = jitter_s
        self.net = SimNetwork(topo, time_scale, seed, jitter_s)
        self.engine = self.net.engine
        self.time_scale = time_scale
        # the S a live run of this lab uses: wall times given by its callers map through it
        self.live_scale = max((n.time_scale for n in topo.switches), default=DEFAULT_TIME_SCALE)
        self.rng = random.Random(derived_seed(seed, "flows"))  # start jitter

    @property
    def name(self) -> str:
        return self.topology.name

    def sim_s(self, wall_s: float) -> float:
        """Simulated seconds for a span a live caller gives in wall seconds."""
        return wall_s / self.live_scale * self.time_scale

    def wall_s(self, lab_s: float) -> float:
        """A span of simulated time as the live wall seconds it stands for (``sim_s``'s
        inverse): how a check gives a timeout that must cover simulated seconds."""
        return lab_s / self.time_scale * self.live_scale

    def node_time_scale(self, node: str) -> float:
        return self.time_scale

    def variant(self, clab: str) -> SimLab:
        """An edited copy of this lab, simulated with the same S, seed and jitter."""
        return up(topology.load(clab), self.time_scale, self.seed, self.jitter_s)

    def run_for(self, seconds: float) -> None:
        self.engine.run(self.engine.now_ps + to_ps(seconds))

    def wait(self, wall_s: float) -> None:
        """The same fabric span as a live ``wait``, in simulated time."""
        self.run_for(self.sim_s(wall_s))

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

    def node(self, name: str) -> NodeHandle:
        return NodeHandle(self, name)

    def exec(self, node: str, argv: list[str], timeout: float | None = None):
        raise LabError(f"the sim runtime runs no commands in nodes ({node}: {' '.join(argv)}); "
                       "use the live runtime (--runtime netns) for that")

    def popen(self, node: str, argv: list[str], **kwargs: Any):
        return self.exec(node, argv)

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
                bpf: list[tuple[int, int, int, int]] | None = None) -> SimCapture:
        """What ``labs.capture.Capture`` records live (``bpf`` is the live kernel
        prefilter; ``match`` decides here)."""
        return SimCapture(self, where, pcap_dir, match)

    # --- RoCE flows and storms -------------------------------------------------------------

    def start_endpoints(self, specs: dict[str, dict], timeout_s: float,
                        on_progress: Callable[[int], Any] | None = None) -> SimRunning:
        """Every host's NIC core, started in the engine from the specs the live endpoints
        read (``traffic.patterns.specs``); the clock advances as the caller waits."""
        return SimRunning(self, specs, timeout_s, on_progress)

    def wait_for(self, condition: Callable[[], bool], seconds: float,
                 step: float = 0.05) -> bool:
        """Run the clock until ``condition()`` holds, looking every ``step``, for at most
        ``seconds`` of the lab's own (simulated) clock; whether it held."""
        engine = self.engine
        deadline = engine.now_ps + to_ps(seconds)
        while not condition():
            if engine.now_ps >= deadline:
                return False
            engine.run(min(deadline, engine.now_ps + to_ps(step)))
        return True

    def storm(self, host: str, priority: int, seconds: float) -> SimStorm:
        """A PFC storm from ``host`` for ``seconds`` of simulated time (``traffic.storm``
        live)."""
        self._host(host)
        return SimStorm(self, host, priority, seconds)


class SimCapture:
    """Frames on chosen wires, both directions as each node sees them, stamped with
    simulated time; pcapng to the nanosecond."""

    def __init__(self, lab: SimLab, where: Iterable[tuple[str, str]] | None,
                 pcap_dir: Path | None, match: Callable[[bytes], bool] | None) -> None:
        topo = lab.topology
        self.lab = lab
        self.where = list(where) if where is not None else [
            (node, iface) for node in topo.nodes for iface in topo.interfaces(node)]
        self.pcap: PcapFiles | None = None
        if pcap_dir is not None:
            # scapy (the writer) loads only for a capture that writes files: the runtime's
            # start is a third of a second shorter without it
            from ..pcap import PcapFiles
            self.pcap = PcapFiles(pcap_dir)
        self.match = match
        self._records: list[tuple[int, str, str, Direction, bytes]] = []
        self._taps: list[list[Tap]] = []  # the tap lists ``_seen`` is on

    def __enter__(self) -> SimCapture:
        """One tap, ``_seen``, on every wire it watches (the wire names the end): a whole-
        fabric capture of a thousand-host lab taps eight thousand wires per probe, where a
        closure and a peer lookup per wire cost a tenth of a second in allocations and the
        collections they set off."""
        wires = self.lab.net.wires
        if self.where is None:
            for wire in wires.values():
                self._taps += [wire.tx_taps, wire.rx_taps]
        else:
            for node, iface in self.where:
                out = wires.get((node, iface))
                peer = self.lab.topology.peer(node, iface)
                if out is None or peer is None:
                    raise LabError(f"lab {self.lab.name} has no wired interface {node}:{iface}")
                self._taps += [out.tx_taps, wires[peer.node, peer.iface].rx_taps]
        for taps in self._taps:
            taps.append(self._seen)
        return self

    def _seen(self, end: End, direction: Direction, when_ps: int, frame: bytes) -> None:
        if self.match is None or self.match(frame):
            node, iface = end
            self._records.append((when_ps, node, iface, direction, frame))
            if self.pcap is not None:
                self.pcap.write(node, iface, direction, when_ps // 1000, frame)

    def __exit__(self, *exc: object) -> None:
        for taps in self._taps:
            taps.remove(self._seen)
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


def simulated(spec: str, time_scale: float = 1.0, seed: int = 0,
              jitter_s: float = 0.0) -> SimLab:
    """The lab ``spec`` names (a name or a topology path) in virtual time, in this process:
    nothing to bring up or down outside it. ``jitter_s``: mean timing jitter per frame per
    hop, fabric seconds (``labs.sim.link``); 0 runs exact clocks."""
    return up(topology.load(spec), time_scale, seed, jitter_s)


def up(topo: Topology, time_scale: float = 1.0, seed: int = 0,
       jitter_s: float = 0.0) -> SimLab:
    """A lab in virtual time; a topology the simulator cannot model is one LabError line."""
    try:
        return SimLab(topo, time_scale, seed, jitter_s)
    except SimError as e:
        raise LabError(f"{topo.path}: {e}") from None
