"""Wire formats the switch reads and writes: Ethernet, 802.1Q, IPv4, ARP, ICMP and MAC
control (PFC, PAUSE).

Parsing is done with precompiled ``struct`` layouts read straight out of the received
``bytes`` (``unpack_from``, no copies, no per-packet objects): the forwarding hot path
runs once per packet in Python. Builders are used on the slow path (frames the switch
originates: ARP, ICMP) and by tests.

Addresses are carried as ``bytes`` (MACs, 6 bytes) and ``int`` (IPv4), the forms the
hot path compares and hashes cheapest; ``mac_text``/``ip_text`` render them for humans.
"""
from __future__ import annotations

import socket
import struct
from typing import NamedTuple

import cython

# EtherTypes
ETH_P_IPV4 = 0x0800
ETH_P_ARP = 0x0806
ETH_P_8021Q = 0x8100
ETH_P_IPV6 = 0x86DD
ETH_P_MAC_CONTROL = 0x8808  # PAUSE (802.3x) and PFC (802.1Qbb)
ETH_P_LLDP = 0x88CC
ETH_P_ROCEV1 = 0x8915  # RoCEv1: GRH + IB transport directly over Ethernet

# IP protocols
IPPROTO_ICMP = 1
IPPROTO_TCP = 6
IPPROTO_UDP = 17

# ICMP types
ICMP_ECHO_REPLY = 0
ICMP_DEST_UNREACHABLE = 3
ICMP_REDIRECT = 5
ICMP_ECHO_REQUEST = 8
ICMP_TIME_EXCEEDED = 11
ICMP_PARAMETER_PROBLEM = 12
ICMP_ERROR_TYPES = frozenset({ICMP_DEST_UNREACHABLE, 4, ICMP_REDIRECT, ICMP_TIME_EXCEEDED,
                              ICMP_PARAMETER_PROBLEM})

# MAC control opcodes
MAC_CONTROL_PAUSE = 0x0001  # 802.3x: every priority
MAC_CONTROL_PFC = 0x0101  # 802.1Qbb: per priority

ARP_REQUEST = 1
ARP_REPLY = 2

BROADCAST_MAC = b"\xff" * 6
ZERO_MAC = b"\x00" * 6
# 01:80:c2:00:00:00..0f: IEEE 802.1 reserved addresses that a bridge must never forward
# (STP, PAUSE/PFC, LACP, 802.1X, LLDP, ...).
LINK_LOCAL_PREFIX = b"\x01\x80\xc2\x00\x00"
PFC_MAC = b"\x01\x80\xc2\x00\x00\x01"

ETH_HEADER_LEN = 14
VLAN_TAG_LEN = 4
MIN_FRAME_LEN = 60  # without FCS: what the switch pads the frames it originates to

# Layouts (network byte order)
ETHERTYPE = struct.Struct("!H")
VLAN_TCI = struct.Struct("!HH")  # after the MACs: TPID 0x8100, TCI; then the inner EtherType
IPV4_HEADER = struct.Struct("!BBHHHBBHII")  # ver/ihl tos len id frag ttl proto csum src dst
ARP_IPV4 = struct.Struct("!HHBBH6sI6sI")  # htype ptype hlen plen op sha spa tha tpa
ICMP_HEADER = struct.Struct("!BBH")  # type code checksum
TTL_PROTO_CSUM = struct.Struct("!BBH")
MAC_CONTROL = struct.Struct("!HH")  # opcode, then PAUSE quanta or the PFC class-enable vector
PFC_TIMES = struct.Struct("!8H")  # PFC: pause quanta of priorities 0..7
U16 = struct.Struct("!H")
U32 = struct.Struct("!I")
# the per-frame packing, bound once: compiled, ``U16.pack`` would look ``pack`` up by name
pack_u16 = U16.pack
_pack_ttl_proto_csum = TTL_PROTO_CSUM.pack


# --- addresses -----------------------------------------------------------------------

def mac_bytes(mac: str) -> bytes:
    """``"02:52:4c:00:01:01"`` -> 6 bytes."""
    raw = bytes.fromhex(mac.replace(":", "").replace("-", ""))
    if len(raw) != 6:
        raise ValueError(f"{mac!r} is not a MAC address")
    return raw


def mac_text(mac: bytes) -> str:
    """6 bytes -> ``"02:52:4c:00:01:01"``."""
    return mac.hex(":")


def ip_int(ip: str) -> int:
    """``"10.1.1.1"`` -> int."""
    return U32.unpack(socket.inet_aton(ip))[0]


def ip_text(ip: int) -> str:
    """int -> ``"10.1.1.1"``."""
    return socket.inet_ntoa(U32.pack(ip))


