"""The switch built from its SONiC configuration: its per-frame path (``forwarding``), its
timers (``switch_timers``), its control (``switch_control``) and its counters
(``switch_report``).

``Switch`` is what the agent drives::

    switch = Switch(config, time_scale=S)
    send_now(switch.receive("Ethernet8", frame, now))   # PFC, and frames to idle ports
    for port in switch.backlogged():                     # when next_send_time(port) has come
        while (frame := switch.dequeue(port, now)) is not None: send(port, frame)
    send_now(switch.take_control())                      # XON PFC raised by those dequeues
    send_now(switch.tick(now))                           # when switch.next_timer() comes

Frames go in and out as complete Ethernet frames with any 802.1Q tag inline; ports are
SONiC names (``Ethernet0``). ``forwarding`` says what happens to one frame.

With ``time_scale=None`` the ports run at an infinite rate: ``receive`` and ``tick``
return the forwarded frames themselves at once (pauses last no time). That is the
forwarding model alone, for tests and tools that do not care about time.

The model is pure: no sockets, threads or clock; ``now`` (seconds, any epoch) is an
argument, so timers (FDB aging, ARP retries, pauses, pacing) run on the caller's clock.
"""
from __future__ import annotations

import random
from collections.abc import Callable

from ..config import DEFAULT_ECN_MARKING, ECN_MARKING_POINTS, SwitchConfig
from .buffers import IngressBuffers, PgBuffer
from .bridge import MODES, PRIORITY_TAGGED, UNTAGGED, VlanBridge
from .classify import PortClassifier
from .counters import CpuCounters
from .egress import EgressPort
from .egress_buffers import egress_pools
from .forwarding import Forwarding
from .frames import mac_bytes
from .interfaces import L3Interface
from .pause import PfcSender
from .ports import ROUTED, SWITCHED, PortState
from .router import Router
from .router6 import Router6
from .switch_control import SwitchControl
from .switch_report import SwitchReport
from .switch_timers import SwitchTimers
from .watchdog import FABRIC


