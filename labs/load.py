"""Can this machine hold a lab live? An estimate made before ``lab.up`` of the netns
runtime, from the lab's own files and the agent rate measured on this machine.

During a congestion check every host sends at its port's emulated rate (speed / S) and each
frame crosses up to the fabric's diameter in switches; the agents must forward that many
frames a second (``demand``). What they sustain is the full-pipeline agent rate
``invoke bench`` measured (its newest ``results/bench-*.json``; the figure recorded in
docs/runtimes.md otherwise) times the cores. The check's variant labs run beside the lab, so
twice its switches compete for the cores. A lab whose demand exceeds the budget is refused
(it would only produce INCONCLUSIVE verdicts); one that uses half of it, or that runs more
agents than MAX_AGENTS_PER_CORE per core, gets a warning. Both name ``--runtime sim``.
"""
from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from .topology import Topology

MEASURED_AGENT_PPS = 130_000  # bench "agent, routed + lossless pipeline", 1 KB, this machine
MAX_AGENTS_PER_CORE = 4
FRAME_OVERHEAD = 14 + 20 + 8 + 12 + 16 + 4  # Ethernet, IPv4, UDP, BTH, RETH, ICRC
DEFAULT_MTU = 1024
RESULTS = Path(__file__).resolve().parent.parent / "results"


@dataclass(frozen=True)
class Load:
    demand_fps: float  # frame-hops per second the agents must forward in an incast
    budget_fps: float  # what this machine's agents sustain, all cores
    agents: int  # the lab's switches and a variant lab's, side by side
    cores: int
    time_scale: float

    @property
    def share(self) -> float:
        return self.demand_fps / self.budget_fps

    def refusal(self, lab: str) -> str | None:
        if self.share <= 1:
            return None
        need = self.time_scale * self.share * 2
        return (f"lab {lab} is too large for the live runtime on this machine: an incast "
                f"needs ~{self.demand_fps:,.0f} frame-hops/s of its agents, which sustain "
                f"~{self.budget_fps:,.0f} ({self.cores} cores); run it with --runtime sim "
                f"(virtual time), or set rocelab.time-scale to {need:,.0f} or more")

    def warning(self, lab: str) -> str | None:
        crowded = self.agents > MAX_AGENTS_PER_CORE * self.cores
        if self.share <= 0.5 and not crowded:
            return None
        why = (f"its incast uses ~{self.share:.0%} of what the agents sustain"
               if self.share > 0.5 else
               f"its checks run {self.agents} switch agents on {self.cores} cores")
        return (f"warning: lab {lab} may be too much for this machine live ({why}): congestion "
                "checks may come out INCONCLUSIVE; --runtime sim runs them in virtual time")


def agent_pps() -> float:
    """The newest full-pipeline agent rate ``invoke bench`` measured here, else the one
    recorded when the project measured it."""
    for path in sorted(RESULTS.glob("bench-*.json"), reverse=True):
        try:
            rate = json.loads(path.read_text())["forwarding"]["agent_full_pipeline_pps"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(rate, (int, float)) and rate > 0:
            return float(rate)
    return MEASURED_AGENT_PPS


def diameter(topo: Topology) -> int:
    """The most switches a frame crosses between two hosts (shortest paths)."""
    graph: dict[str, set[str]] = {n: set() for n in topo.nodes}
    for link in topo.links:
        graph[link.a.node].add(link.b.node)
        graph[link.b.node].add(link.a.node)
    switches = {n.name for n in topo.switches}
    hosts = [h.name for h in topo.hosts]
    longest = 0
    for src in hosts:
        seen = {src: 0}
        todo = deque([src])
        while todo:
            node = todo.popleft()
            for peer in graph[node]:
                if peer not in seen:
                    seen[peer] = seen[node] + (peer in switches)
                    if peer in switches:
                        todo.append(peer)
        longest = max([longest] + [seen[h] for h in hosts if h in seen and h != src])
    return longest


def estimate(topo: Topology, cores: int | None = None, rate: float | None = None) -> Load:
    cores = cores or os.cpu_count() or 1
    demand = 0.0
    scales = [n.time_scale for n in topo.switches] or [1.0]
    hops = max(1, diameter(topo))
    for host in topo.hosts:
        mtu = host.nic.roce.mtu if host.nic else DEFAULT_MTU
        for link in topo.links:
            for mine, peer in ((link.a, link.b), (link.b, link.a)):
                config = topo.nodes[peer.node].config if mine.node == host.name else None
                port = config.ports[topo.port(peer.node, peer.iface)] if config else None
                if port is not None:
                    bps = port.speed_mbps * 1e6 / topo.nodes[peer.node].time_scale
                    demand += bps / (8 * (mtu + FRAME_OVERHEAD)) * hops
    return Load(demand, (rate or agent_pps()) * cores, 2 * len(topo.switches), cores,
                max(scales))