def is_link_local_control(dst: bytes) -> bool:
    """True for 01:80:c2:00:00:00..0f, which bridges consume and never forward."""
    return dst[:5] == LINK_LOCAL_PREFIX and dst[5] < 0x10


# --- Ethernet / 802.1Q -----------------------------------------------------------------

class L2Header(NamedTuple):
    """What ``parse_l2`` finds: addresses, EtherType after any tag, tag fields, payload offset."""

    dst: bytes
    src: bytes
    ethertype: int
    tagged: bool
    vid: int
    pcp: int
    dei: int
    payload_offset: int


def parse_l2(frame: bytes) -> L2Header:
    """Parse the Ethernet header and one 802.1Q tag (for tests and the slow path)."""
    if len(frame) < ETH_HEADER_LEN:
        raise ValueError("frame shorter than an Ethernet header")
    (ethertype,) = ETHERTYPE.unpack_from(frame, 12)
    if ethertype == ETH_P_8021Q:
        if len(frame) < ETH_HEADER_LEN + VLAN_TAG_LEN:
            raise ValueError("frame shorter than an 802.1Q header")
        tci, inner = VLAN_TCI.unpack_from(frame, 14)
        return L2Header(frame[0:6], frame[6:12], inner, True, tci & 0x0FFF, tci >> 13,
                        (tci >> 12) & 1, 18)
    return L2Header(frame[0:6], frame[6:12], ethertype, False, 0, 0, 0, 14)


def vlan_tag(vid: int, pcp: int = 0, dei: int = 0) -> bytes:
    """The 4 bytes of an 802.1Q tag (TPID + TCI); vid 0 makes a priority tag."""
    return VLAN_TCI.pack(ETH_P_8021Q, (pcp & 7) << 13 | (dei & 1) << 12 | (vid & 0x0FFF))


def ethernet_frame(dst: bytes, src: bytes, ethertype: int, payload: bytes,
                   tag: bytes = b"", pad: bool = False) -> bytes:
    """A complete frame; ``tag`` from ``vlan_tag`` goes after the MACs.

    ``pad`` brings the untagged length up to 60 bytes before the tag is inserted, as a
    NIC pads the frames a host stack originates.
    """
    frame = dst + src + ETHERTYPE.pack(ethertype) + payload
    if pad and len(frame) < MIN_FRAME_LEN:
        frame += bytes(MIN_FRAME_LEN - len(frame))
    if tag:
        frame = frame[:12] + tag + frame[12:]
    return frame


# --- Internet checksum -------------------------------------------------------------------

def internet_checksum(data: bytes) -> int:
    """RFC 1071 checksum of ``data`` (odd lengths padded with a zero byte).

    Uses 2**16 == 1 (mod 0xffff): the one's-complement sum of the 16-bit words is the
    whole buffer read as one big integer, modulo 0xffff, except that a non-zero buffer
    whose sum is a multiple of 0xffff sums to 0xffff (one's complement has no +0 result
    from adding non-zero values). One C-level conversion instead of a Python loop.
    """
    if len(data) & 1:
        data = bytes(data) + b"\x00"
    value = int.from_bytes(data, "big")
    total = value % 0xFFFF
    if total == 0 and value:
        total = 0xFFFF
    return 0xFFFF - total


def checksum_adjust(checksum: int, old_word: int, new_word: int) -> int:
    """RFC 1624 eqn. 3: the checksum after one 16-bit word changes from old to new.

    HC' = ~(~HC + ~m + m'). Unlike eqn. 2 it never turns a valid checksum into the
    0x0000/0xffff pair that broke RFC 1141 updates.
    """
    total = (~checksum & 0xFFFF) + (~old_word & 0xFFFF) + new_word
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ttl_decrement(checksum: int, ttl: int, proto: int) -> bytes:
    """The new TTL/protocol/checksum bytes (IPv4 header offsets 8..11) after TTL - 1."""
    # checksum_adjust(checksum, old, old - 0x100), inlined and reduced: this is per routed
    # packet. ~old + old is 0xFFFF whatever the TTL, so the sum is ~checksum + 0xFEFF, at
    # most 0x1FEFE, which one fold brings into 16 bits.
    total = (~checksum & 0xFFFF) + 0xFEFF
    return _pack_ttl_proto_csum(ttl - 1, proto, ~((total & 0xFFFF) + (total >> 16)) & 0xFFFF)


