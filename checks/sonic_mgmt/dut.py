"""One switch of a lab as sonic-mgmt's PTF harness sees its DUT: ports to send frames into,
TX to disable and enable, SAI-style counters to read, in virtual time.

sonic-mgmt's QoS tests stop an egress port (``sai_thrift_port_tx_disable``), send N packets
of one DSCP from one PTF port, and read counter deltas; nothing in them is timed. Here the
DUT is the switch model itself (``fabric.model.switch.Switch``, the one every runtime
runs), built from the lab's config_db.json and paced at the ports' real speeds on a clock
this module advances, so the same method gives exact counts.

Each wired port gets a PTF neighbour: a MAC and, where the port routes (INTERFACE) or its
VLAN has an SVI, an IPv4 address in that subnet, taught to the switch as PTF's setup does
(an ARP request from the neighbour, answered before any TX is disabled). ``packet`` builds
the frame the switch forwards from one neighbour to another: bridged within a VLAN,
otherwise routed to the router MAC, tagged where the port is a tagged member.
"""
from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable
from itertools import islice
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Interface

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw

from ...fabric.config import SwitchConfig
from ...fabric.model.frames import (ETH_P_MAC_CONTROL, ETH_P_ROCEV1, PFC_MAC, mac_bytes,
                                    mac_text, parse_mac_control, pfc_frame)
from ...fabric.model.switch import Switch
from ...labs.topology import Node

ROCEV2_PORT = 4791  # the packets are RoCEv2-shaped (UDP 4791), as a RoCE fabric carries
MIN_FRAME = 64  # bytes, with the FCS: what PTF's 64 B packets are on the wire
PAUSE_QUANTUM_BITS = 512
MAC_CONTROL_ETHERTYPE = ETH_P_MAC_CONTROL.to_bytes(2, "big")

Arrival = tuple[float, str, bytes]  # (virtual time, the port it arrives on, the frame)


class DutError(ValueError):
    """The lab has no way to run a case on this switch (e.g. a port nothing can reach)."""


@dataclass(frozen=True)
class Neighbour:
    """The PTF port behind one switch port: what frames from and to it carry."""

    port: str
    mac: str
    ip: IPv4Address | None  # None: a switched port in a VLAN without an SVI
    vlan: int | None  # the VID its frames carry (tagged member), else None
    vlan_name: str | None  # the VLAN the port is a member of, if switched


@dataclass
class Capture:
    """Frames the switch put on one port's wire, in order, with their virtual time."""

    frames: list[tuple[float, bytes]] = field(default_factory=list)


