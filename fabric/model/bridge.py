"""Per-VLAN learning bridge: FDB with aging, flooding, and egress tagging per member.

Each VLAN is its own broadcast domain with its own forwarding database (MAC -> port).
Frames move through the bridge with their 802.1Q tag inline; the egress copy for a
member is re-tagged to that member's mode:

- ``tagged``: an 802.1Q tag with the VLAN's VID and the frame's priority bits (PCP/DEI
  from the ingress tag, 0 when the frame arrived untagged);
- ``untagged``: no tag;
- ``priority_tagged``: a tag with VID 0 and the frame's priority bits (how a lossless
  priority survives on an access port).

The bridge appends ``(port, frame, cls)`` to the caller's ``out`` list, ``cls`` being the
frame's ``(tc, pg)`` from ingress classification (``classify``), and returns a disposition
(``forwarded`` or a drop reason); it never transmits itself.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import cython

from .counters import FORWARDED, MTU_EXCEEDED, NO_EGRESS, PORT_DOWN, SAME_PORT
from .frames import MIN_FRAME_LEN, VLAN_TCI, ETH_P_8021Q, pack_u16, routed_ipv4

if TYPE_CHECKING:
    from .ports import PortState

# Member tagging modes as small ints (compared per packet).
UNTAGGED = 0
TAGGED = 1
PRIORITY_TAGGED = 2
MODES = {"untagged": UNTAGGED, "tagged": TAGGED, "priority_tagged": PRIORITY_TAGGED}
MODE_NAMES = {v: k for k, v in MODES.items()}

FDB_AGE_S = 300.0  # SONiC's default FDB aging time
# the least Ethernet payload, a C constant when compiled (a routed frame's padding is
# reckoned per frame)
MIN_PAYLOAD = cython.declare(cython.Py_ssize_t, MIN_FRAME_LEN - 14)


class VlanBridge:
    """One VLAN: its members with their tagging modes, its FDB and its SVI (if any)."""

    __slots__ = ("name", "vid", "members", "mode_of", "fdb", "svi", "age_s", "_tags")

    def __init__(self, name: str, vid: int, age_s: float = FDB_AGE_S) -> None:
        self.name = name
        self.vid = vid
        self.members: list[tuple[PortState, int]] = []  # in configuration order
        self.mode_of: dict[PortState, int] = {}
        # MAC -> [port, last seen]. A list so a refresh is one store, not a new object.
        self.fdb: dict[bytes, list] = {}
        self.svi = None  # the L3Interface routing for this VLAN, if VLAN_INTERFACE has one
        self.age_s = age_s
        self._tags: dict[int, bytes] = {}  # (mode, prio) -> tag bytes, built on first use

    def add_member(self, port: PortState, mode: int) -> None:
        self.members.append((port, mode))
        self.mode_of[port] = mode

    @property
    def up(self) -> bool:
        """An SVI is operationally up while any member port is up (as in SONiC)."""
        return any(port.up for port, _ in self.members)

    # --- FDB -------------------------------------------------------------------------

    def learn(self, mac: bytes, port: PortState, now: float) -> None:
        """Note that ``mac`` (a unicast source) was seen on ``port`` at ``now``."""
        entry = self.fdb.get(mac)
        if entry is not None and entry[0] is port:
            entry[1] = now
        else:  # new station, or it moved
            self.fdb[mac] = [port, now]

    def lookup(self, mac: bytes, now: float) -> PortState | None:
        """The port ``mac`` was last seen on, unless that was more than the aging time ago."""
        entry = self.fdb.get(mac)
        if entry is None:
            return None
        if now - entry[1] > self.age_s:
            del self.fdb[mac]
            return None
        return entry[0]

    def sweep(self, now: float) -> None:
        """Forget entries older than the aging time (lookups do it lazily; this keeps the
        table that counters() shows honest)."""
        stale = [mac for mac, (_, seen) in self.fdb.items() if now - seen > self.age_s]
        for mac in stale:
            del self.fdb[mac]

    def flush_port(self, port: PortState) -> None:
        """Forget every MAC on ``port`` (its link went down: stations may reappear elsewhere)."""
        for mac in [m for m, entry in self.fdb.items() if entry[0] is port]:
            del self.fdb[mac]

    # --- egress tagging ----------------------------------------------------------------

    def _tag(self, mode: int, prio: int) -> bytes:
        """The 802.1Q tag for ``mode`` with priority bits ``prio`` (PCP << 1 | DEI)."""
        key = mode << 4 | prio
        tag = self._tags.get(key)
        if tag is None:
            vid = self.vid if mode == TAGGED else 0
            tag = self._tags[key] = VLAN_TCI.pack(ETH_P_8021Q, prio << 12 | vid)
        return tag

    def retag(self, frame: bytes, off: int, prio: int, mode: int) -> bytes:
        """``frame`` (its L2 payload starting at ``off``: 14 untagged, 18 tagged) as it
        must leave a member with ``mode``. Returns the frame itself when nothing changes;
        a frame that shrinks below 60 bytes by losing its tag is padded back up."""
        if mode == UNTAGGED:
            if off == 14:
                return frame
            frame = frame[:12] + frame[16:]
            return frame if len(frame) >= MIN_FRAME_LEN else frame + bytes(
                MIN_FRAME_LEN - len(frame))
        tag = self._tag(mode, prio)
        if off == 18:
            return frame if frame[12:16] == tag else frame[:12] + tag + frame[16:]
        return frame[:12] + tag + frame[12:]

    def encapsulate(self, dst: bytes, src: bytes, ethertype: int, payload: bytes, prio: int,
                    mode: int) -> bytes:
        """A frame built by the switch (routed or originated) for a member with ``mode``,
        padded to the 60-byte minimum before any tag goes in. One join: the payload is
        copied once."""
        short = MIN_PAYLOAD - len(payload)
        pad = bytes(short) if short > 0 else b""
        if mode == UNTAGGED:
            return b"".join((dst, src, pack_u16(ethertype), payload, pad))
        return b"".join((dst, src, self._tag(mode, prio), pack_u16(ethertype), payload, pad))

    # --- forwarding ----------------------------------------------------------------------

    def forward(self, ingress: PortState, dst: bytes, frame: bytes, off: int, prio: int,
                cls: tuple, out: list, now: float) -> str:
        """Bridge a unicast frame: to its learned port, or flooded when unknown."""
        port = self.lookup(dst, now)
        if port is None:
            return self.flood(ingress, frame, off, prio, cls, out)
        if port is ingress:
            return SAME_PORT  # the destination is behind the port it came from: filter
        if not port.up:
            return PORT_DOWN
        if len(frame) - off > port.mtu:
            return MTU_EXCEEDED
        out.append((port, self.retag(frame, off, prio, self.mode_of[port]), cls))
        return FORWARDED

    def flood(self, ingress: PortState | None, frame: bytes, off: int, prio: int, cls: tuple,
              out: list) -> str:
        """Copy a frame to every other up member (broadcast, multicast, unknown unicast).

        Each tagging variant is built at most once. Members whose MTU the frame exceeds
        are skipped; ``no_egress``/``mtu_exceeded`` when not a single copy went out.
        """
        variants: dict[int, bytes] = {}
        size = len(frame) - off
        sent = too_big = 0
        for port, mode in self.members:
            if port is ingress or not port.up:
                continue
            if size > port.mtu:
                too_big += 1
                continue
            copy = variants.get(mode)
            if copy is None:
                copy = variants[mode] = self.retag(frame, off, prio, mode)
            out.append((port, copy, cls))
            sent += 1
        if sent:
            return FORWARDED
        return MTU_EXCEEDED if too_big else NO_EGRESS

    def send_routed(self, dst: bytes, head: bytes, frame: bytes, off: int, total: int,
                    prio: int, cls: tuple, out: list, now: float) -> str | None:
        """``send``'s unicast case for an IPv4 packet the router forwards (``total`` bytes at
        ``off`` of ``frame``) to ``dst``, whose untagged header is ``head``: the frame built
        in one copy (``frames.routed_ipv4``), where the packet was copied out of the frame
        and again into its encapsulation. None when ``dst`` is not in the FDB: ``send``
        floods it."""
        port = None if dst[0] & 1 else self.lookup(dst, now)
        if port is None:
            return None
        if not port.up:
            return PORT_DOWN
        if total > port.mtu:
            return MTU_EXCEEDED
        mode = self.mode_of[port]
        if mode != UNTAGGED:
            head = b"".join((head[:12], self._tag(mode, prio), head[12:]))
        routed = routed_ipv4(head, frame, off, total)
        short = MIN_PAYLOAD - total
        if short > 0:  # padded before any tag, as ``encapsulate`` pads
            routed += bytes(short)
        out.append((port, routed, cls))
        return FORWARDED

    def send(self, dst: bytes, src: bytes, ethertype: int, payload: bytes, prio: int,
             cls: tuple, out: list, now: float) -> str:
        """The router's L2 egress on this VLAN's SVI: to the port where ``dst`` was
        learned, or to every up member when ``dst`` is broadcast or not (or no longer)
        in the FDB, each copy tagged for its member. A tagged copy carries ``prio``: a routed
        frame keeps its ingress PCP/DEI (no TC_TO_DOT1P map to remark it), originated ones 0."""
        port = None if dst[0] & 1 else self.lookup(dst, now)
        if port is not None:
            if not port.up:
                return PORT_DOWN
            if len(payload) > port.mtu:
                return MTU_EXCEEDED
            out.append((port, self.encapsulate(dst, src, ethertype, payload, prio,
                                               self.mode_of[port]), cls))
            return FORWARDED
        variants: dict[int, bytes] = {}
        sent = too_big = 0
        for port, mode in self.members:
            if not port.up:
                continue
            if len(payload) > port.mtu:
                too_big += 1
                continue
            copy = variants.get(mode)
            if copy is None:
                copy = variants[mode] = self.encapsulate(dst, src, ethertype, payload, prio,
                                                         mode)
            out.append((port, copy, cls))
            sent += 1
        if sent:
            return FORWARDED
        return MTU_EXCEEDED if too_big else NO_EGRESS