def bytes_at(frame: bytes, start: int, n: int) -> bytes:
    """``frame[start:start + n]``, a field of a frame that holds it (a MAC, an address):
    compiled, one copy, where the slice made a slice object and two ints first."""
    if not cython.compiled or start < 0 or n < 0 or start + n > len(frame):
        return frame[start:start + n]
    return PyBytes_FromStringAndSize(PyBytes_AS_STRING(frame) + start, n)


@cython.locals(size=cython.Py_ssize_t, at=cython.p_char, ip=cython.p_uchar,
               csum=cython.uint, total_sum=cython.uint)
def routed_ipv4(head: bytes, frame: bytes, off: int, total: int) -> bytes:
    """``head`` (the next hop's Ethernet header, or nothing) then the IPv4 packet of
    ``total`` bytes at ``off`` of ``frame``, its TTL decremented and its checksum updated as
    ``ttl_decrement`` does: a routed frame. Compiled, its bytes are copied once into the new
    frame, where slices and a join copied the payload twice. The caller has checked the
    header; a packet that does not fit the frame or has no TTL left is a ValueError."""
    if off < 0 or total < 20 or off + total > len(frame) or not frame[off + 8]:
        raise ValueError(f"no routable IPv4 packet of {total} bytes at {off} of the frame")
    if not cython.compiled:
        return b"".join((head, frame[off:off + 8],
                         ttl_decrement(frame[off + 10] << 8 | frame[off + 11], frame[off + 8],
                                       frame[off + 9]),
                         frame[off + 12:off + total]))
    size = len(head)
    out = PyBytes_FromStringAndSize(cython.NULL, size + total)
    at = PyBytes_AS_STRING(out)
    ip = cython.cast(cython.p_uchar, PyBytes_AS_STRING(frame)) + off
    memcpy(at, PyBytes_AS_STRING(head), size)
    memcpy(at + size, ip, total)
    at[size + 8] = ip[8] - 1
    total_sum = (~(ip[10] << 8 | ip[11]) & 0xFFFF) + 0xFEFF  # ttl_decrement's sum
    csum = ~((total_sum & 0xFFFF) + (total_sum >> 16)) & 0xFFFF
    at[size + 10] = csum >> 8
    at[size + 11] = csum & 0xFF
    return out


# --- IPv4 ---------------------------------------------------------------------------------

def ipv4_packet(src: int, dst: int, proto: int, payload: bytes, ttl: int = 64,
                tos: int = 0, ident: int = 0, dont_fragment: bool = False) -> bytes:
    """An option-less IPv4 packet with a correct header checksum."""
    header = IPV4_HEADER.pack(0x45, tos, 20 + len(payload), ident,
                              0x4000 if dont_fragment else 0, ttl, proto, 0, src, dst)
    return header[:10] + U16.pack(internet_checksum(header)) + header[12:] + payload


# --- ARP ------------------------------------------------------------------------------------

class ArpPacket(NamedTuple):
    op: int
    sha: bytes
    spa: int
    tha: bytes
    tpa: int


def parse_arp(data: bytes, offset: int = 0) -> ArpPacket | None:
    """An Ethernet/IPv4 ARP packet, or None if it is anything else or truncated."""
    if len(data) < offset + ARP_IPV4.size:
        return None
    htype, ptype, hlen, plen, op, sha, spa, tha, tpa = ARP_IPV4.unpack_from(data, offset)
    if htype != 1 or ptype != ETH_P_IPV4 or hlen != 6 or plen != 4:
        return None
    return ArpPacket(op, sha, spa, tha, tpa)


def arp_packet(op: int, sha: bytes, spa: int, tha: bytes, tpa: int) -> bytes:
    """The 28-byte Ethernet/IPv4 ARP body."""
    return ARP_IPV4.pack(1, ETH_P_IPV4, 6, 4, op, sha, spa, tha, tpa)


# --- ICMP -----------------------------------------------------------------------------------

def icmp_message(icmp_type: int, code: int, rest: bytes) -> bytes:
    """An ICMP message with its checksum; ``rest`` is everything after the checksum."""
    body = ICMP_HEADER.pack(icmp_type, code, 0) + rest
    return body[:2] + U16.pack(internet_checksum(body)) + body[4:]


def icmp_echo_reply(request: bytes) -> bytes:
    """The echo reply to an ICMP echo request message (identifier, sequence, data kept).

    Only the type changes (8 -> 0), so the checksum is adjusted (RFC 1624), not
    recomputed over a possibly large payload.
    """
    (csum,) = U16.unpack_from(request, 2)
    old_word = request[0] << 8 | request[1]
    new_word = ICMP_ECHO_REPLY << 8 | request[1]
    return (bytes((ICMP_ECHO_REPLY, request[1])) +
            U16.pack(checksum_adjust(csum, old_word, new_word)) + request[4:])