class Dut:
    """A lab switch under test: ``send``, ``run``, ``set_tx``, ``read``."""

    def __init__(self, node: Node, seed: int = 0) -> None:
        if node.config is None or node.ports is None:
            raise DutError(f"{node.name}: no config_db.json")
        self.name = node.name
        self.config: SwitchConfig = node.config
        self.switch = Switch(self.config, time_scale=1.0,
                             rand=random.Random(seed).random, ecn_marking=node.ecn_marking)
        self.now = 0.0
        self.ports = list(node.ports.ports.values())  # the lab's wired ports, wiring order
        self.captures: dict[str, Capture] = {port: Capture() for port in self.ports}
        self.neighbours = {port: self._neighbour(port, n)
                           for n, port in enumerate(self.ports, 1)}
        for neighbour in self.neighbours.values():
            self._introduce(neighbour)
        self.run(self.now + 0.001)
        for capture in self.captures.values():
            capture.frames.clear()
        for kind in ("pg", "queue"):  # as sonic-mgmt clears them before a case
            self.switch.clear_watermarks(kind)

    # --- the PTF side -----------------------------------------------------------------

    def packet(self, src: str, dst: str, dscp: int, size: int = MIN_FRAME, ecn: int = 0,
               pcp: int | None = None, ident: int = 0) -> bytes:
        """One frame into ``src`` that the switch forwards to ``dst``'s neighbour, ``size``
        bytes on the wire with FCS (the switch model is handed frames without it: ``size``
        - 4 bytes). ``pcp``: the 802.1Q priority (a priority-tagged frame where the port is
        untagged); ``ident``: the IP id, to tell packets apart in a capture."""
        a, b = self.neighbours[src], self.neighbours[dst]
        bridged = a.vlan_name is not None and a.vlan_name == b.vlan_name
        if not bridged and (a.ip is None or b.ip is None):
            raise DutError(f"{self.name}: no route from {src} to {dst} (a VLAN without an "
                           "SVI on the way)")
        eth = Ether(src=a.mac, dst=b.mac if bridged else self.config.mac)
        if a.vlan is not None or pcp is not None:
            eth = eth / Dot1Q(vlan=a.vlan or 0, prio=pcp or 0)
        src_ip = str(a.ip) if a.ip else "192.0.2.1"
        dst_ip = str(b.ip) if b.ip else "192.0.2.2"
        pkt = eth / IP(src=src_ip, dst=dst_ip, tos=(dscp << 2) | ecn, ttl=64, id=ident) \
            / UDP(sport=49152, dport=ROCEV2_PORT)
        pad = size - 4 - len(pkt)
        if pad < 0:
            raise DutError(f"a {size} B frame cannot hold the headers ({len(pkt) + 4} B)")
        return bytes(pkt / Raw(bytes(pad)))

    def send(self, port: str, frame: bytes, count: int = 1) -> None:
        """``count`` copies of ``frame`` arrive on ``port`` back to back at its line rate;
        timers and enabled ports run as the clock passes."""
        gap = (len(frame) + 24) * 8 / self._speed_bps(port)  # + FCS, preamble, IFG
        for _ in range(count):
            self._emit(self.switch.receive(port, frame, self.now))
            self.run(self.now + gap)

    def storm(self, port: str, priorities: tuple[int, ...], seconds: float,
              quanta: int = 0xFFFF) -> None:
        """A PFC storm into ``port`` (the PTF's fanout pausing the switch): frames pausing
        ``priorities`` for ``quanta`` each, sent every half pause, for ``seconds``."""
        frame = pfc_frame(bytes(6), {p: quanta for p in priorities})
        interval = quanta * PAUSE_QUANTUM_BITS / self._speed_bps(port) / 2
        end = self.now + seconds
        while self.now < end:
            self._emit(self.switch.receive(port, frame, self.now))
            self.run(min(end, self.now + interval))

    def set_tx(self, port: str, enabled: bool) -> None:
        self.switch.set_tx_enabled(port, enabled, self.now)

    def run(self, until: float) -> None:
        """Advance the clock to ``until``: every due timer (PFC refresh, watchdog poll, ARP)
        and every frame an enabled port can send, in time order."""
        switch = self.switch
        while True:
            due, port = switch.next_timer(), None
            for name in switch.backlogged():
                at = switch.next_send_time(name)
                if at is not None and (due is None or at < due):
                    due, port = at, name
            if due is None or due > until:
                break
            self.now = max(self.now, due)
            if port is None:
                self._emit(switch.tick(self.now))
                continue
            while (frame := switch.dequeue(port, self.now)) is not None:
                self.captures[port].frames.append((self.now, frame))
            self._emit(switch.take_control())
        self.now = max(self.now, until)

    def settle(self) -> None:
        """Run until every port that may send has sent all it holds (as PTF, sending one
        packet at a time, lets the DUT drain between packets)."""
        while True:
            due = [at for port in self.switch.backlogged()
                   if (at := self.switch.next_send_time(port)) is not None]
            if not due:
                return
            self.run(max(due))

    def pfc_sent(self, port: str, priority: int) -> list[tuple[float, int]]:
        """(time, quanta) of every PFC frame the switch sent out of ``port`` for
        ``priority``, in order: XOFF and its refreshes (quanta > 0), XON (0)."""
        out = []
        for at, frame in self.captures[port].frames:
            if frame[:6] == PFC_MAC and frame[12:14] == MAC_CONTROL_ETHERTYPE:
                parsed = parse_mac_control(frame, 14)
                if parsed is not None and priority in parsed[1]:
                    out.append((at, parsed[1][priority]))
        return out

    def read(self) -> dict:
        """The switch's counters now (``fabric.model.counters``), ports by SONiC name."""
        return self.switch.counters()

    # --- setup ------------------------------------------------------------------------

    def _emit(self, out: list[tuple[str, bytes]]) -> None:
        for port, frame in out:
            if port in self.captures:
                self.captures[port].frames.append((self.now, frame))

    def _speed_bps(self, port: str) -> float:
        return self.config.ports[port].speed_mbps * 1e6

    def _neighbour(self, port: str, n: int) -> Neighbour:
        mac = mac_text(bytes([0x02, 0x50, 0x54, 0x46, n >> 8, n & 0xFF]))  # "PTF"
        vlan = next((v for v in self.config.vlans.values() if port in v.members), None)
        if vlan is not None:
            tagged = vlan.members[port] == "tagged"
            ip = _another_host(vlan.addresses, n)
            return Neighbour(port, mac, ip, vlan.vid if tagged else None, vlan.name)
        ip = _another_host(self.config.interfaces.get(port, ()), 1)
        return Neighbour(port, mac, ip, None, None)

    def _introduce(self, neighbour: Neighbour) -> None:
        """The neighbour announces itself: an ARP request for the switch's address (its
        MAC learnt on the port, its address in the ARP table) or, without an address, any
        frame from it (FDB learning)."""
        eth = Ether(src=neighbour.mac, dst="ff:ff:ff:ff:ff:ff")
        if neighbour.vlan is not None:
            eth = eth / Dot1Q(vlan=neighbour.vlan)
        if neighbour.ip is not None:
            ours = self._switch_ip(neighbour)
            frame = eth / ARP(op=1, hwsrc=neighbour.mac, psrc=str(neighbour.ip),
                              pdst=str(ours))
        else:
            frame = eth / IP(src="192.0.2.1", dst="192.0.2.255") / UDP(dport=9)
        self._emit(self.switch.receive(neighbour.port, bytes(frame), self.now))

    def _switch_ip(self, neighbour: Neighbour) -> IPv4Address:
        addresses = (self.config.vlans[neighbour.vlan_name].addresses
                     if neighbour.vlan_name else self.config.interfaces[neighbour.port])
        return next(a.ip for a in addresses
                    if isinstance(a, IPv4Interface) and neighbour.ip in a.network)

    # --- more frames --------------------------------------------------------------------

    def l2_frame(self, src: str, dst: str | None, pcp: int, size: int = MIN_FRAME) -> bytes:
        """A non-IP frame (RoCEv1's EtherType 0x8915, zero payload) from ``src``'s neighbour,
        ``size`` bytes on the wire with FCS, carrying ``pcp`` in its 802.1Q tag (VID 0, a
        priority tag, where the port is untagged): what a switch classifies by PCP even
        where the port binds a DSCP map. To ``dst``'s neighbour, bridged (within one VLAN
        only); ``dst`` None: to the router MAC, where it is classified and counted in its
        PG, then dropped (non-IP to the router)."""
        a = self.neighbours[src]
        if dst is None:
            to = self.config.mac
        elif a.vlan_name is not None and a.vlan_name == self.neighbours[dst].vlan_name:
            to = self.neighbours[dst].mac
        else:
            raise DutError(f"{self.name}: {src} and {dst} are not in one VLAN; a non-IP "
                           "frame is only bridged")
        head = bytes(Ether(src=a.mac, dst=to) / Dot1Q(vlan=a.vlan or 0, prio=pcp,
                                                     type=ETH_P_ROCEV1))
        pad = size - 4 - len(head)
        if pad < 0:
            raise DutError(f"a {size} B frame cannot hold the headers ({len(head) + 4} B)")
        return head + bytes(pad)

    def traffic(self, flows: list[Flow], seconds: float,
                response_s: dict[str, float] | None = None) -> None:
        """Run ``flows`` for ``seconds`` of virtual time, interleaved as their rates space
        them, each port's senders sharing its wire; senders with a ``priority`` pause for
        the PFC the DUT sends them, ``response_s[port]`` after it left the DUT (0 where not
        given). Each flow counts what it ``sent``; the DUT runs on to the end."""
        _traffic(self, flows, seconds, response_s or {})

    def idents(self, port: str, since: int = 0) -> Counter[int]:
        """How many IPv4 frames of each IP id ``port``'s capture holds from ``since`` on."""
        out: Counter[int] = Counter()
        for _, frame in self.captures[port].frames[since:]:
            off = 18 if frame[12:14] == b"\x81\x00" else 14
            if frame[off - 2:off] == b"\x08\x00":
                out[frame[off + 4] << 8 | frame[off + 5]] += 1
        return out


    # --- frames on a timeline ---------------------------------------------------------
    # What a PTF or snappi test runs at once (a fanout's storm while a flow keeps sending,
    # flows at their own rates) as one list of arrivals, each a frame into a port at a
    # virtual time, which ``play`` delivers in time order with the switch running between.

    def storm_arrivals(self, port: str, priorities: tuple[int, ...], start: float,
                       seconds: float, quanta: int = 0xFFFF) -> list[Arrival]:
        """The frames of ``storm`` as arrivals: a PFC frame pausing ``priorities`` for
        ``quanta`` every half pause, from ``start`` while before ``start + seconds``."""
        frame = pfc_frame(bytes(6), {p: quanta for p in priorities})
        interval = quanta * PAUSE_QUANTUM_BITS / self._speed_bps(port) / 2
        return [(start + i * interval, port, frame)
                for i in range(math.ceil(seconds / interval))]

    def flow_arrivals(self, port: str, frames: Iterable[bytes], start: float,
                      gap: float | None = None) -> list[Arrival]:
        """``frames`` into ``port`` one after another from ``start``, ``gap`` seconds apart
        (None: back to back at the port's line rate, as ``send``)."""
        out, at = [], start
        for frame in frames:
            out.append((at, port, frame))
            at += gap if gap is not None else (len(frame) + 24) * 8 / self._speed_bps(port)
        return out

    def play(self, arrivals: Iterable[Arrival], until: float | None = None) -> None:
        """Deliver ``arrivals`` in time order (those at the same time in the order given:
        a storm listed before a flow pauses the queue before the flow's first frame gets
        there), running timers and ports in between; then run to ``until``, if given. An
        arrival before the DUT's clock is refused: the clock cannot go back for it."""
        ordered = sorted(arrivals, key=lambda a: a[0])
        if ordered and ordered[0][0] < self.now:
            raise ValueError(f"{self.name}: a frame into {ordered[0][1]} at "
                             f"{ordered[0][0]:.9f} s, before the DUT's clock ({self.now:.9f} s)")
        for at, port, frame in ordered:
            self.run(at)
            self._emit(self.switch.receive(port, frame, self.now))
        if until is not None:
            self.run(until)


