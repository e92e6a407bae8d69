"""The switch: ingress classification, bridge or router, egress; counters.

``Switch`` is what the agent drives::

    switch = Switch(config)
    for port, frame in switch.receive("Ethernet8", frame, now): send(port, frame)
    for port, frame in switch.tick(now): send(port, frame)     # every ~100 ms

Frames go in and out as complete Ethernet frames with any 802.1Q tag inline; ports are
SONiC names (``Ethernet0``). The pipeline of one frame:

1. ingress (``_ingress``): admin state, MAC-control frames (PFC/PAUSE/LLDP: consumed,
   never forwarded), the tag, classification into ``(tc, pg)`` (``classify``: DSCP for
   IP, PCP otherwise, per the port's PORT_QOS_MAP) counted per PG, the port's role;
2. decide egress: the VLAN's bridge (``bridge.VlanBridge``) or, for frames to the router
   MAC on a routed port or an SVI, the router (``router.Router``). Both append
   ``(PortState, frame, (tc, pg))`` to a list and return a disposition (``counters``);
3. transmit (``_transmit``): the egress stage. Today it picks the egress queue (the
   egress port's TC -> queue map), counts tx per queue and hands the frames back; the
   rest of the QoS pipeline (buffers/PFC, WRED/ECN, scheduling) slots in here, between
   the forwarding decision and the wire.

Tx counters count the frames the model returns: the agent must send every one of them.

The model is pure: no sockets, threads or clock; ``now`` (seconds, any epoch) is an
argument, so timers (FDB aging, ARP retries) run on whatever clock the caller uses.
"""
from __future__ import annotations

from fabric.config import SwitchConfig
from fabric.model.bridge import MODE_NAMES, MODES, PRIORITY_TAGGED, UNTAGGED, VlanBridge
from fabric.model.classify import CPU_CLASS, CPU_QUEUE, PortClassifier
from fabric.model.counters import (
    FORWARDED, MAC_CONTROL, MALFORMED, NOT_ROUTER_MAC, PORT_DOWN, PORT_UNCONFIGURED, TO_CPU,
    VLAN_NOT_MEMBER, CpuCounters, drop_totals,
)
from fabric.model.frames import (
    BROADCAST_MAC, ETH_P_8021Q, ETH_P_ARP, ETH_P_IPV4, ETH_P_IPV6, ETH_P_MAC_CONTROL,
    LINK_LOCAL_PREFIX, mac_bytes, mac_text,
)
from fabric.model.ports import ROUTED, SWITCHED, PortState
from fabric.model.router import L3Interface, Router

FDB_SWEEP_INTERVAL_S = 1.0