def icmp_error(icmp_type: int, code: int, original: bytes, limit: int = 576) -> bytes:
    """An ICMP error quoting ``original`` (an IPv4 packet) as RFC 1812 4.3.2.3 asks:
    as much of it as fits in a ``limit``-byte IP datagram (20 IP + 8 ICMP bytes + quote)."""
    return icmp_message(icmp_type, code, b"\x00\x00\x00\x00" + original[:limit - 28])


# --- MAC control: PFC and PAUSE -------------------------------------------------------------

def pfc_frame(src: bytes, quanta: dict[int, int]) -> bytes:
    """An 802.1Qbb PFC frame from ``src`` pausing each priority of ``quanta`` for its quanta
    (0 resumes), padded to 60 bytes; the other classes are left out of the enable vector."""
    vector = 0
    for priority in quanta:
        vector |= 1 << priority
    frame = (PFC_MAC + src + ETHERTYPE.pack(ETH_P_MAC_CONTROL)
             + MAC_CONTROL.pack(MAC_CONTROL_PFC, vector)
             + PFC_TIMES.pack(*(quanta.get(p, 0) for p in range(8))))
    return frame + bytes(MIN_FRAME_LEN - len(frame))


def parse_mac_control(frame: bytes, offset: int) -> tuple[int, dict[int, int]] | None:
    """A MAC control frame whose opcode starts at ``offset``: ``(MAC_CONTROL_PFC,
    {priority: quanta})`` for the enabled classes (empty for a vector of 0),
    ``(MAC_CONTROL_PAUSE, {0: quanta})``, or None for any other or truncated frame."""
    if len(frame) < offset + MAC_CONTROL.size:
        return None
    opcode, field = MAC_CONTROL.unpack_from(frame, offset)
    if opcode == MAC_CONTROL_PAUSE:
        return opcode, {0: field}
    if opcode != MAC_CONTROL_PFC or len(frame) < offset + 4 + PFC_TIMES.size:
        return None
    times = PFC_TIMES.unpack_from(frame, offset + 4)
    return opcode, {p: times[p] for p in range(8) if field >> p & 1}


# --- IPv6, ICMPv6 and neighbour discovery ----------------------------------------------------
#
# IPv6 addresses are ints too (128-bit); ``ip6_bytes``/``ip6_text`` convert.

IPPROTO_ICMPV6 = 58
IPV6_HEADER = struct.Struct("!IHBB16s16s")  # ver/tc/flow, payload length, next header, hlim
IPV6_HEADER_LEN = 40
IPV6_MIN_MTU = 1280  # what an ICMPv6 error may fill (RFC 4443 2.4 (c))
ICMPV6_TIME_EXCEEDED = 3
ICMPV6_ECHO_REQUEST = 128
ICMPV6_ECHO_REPLY = 129
NDP_NS = 135
NDP_NA = 136
NDP_HOP_LIMIT = 255  # RFC 4861: ND messages with any other hop limit are forged
NDP_OPT_SOURCE_LL = 1
NDP_OPT_TARGET_LL = 2
NA_ROUTER, NA_SOLICITED, NA_OVERRIDE = 0x80, 0x40, 0x20
ALL_NODES6 = 0xFF02 << 112 | 1
SOLICITED_NODE6 = 0xFF02 << 112 | 1 << 32 | 0xFF << 24  # ff02::1:ff00:0/104
LINK_LOCAL6 = 0xFE80 << 112
IPV6_MULTICAST_MAC_PREFIX = b"\x33\x33"


def ip6_bytes(ip: int) -> bytes:
    return ip.to_bytes(16, "big")


def ip6_text(ip: int) -> str:
    return socket.inet_ntop(socket.AF_INET6, ip6_bytes(ip))


def multicast_mac6(ip: int) -> bytes:
    """RFC 2464: 33:33 and the address's low 32 bits."""
    return IPV6_MULTICAST_MAC_PREFIX + (ip & 0xFFFFFFFF).to_bytes(4, "big")


def solicited_node6(ip: int) -> int:
    """The solicited-node multicast group of ``ip`` (ff02::1:ffXX:XXXX), where NS for it go."""
    return SOLICITED_NODE6 | ip & 0xFFFFFF


def link_local6(mac: bytes) -> int:
    """fe80::/64 with the modified EUI-64 of ``mac`` (U/L bit flipped), RFC 4291 app. A."""
    eui = bytes((mac[0] ^ 0x02,)) + mac[1:3] + b"\xff\xfe" + mac[3:6]
    return LINK_LOCAL6 | int.from_bytes(eui, "big")