class Switch(Forwarding, SwitchControl, SwitchTimers, SwitchReport):
    """One emulated switch built from its SONiC configuration (its per-frame path:
    ``forwarding``; its timers: ``switch_timers``; what it reports: ``switch_report``)."""

    # The state besides the per-frame path's (forwarding.pxd) has slots, and the mixins
    # none of their own: with no instance dict, a compiled caller's per-frame call of a
    # Forwarding method checks for an override once per type, not once per call (its
    # cache of "not overridden" holds one instance's dict, so every switch missed it).
    __slots__ = ("_egress_pools", "_next_sweep", "_own_timer", "_paused", "_vlans",
                 "_watchdog_at", "_watchdogs", "cpu", "ecn_marking", "pfc_watchdog",
                 "time_scale")

    def __init__(self, config: SwitchConfig, time_scale: float | None = None,
                 rand: Callable[[], float] = random.random, ecmp_salt: int = 0,
                 ecn_marking: str = DEFAULT_ECN_MARKING, pfc_watchdog: str = FABRIC) -> None:
        """``time_scale``: the lab's S (ports run at speed / S); None for infinite rate.
        ``rand``: WRED's uniform draw in [0, 1), injectable for exact tests (and seeded
        per switch in a simulation); ``ecmp_salt``: the ECMP hash seed.
        ``ecn_marking``: where WRED marks, ``dequeue`` or ``enqueue`` (``egress``).
        ``pfc_watchdog``: the watchdogs' time profile (``watchdog``: ``fabric``, times x S,
        or the storm check's ``storm-check``)."""
        if ecn_marking not in ECN_MARKING_POINTS:
            raise ValueError(f"ECN marking point {ecn_marking!r} is not one of "
                             f"{', '.join(ECN_MARKING_POINTS)}")
        self.hostname = config.hostname
        self.ecn_marking = ecn_marking
        watchdog_scale = self._watchdog_scale(pfc_watchdog, time_scale)
        self.pfc_watchdog = pfc_watchdog
        self.time_scale = time_scale
        self._paced = time_scale is not None
        self.router_mac = mac_bytes(config.mac)
        self._ports: dict[str, PortState] = {
            name: PortState(name, port.admin_up, port.mtu,
                            PortClassifier.from_config(config.qos, name))
            for name, port in config.ports.items()}
        self._vlans: dict[str, VlanBridge] = {}
        interfaces: list[L3Interface] = []
        for vlan in config.vlans.values():
            bridge = self._vlans[vlan.name] = VlanBridge(vlan.name, vlan.vid)
            for port_name, mode in vlan.members.items():
                self._add_member(bridge, self._port(port_name, f"VLAN_MEMBER|{vlan.name}"), mode)
            if vlan.addresses:
                bridge.svi = L3Interface(vlan.name, vlan.addresses, self.router_mac, vlan=bridge)
                interfaces.append(bridge.svi)
        for port_name, addresses in config.interfaces.items():
            port = self._port(port_name, "INTERFACE")
            if port.role == SWITCHED:
                raise ValueError(f"{config.path}: INTERFACE|{port_name}: the port is also a "
                                 "VLAN member; a port is either routed or switched")
            port.role = ROUTED
            port.interface = L3Interface(port_name, addresses, self.router_mac, port=port)
            interfaces.append(port.interface)
        loopbacks = [a for addrs in config.loopbacks.values() for a in addrs]
        local_ips = {ip for iface in interfaces for ip in iface.ips}
        local_ips |= {int(a.ip) for a in loopbacks if a.version == 4}
        local_ips6 = {ip for iface in interfaces for ip in iface.ips6}
        local_ips6 |= {int(a.ip) for a in loopbacks if a.version == 6}
        self.cpu = CpuCounters()
        self._router = Router(self.router_mac, interfaces,
                              [r for r in config.static_routes if r.prefix.version == 4],
                              local_ips, self.cpu, ecmp_salt,
                              kernel_stack=config.bgp is not None)
        self._router6 = Router6(self.router_mac, interfaces,
                                [r for r in config.static_routes if r.prefix.version == 6],
                                local_ips6, self.cpu, ecmp_salt,
                                kernel_stack=config.bgp is not None)
        self._now = 0.0
        self._buffers = IngressBuffers.from_config(config.qos, self._ports)
        self._egress_pools = egress_pools(config.qos, self._buffers.pools)
        for name, port in self._ports.items():
            port.egress = EgressPort(config.qos, config.ports[name], time_scale, rand,
                                     mark_at_dequeue=ecn_marking == "dequeue",
                                     watchdog_scale=watchdog_scale, pools=self._egress_pools)
            port.pgs = [self._buffers.pg(name, pg) for pg in range(8)]
            port.pfc = [PfcSender(b.priorities, port.egress.rate_bps) if b.lossless else None
                        for b in port.pgs]
        self._init_timers()
        self._backlogged: dict[str, PortState] = {}  # ports with frames queued
        # the last port whose send schedule may have moved earlier; it links the others
        self._touched: PortState | None = None
        # ports whose sampled state (queues, PGs, XOFF, pauses received) may have moved since
        # the last ``sample_moved``, and those it found paused (their pause counts down);
        # None until a first ``sample_moved``: a switch nobody traces keeps none (four set
        # insertions per frame)
        self._moved: set[str] | None = None
        self._paused: set[str] = set()
        self._control: list[tuple[str, bytes]] = []  # PFC frames to send now
        # the frame being received holds bytes of this PG buffer (None: none), this many,
        # and its class tuple, which its forwarded copies carry as such
        self._charged: PgBuffer | None = None
        self._charged_bytes = 0
        self._charged_cls: tuple | None = None

    def _port(self, name: str, where: str) -> PortState:
        port = self._ports.get(name)
        if port is None:
            raise ValueError(f"{where}: {name} is not in the PORT table")
        return port

    @staticmethod
    def _add_member(bridge: VlanBridge, port: PortState, mode_name: str) -> None:
        mode = MODES.get(mode_name)
        if mode is None:
            raise ValueError(f"VLAN_MEMBER|{bridge.name}|{port.name}: tagging_mode "
                             f"{mode_name!r} is not one of {', '.join(MODES)}")
        if mode in (UNTAGGED, PRIORITY_TAGGED):
            if port.native_vlan is not None and port.native_vlan is not bridge:
                raise ValueError(
                    f"VLAN_MEMBER|{bridge.name}|{port.name}: {port.name} is already an "
                    f"untagged member of {port.native_vlan.name}; a port has one untagged VLAN")
            port.native_vlan = bridge
        port.role = SWITCHED
        port.vlans[bridge.vid] = bridge
        bridge.add_member(port, mode)

    @property
    def warnings(self) -> list[str]:
        """Configuration the switch accepted but cannot use (e.g. an unreachable next hop)."""
        return [*self._router.warnings, *self._router6.warnings]

    def classify(self, port: str, frame: bytes,
                 egress: str | None = None) -> tuple[int, int, int]:
        """``(tc, pg, queue)`` of ``frame`` received on ``port``: what ``receive`` counts it
        under (its PG) and the queue it would take out of ``egress`` (by default ``port``'s
        own TC -> queue map, the same as any port's when they share one map). Pure: nothing
        is counted or forwarded; for tests and debugging (see ``classify``)."""
        states = [self._ports.get(name) for name in (port, egress or port)]
        for name, state in zip((port, egress or port), states):
            if state is None:
                raise KeyError(f"{self.hostname}: no port {name!r} in the PORT table")
        return states[1].qos.resolve(states[0].qos.classify(frame))