class Switch:
    """One emulated switch built from its SONiC configuration."""

    def __init__(self, config: SwitchConfig) -> None:
        self.hostname = config.hostname
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
        local_ips = {ip for iface in interfaces for ip in iface.ips}
        local_ips |= {int(a.ip) for addrs in config.loopbacks.values() for a in addrs}
        self.cpu = CpuCounters()
        self._router = Router(self.router_mac, interfaces, config.static_routes, local_ips,
                              self.cpu)
        self._now = 0.0
        self._next_sweep = 0.0

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
        return list(self._router.warnings)

    # --- the agent's API -------------------------------------------------------------------

    def receive(self, port: str, frame: bytes, now: float) -> list[tuple[str, bytes]]:
        """One frame arrived on ``port``; returns the frames to transmit, as (port, frame).

        Every frame gets a disposition on ``port``'s counters (see ``counters``). A port
        missing from the PORT table is the caller's bug: KeyError.
        """
        state = self._ports.get(port)
        if state is None:
            raise KeyError(f"{self.hostname}: no port {port!r} in the PORT table")
        self._now = now
        out: list[tuple[PortState, bytes, tuple]] = []
        disposition = self._ingress(state, frame, now, out)
        if disposition is FORWARDED:
            state.counters.forwarded += 1
        else:
            state.counters.count(disposition)
        return self._transmit(state, out, now) if out else []

    def tick(self, now: float) -> list[tuple[str, bytes]]:
        """Run timers up to ``now``: ARP retries, give-ups and re-probes, FDB aging."""
        self._now = now
        out: list[tuple[PortState, bytes, tuple]] = []
        self._router.tick(now, out)
        if now >= self._next_sweep:
            for bridge in self._vlans.values():
                bridge.sweep(now)
            self._next_sweep = now + FDB_SWEEP_INTERVAL_S
        return self._transmit(None, out, now)

    def set_port_up(self, port: str, up: bool) -> None:
        """Admin (or link) state change: a down port neither receives nor transmits, its
        FDB entries are flushed, routes through it are withdrawn (ECMP shrinks to the
        remaining next hops) and its neighbours forgotten."""
        state = self._ports.get(port)
        if state is None:
            raise KeyError(f"{self.hostname}: no port {port!r} in the PORT table")
        if state.up == up:
            return
        state.up = up
        if not up:
            for bridge in state.vlans.values():
                bridge.flush_port(state)
        self._router.rebuild()

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

    def qos_tables(self) -> dict:
        """Per port, the PORT_QOS_MAP bindings classification resolved (which map, from the
        port's entry or ``global``) and the effective DSCP/dot1p -> TC, TC -> PG and
        TC -> queue tables, JSON-ready."""
        return {name: p.qos.as_dict() for name, p in self._ports.items()}

    def counters(self) -> dict:
        """Everything countable, JSON-ready. See ``fabric.model.counters`` for the meaning
        of each field; ``drops`` totals ports and cpu; ages are relative to the last
        ``now`` the switch was given."""
        now = self._now
        ports = {name: {"admin_up": p.up, "role": p.role, **p.counters.as_dict()}
                 for name, p in self._ports.items()}
        cpu = self.cpu.as_dict()
        fdb = [{"vlan": b.name, "vid": b.vid, "mac": mac_text(mac), "port": port.name,
                "age": round(now - seen, 3)}
               for b in self._vlans.values() for mac, (port, seen) in b.fdb.items()]
        return {
            "hostname": self.hostname,
            "time": now,
            "ports": ports,
            "cpu": cpu,
            "drops": drop_totals(*(p["drops"] for p in ports.values()), cpu["drops"]),
            "fdb": fdb,
            "arp": self._router.arp_table(now),
            "routes": self._router.route_table(),
            "vlans": {b.name: {"vid": b.vid, "members": {p.name: MODE_NAMES[m]
                                                         for p, m in b.members}}
                      for b in self._vlans.values()},
        }

    # --- pipeline ----------------------------------------------------------------------------

    def _ingress(self, port: PortState, frame: bytes, now: float, out: list) -> str:
        """Admission and parsing common to every frame, classification, then the port's
        role decides. A frame is counted in rx once: under its PG once classified, as
        unclassified when the MAC stage turns it away (``PortCounters.rx_packets``)."""
        size = len(frame)
        if not port.up:
            return port.counters.unclassified(PORT_DOWN, size)
        if size < 14:
            return port.counters.unclassified(MALFORMED, size)
        if frame[0] & 1 and frame.startswith(LINK_LOCAL_PREFIX) and frame[5] < 0x10:
            # PFC, PAUSE, LLDP, STP...: link-local, never bridged
            return port.counters.unclassified(MAC_CONTROL, size)
        ethertype = frame[12] << 8 | frame[13]
        if ethertype == ETH_P_8021Q:
            if size < 18:
                return port.counters.unclassified(MALFORMED, size)
            tci = frame[14] << 8 | frame[15]
            ethertype = frame[16] << 8 | frame[17]
            off, vid, prio = 18, tci & 0x0FFF, tci >> 12
        else:
            off, vid, prio = 14, 0, 0
        if ethertype == ETH_P_MAC_CONTROL:  # MAC control to any address (e.g. unicast PAUSE)
            return port.counters.unclassified(MAC_CONTROL, size)
        # classification (classify.PortClassifier.classify, inlined): DSCP for IP when the
        # port has a DSCP map, else the tag's PCP (prio is PCP << 1 | DEI, 0 untagged)
        by_dscp = port.by_dscp
        if by_dscp is None or size < off + 2:
            cls = port.by_prio[prio]
        elif ethertype == ETH_P_IPV4:
            cls = by_dscp[frame[off + 1] >> 2]
        elif ethertype == ETH_P_IPV6:
            cls = by_dscp[(frame[off] & 0x0F) << 2 | frame[off + 1] >> 6]
        else:
            cls = port.by_prio[prio]
        counters = port.counters
        pg = cls[1]
        counters.pg_rx_packets[pg] += 1
        counters.pg_rx_bytes[pg] += size
        role = port.role
        if role is SWITCHED:
            return self._switched_in(port, frame, ethertype, off, vid, prio, cls, now, out)
        if role is ROUTED:
            return self._routed_in(port, frame, ethertype, off, vid, prio, cls, now, out)
        return PORT_UNCONFIGURED

    def _switched_in(self, port: PortState, frame: bytes, ethertype: int, off: int, vid: int,
                     prio: int, cls: tuple, now: float, out: list) -> str:
        """A VLAN member's frame: classify into a VLAN, learn, then route or bridge.

        Untagged and priority-tagged (VID 0) frames belong to the port's untagged VLAN;
        a tagged frame's VID must be one the port is a member of. A frame to the router
        MAC in a VLAN with an SVI is routed; a broadcast ARP is flooded and also seen by
        the SVI (so the switch answers for its gateway address).
        """
        bridge = port.vlans.get(vid) if vid else port.native_vlan
        if bridge is None:
            return VLAN_NOT_MEMBER
        if not frame[6] & 1:
            bridge.learn(frame[6:12], port, now)
        svi = bridge.svi
        if svi is not None and frame.startswith(self.router_mac):
            return self._router.l3_in(svi, port, frame, ethertype, off, prio, cls, out, now)
        if frame[0] & 1:
            disposition = bridge.flood(port, frame, off, prio, cls, out)
            if ethertype == ETH_P_ARP and svi is not None and frame.startswith(BROADCAST_MAC):
                seen = self._router.arp_in(svi, port, frame, off, prio, out, now)
                if disposition is not FORWARDED and seen is TO_CPU:
                    disposition = TO_CPU
            return disposition
        return bridge.forward(port, frame[0:6], frame, off, prio, cls, out, now)

    def _routed_in(self, port: PortState, frame: bytes, ethertype: int, off: int, vid: int,
                   prio: int, cls: tuple, now: float, out: list) -> str:
        """A routed port's frame: only the router MAC (and broadcast ARP) is for us; a
        VLAN tag other than a priority tag has no VLAN to belong to here."""
        if vid:
            return VLAN_NOT_MEMBER
        if frame.startswith(self.router_mac):
            return self._router.l3_in(port.interface, port, frame, ethertype, off, prio, cls,
                                      out, now)
        if ethertype == ETH_P_ARP and frame.startswith(BROADCAST_MAC):
            return self._router.arp_in(port.interface, port, frame, off, prio, out, now)
        return NOT_ROUTER_MAC

    def _transmit(self, ingress: PortState | None, out: list[tuple[PortState, bytes, tuple]],
                  now: float) -> list[tuple[str, bytes]]:
        """The egress stage: every frame the forwarding decided to send passes here, with
        its ingress classification ``(tc, pg)`` (``CPU_CLASS`` for what the switch
        originated), the port it came in on (None for timer-driven frames) and the time.

        Today: pick the egress queue (the egress port's TC -> queue map; queue 7 for
        originated frames), count tx per queue and return the frames for the agent to send.
        This is where the rest of the QoS pipeline (ingress admission/PFC toward the
        frame's PG on ``ingress`` -> egress queue/WRED -> scheduler releasing frames on
        receive/tick) will sit.
        """
        sent = []
        for port, frame, cls in out:
            queue = CPU_QUEUE if cls is CPU_CLASS else port.queue_of[cls[0]]
            counters = port.counters
            counters.queue_tx_packets[queue] += 1
            counters.queue_tx_bytes[queue] += len(frame)
            sent.append((port.name, frame))
        return sent