def ipv6_packet(src: int, dst: int, next_header: int, payload: bytes, hop_limit: int = 64,
                tclass: int = 0) -> bytes:
    """A 40-byte IPv6 header (flow label 0, no extension headers) and ``payload``."""
    return IPV6_HEADER.pack(6 << 28 | tclass << 20, len(payload), next_header, hop_limit,
                            ip6_bytes(src), ip6_bytes(dst)) + payload


def icmpv6_message(src: int, dst: int, icmp_type: int, code: int, rest: bytes) -> bytes:
    """An ICMPv6 message with its checksum over the RFC 8200 8.1 pseudo-header."""
    body = ICMP_HEADER.pack(icmp_type, code, 0) + rest
    pseudo = ip6_bytes(src) + ip6_bytes(dst) + U32.pack(len(body)) + b"\x00\x00\x00" \
        + bytes((IPPROTO_ICMPV6,))
    return body[:2] + U16.pack(internet_checksum(pseudo + body)) + body[4:]


def icmpv6_valid(packet: bytes, offset: int, length: int) -> bool:
    """Whether the ICMPv6 message at ``offset`` (``length`` bytes) of an IPv6 packet whose
    header starts at ``offset - 40`` has a correct checksum."""
    src = packet[offset - 32:offset - 16]
    dst = packet[offset - 16:offset]
    pseudo = src + dst + U32.pack(length) + b"\x00\x00\x00" + bytes((IPPROTO_ICMPV6,))
    return internet_checksum(pseudo + packet[offset:offset + length]) == 0


def neighbor_solicitation(src: int, target: int, mac: bytes) -> bytes:
    """An IPv6 NS for ``target`` to its solicited-node group, from ``src`` (source link-layer
    address option ``mac``): the IPv6 packet, to go to ``multicast_mac6`` of that group."""
    dst = solicited_node6(target)
    body = icmpv6_message(src, dst, NDP_NS, 0, bytes(4) + ip6_bytes(target)
                          + bytes((NDP_OPT_SOURCE_LL, 1)) + mac)
    return ipv6_packet(src, dst, IPPROTO_ICMPV6, body, NDP_HOP_LIMIT)


def neighbor_advertisement(src: int, dst: int, target: int, mac: bytes, flags: int) -> bytes:
    """An IPv6 NA saying ``target`` is at ``mac`` (target link-layer address option)."""
    body = icmpv6_message(src, dst, NDP_NA, 0, bytes((flags, 0, 0, 0)) + ip6_bytes(target)
                          + bytes((NDP_OPT_TARGET_LL, 1)) + mac)
    return ipv6_packet(src, dst, IPPROTO_ICMPV6, body, NDP_HOP_LIMIT)


class NdpMessage(NamedTuple):
    """An NS or NA: its type, flags (NA), target and the link-layer address option."""

    type: int
    flags: int
    target: int
    lladdr: bytes | None  # source (NS) or target (NA) link-layer address option


def parse_ndp(packet: bytes, offset: int, length: int) -> NdpMessage | None:
    """The NS/NA at ``offset`` (ICMPv6 header, ``length`` bytes), or None when it is not
    one or is malformed (RFC 4861 7.1.1: code 0, at least 24 bytes, options of non-zero
    length within the message)."""
    if length < 24 or packet[offset + 1] != 0 or packet[offset] not in (NDP_NS, NDP_NA):
        return None
    kind = packet[offset]
    target = int.from_bytes(packet[offset + 8:offset + 24], "big")
    want = NDP_OPT_SOURCE_LL if kind == NDP_NS else NDP_OPT_TARGET_LL
    lladdr = None
    at, end = offset + 24, offset + length
    while at + 2 <= end:
        opt_len = packet[at + 1] * 8
        if opt_len == 0 or at + opt_len > end:
            return None
        if packet[at] == want and opt_len >= 8:
            lladdr = packet[at + 2:at + 8]
        at += opt_len
    return NdpMessage(kind, packet[offset + 4], target, lladdr)


def icmpv6_echo_reply(src: int, dst: int, request: bytes) -> bytes:
    """The echo reply message (type 129) to an echo request, identifier, sequence and
    data kept; the checksum is recomputed since the pseudo-header addresses may differ."""
    return icmpv6_message(src, dst, ICMPV6_ECHO_REPLY, 0, request[4:])


def icmpv6_error(src: int, dst: int, icmp_type: int, code: int, original: bytes) -> bytes:
    """An ICMPv6 error quoting as much of ``original`` as fits a 1280-byte packet."""
    quote = original[:IPV6_MIN_MTU - IPV6_HEADER_LEN - 8]
    return icmpv6_message(src, dst, icmp_type, code, bytes(4) + quote)