def _another_host(addresses, n: int) -> IPv4Address | None:
    """The ``n``-th address of the first IPv4 subnet in ``addresses`` that is not the
    switch's own (a /31's other end), None when there is no IPv4 subnet."""
    for iface in addresses:
        if isinstance(iface, IPv4Interface):
            hosts = iface.network.hosts() if iface.network.prefixlen < 31 else iface.network
            others = (h for h in hosts if h != iface.ip)
            return next(islice(others, n - 1, None), None)
    return None


# --- rate-based traffic: snappi-style flows from PTF ports that honour the DUT's PFC --------


@dataclass
class Flow:
    """Frames into ``port`` at ``rate`` of its line rate (on the wire: + FCS, preamble and
    gap), from ``start`` seconds into the traffic. ``priority``: the PFC priority the sender
    honours (a traffic generator port pausing for the quanta the DUT sent it, after its
    response delay); None for a sender that ignores PFC (a storm, 802.3x pause frames)."""

    port: str
    frame: bytes
    rate: float
    priority: int | None = None
    start: float = 0.0
    sent: int = 0


class PfcHeard:
    """The PFC frames one PTF port received from the DUT, as pauses of its senders: each
    takes effect ``response_s`` after the DUT sent it (the cable's round trip and the
    sender's response time), reloading the priority's pause with its quanta (0 resumes)."""

    def __init__(self, rate_bps: float, response_s: float) -> None:
        self.quantum_s = PAUSE_QUANTUM_BITS / rate_bps
        self.response_s = response_s
        self.end = [0.0] * 8  # per priority, the pause in effect ends here
        self.pending: list[list[tuple[float, float]]] = [[] for _ in range(8)]

    def heard(self, at: float, quanta: dict[int, int]) -> None:
        for priority, q in quanta.items():
            self.pending[priority].append((at + self.response_s, q * self.quantum_s))

    def settle(self, now: float) -> None:
        """Apply for good the pauses that took effect by ``now``."""
        for priority, pending in enumerate(self.pending):
            while pending and pending[0][0] <= now:
                at, seconds = pending.pop(0)
                self.end[priority] = at + seconds if seconds else min(self.end[priority], at)

    def free_at(self, priority: int, t: float) -> float:
        """The earliest time from ``t`` a sender of ``priority`` may send, by the pauses
        heard so far."""
        end = self.end[priority]
        for at, seconds in self.pending[priority]:
            free = max(t, end)
            if free < at:
                return free
            end = at + seconds if seconds else min(end, at)
        return max(t, end)


