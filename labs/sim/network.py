"""A lab's topology as simulated nodes and wires: one ``SimSwitch`` per switch (the model
built from its config_db.json), one ``SimHost`` per host, two ``Wire``s per link.

- a wire runs at the speed of the switch port at either end (PORT ``speed``; both ends of a
  switch-to-switch link must agree), divided by S;
- its delay is the cable's (``Topology.cable_m``: CABLE_LENGTH of the receiving switch port,
  or towards a host of the sending one; ~5 ns per metre) times S;
- each switch marks ECN where its ``rocelab.ecn-marking`` label says (``Node.ecn_marking``);
- the seed derives every random choice: each switch's WRED draw and ECMP hash seed, each
  wire's timing jitter when there is any (``jitter_s``, ``labs.sim.link``), and the flows'
  start jitter (``labs.runtimes.sim``), so a lab and a seed give one result.
"""
from __future__ import annotations

import hashlib
import random

from ...fabric.model.switch import Switch
from . import bgp
from .engine import PS, Engine
from .host import IfaceIn, SimHost
from .hostconfig import SimError, host_config, host_mac
from .switch import PortIn, SimSwitch
from .link import Wire, cable_delay_ps
from ..topology import Topology

DEFAULT_SPEED_MBPS = 100_000  # a host-to-host link with no switch port to read it from


def derived_seed(seed: int, *names: str) -> int:
    """A 32-bit seed for one purpose of one node, stable across runs and Python versions."""
    digest = hashlib.sha256("/".join([str(seed), *names]).encode()).digest()
    return int.from_bytes(digest[:4], "big")


class SimNetwork:
    def __init__(self, topo: Topology, time_scale: float = 1.0, seed: int = 0,
                 jitter_s: float = 0.0) -> None:
        """``jitter_s``: mean timing jitter per frame per hop in fabric seconds (stretched by
        S like every data-plane time); 0, the default, runs exact clocks."""
        if time_scale <= 0:
            raise SimError(f"time scale must be positive (got {time_scale})")
        if jitter_s < 0:
            raise SimError(f"timing jitter cannot be negative (got {jitter_s} s)")
        self.topology = topo
        self.time_scale = time_scale
        self.seed = seed
        self.engine = Engine()
        self.switches: dict[str, SimSwitch] = {}
        self.hosts: dict[str, SimHost] = {}
        self.wires: dict[tuple[str, str], Wire] = {}  # (node, iface) -> its outgoing wire
        for node in topo.switches:
            ifaces = {port: i for i, port in node.ports.ports.items()}
            rng = random.Random(derived_seed(seed, node.name, "wred"))
            model = Switch(node.config, time_scale=time_scale, rand=rng.random,
                           ecmp_salt=derived_seed(seed, node.name, "ecmp"),
                           ecn_marking=node.ecn_marking)
            self.switches[node.name] = SimSwitch(self.engine, node.name, model, ifaces)
        for name, learned in bgp.routes(topo).items():  # what FRR would install (eBGP)
            self.switches[name].switch.update_routes(learned)
        for node in topo.hosts:
            ifaces = topo.interfaces(node.name)
            config = host_config(node.name, node.exec, ifaces)
            macs = {i: host_mac(topo.name, node.name, i) for i in ifaces}
            self.hosts[node.name] = SimHost(self.engine, node.name, config, macs, time_scale)
        jitter_ps = jitter_s * time_scale * PS
        for link in topo.links:
            rate = self._rate_bps(link)
            for src, dst in ((link.a, link.b), (link.b, link.a)):
                delay = cable_delay_ps(topo.cable_m(dst.node, dst.iface), time_scale)
                rng = random.Random(derived_seed(seed, src.node, src.iface, "jitter")) \
                    if jitter_ps else None
                wire = Wire(self.engine, rate, delay, self._receiver(dst.node, dst.iface),
                            jitter_ps, rng, ((src.node, src.iface), (dst.node, dst.iface)))
                self.wires[src.node, src.iface] = wire
                if src.node in self.switches:
                    self.switches[src.node].wires[topo.port(src.node, src.iface)] = wire
                else:
                    self.hosts[src.node].wires[src.iface] = wire
        for switch in self.switches.values():
            switch.start()

    def _receiver(self, node: str, iface: str) -> PortIn | IfaceIn:
        """What a wire delivers each frame to: the inlet of its node's port, which the
        compiled wire calls in C (a partial was a Python call per frame-hop)."""
        if node in self.switches:
            return PortIn(self.switches[node], self.topology.port(node, iface))
        return IfaceIn(self.hosts[node], iface)

    def _speeds(self, link) -> list[int]:
        out = []
        for end in (link.a, link.b):
            config = self.topology.nodes[end.node].config
            port = config.ports[self.topology.port(end.node, end.iface)] if config else None
            if port is not None:
                out.append(port.speed_mbps)
        return out

    def _rate_bps(self, link) -> float:
        speeds = self._speeds(link)
        if len(set(speeds)) > 1:
            raise SimError(f"link {link.a} - {link.b}: the ports' speeds differ "
                           f"({' vs '.join(map(str, speeds))} Mb/s); the simulator needs one "
                           "rate per wire")
        return (speeds[0] if speeds else DEFAULT_SPEED_MBPS) * 1e6 / self.time_scale