def _traffic(dut: Dut, flows: list[Flow], seconds: float,
             response_s: dict[str, float]) -> None:
    """``Dut.traffic``'s loop: the flow that can send earliest sends; before it does, the
    DUT runs to that time and the PFC it put on the senders' wires is heard."""
    start = dut.now
    end = start + seconds
    ports = {f.port for f in flows}
    heard = {p: PfcHeard(dut._speed_bps(p), response_s.get(p, 0.0)) for p in ports}
    scanned = {p: len(dut.captures[p].frames) for p in ports}
    wire_free = dict.fromkeys(ports, start)
    next_at = [start + f.start for f in flows]
    gaps = [(len(f.frame) + 24) * 8 / (f.rate * dut._speed_bps(f.port)) for f in flows]

    def candidate(i: int) -> float:
        flow = flows[i]
        t = max(next_at[i], wire_free[flow.port], dut.now)
        return t if flow.priority is None else heard[flow.port].free_at(flow.priority, t)

    while flows:
        i = min(range(len(flows)), key=candidate)
        t = candidate(i)
        if t >= end:
            break
        dut.run(t)
        for port in ports:
            frames = dut.captures[port].frames
            for at, frame in frames[scanned[port]:]:
                if frame.startswith(_PFC_HEAD):
                    parsed = parse_mac_control(frame, 14)
                    if parsed is not None:
                        heard[port].heard(at, parsed[1])
            scanned[port] = len(frames)
            heard[port].settle(dut.now)
        if candidate(i) > t:  # a pause heard meanwhile holds it
            continue
        flow = flows[i]
        dut._emit(dut.switch.receive(flow.port, flow.frame, t))
        flow.sent += 1
        next_at[i] = t + gaps[i]
        wire_free[flow.port] = t + (len(flow.frame) + 24) * 8 / dut._speed_bps(flow.port)
    dut.run(end)


_PFC_HEAD = mac_bytes("01:80:c2:00:00:01")
