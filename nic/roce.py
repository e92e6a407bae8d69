"""RoCE v1/v2 on the wire, read with struct: the protocol's constants (ports, EtherTypes,
ECN codepoints, BTH opcodes, NAK codes) and the readers a NIC or a check runs on every frame.

The readers (``icrc``, ``verify_icrc``, ``classify``, ``ecn_of``) take raw Ethernet frames
without FCS and avoid scapy: they run on every frame a NIC or a check receives, where
scapy's tens of microseconds add up. Crafting with scapy is ``traffic.packets``, a floor up.
"""
from __future__ import annotations

import socket
import struct
from enum import IntEnum
from typing import NamedTuple
from zlib import crc32

from ..fabric.model.frames import MAC_CONTROL_PAUSE, MAC_CONTROL_PFC, parse_mac_control

ROCE_V2_PORT = 4791
ETH_P_ROCE_V1 = 0x8915
ETH_P_MAC_CONTROL = 0x8808
PFC_DST = "01:80:c2:00:00:01"
GRH_NEXT_HDR_BTH = 0x1B

NOT_ECT, ECT1, ECT0, CE = 0, 1, 2, 3

DSCP_ROCE = 26  # the usual lossless RoCE class (NVIDIA/SONiC default)
DSCP_CNP = 48  # the usual CNP class: strict priority, so CNPs overtake the congestion

AETH_CREDITS_INVALID = 0x1F  # "no end-to-end credit info", what NICs send in ACKs

_BTH_LEN = 12
_ICRC_LEN = 4
_ETH_P_8021Q = 0x8100
_ETH_P_IP = 0x0800
_ETH_P_IPV6 = 0x86DD


class Opcode(IntEnum):
    """BTH opcodes: transport base (RC 0x00, UD 0x60) + operation; CNP is RoCEv2's own."""

    RC_SEND_FIRST = 0x00
    RC_SEND_MIDDLE = 0x01
    RC_SEND_LAST = 0x02
    RC_SEND_LAST_WITH_IMMEDIATE = 0x03
    RC_SEND_ONLY = 0x04
    RC_SEND_ONLY_WITH_IMMEDIATE = 0x05
    RC_RDMA_WRITE_FIRST = 0x06
    RC_RDMA_WRITE_MIDDLE = 0x07
    RC_RDMA_WRITE_LAST = 0x08
    RC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09
    RC_RDMA_WRITE_ONLY = 0x0A
    RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0B
    RC_RDMA_READ_REQUEST = 0x0C
    RC_RDMA_READ_RESPONSE_FIRST = 0x0D
    RC_RDMA_READ_RESPONSE_MIDDLE = 0x0E
    RC_RDMA_READ_RESPONSE_LAST = 0x0F
    RC_RDMA_READ_RESPONSE_ONLY = 0x10
    RC_ACKNOWLEDGE = 0x11
    RC_ATOMIC_ACKNOWLEDGE = 0x12
    RC_COMPARE_SWAP = 0x13
    RC_FETCH_ADD = 0x14
    UD_SEND_ONLY = 0x64
    CNP = 0x81


class NakCode(IntEnum):
    """AETH NAK codes (low 5 bits of a 0b011xxxxx syndrome)."""

    PSN_SEQUENCE_ERROR = 0
    INVALID_REQUEST = 1
    REMOTE_ACCESS_ERROR = 2
    REMOTE_OPERATIONAL_ERROR = 3
    INVALID_RD_REQUEST = 4


class RoceInfo(NamedTuple):
    """What a check needs to know about one received RoCE frame."""

    version: int  # 1 or 2
    vid: int | None  # 802.1Q VLAN id, None when untagged
    pcp: int | None
    dscp: int  # from IPv4 TOS / IPv6 traffic class / GRH tclass
    ecn: int
    ttl: int  # TTL or hop limit
    src: str  # IP address, or GID for v1
    dst: str
    sport: int | None  # UDP source port (ECMP entropy); None for v1
    opcode: int
    dqpn: int
    psn: int
    becn: bool
    icrc_ok: bool


class _Layout(NamedTuple):
    version: int
    tci: int | None
    net: int  # offset of the IPv4 / IPv6 header or GRH
    ipv4: bool
    bth: int
    end: int  # offset of the ICRC = end of the covered bytes


# ICRC pseudo-LRH: a RoCE packet always carries a GRH (v1) or its IP stand-in (v2), so it is an
# IBA "global" packet, whose ICRC treats the router-rewritten LRH as 8 bytes of ones (IBA 7.8.1).
_LRH_CRC = crc32(b"\xff" * 8)


def _l2_header(frame: bytes) -> tuple[int, int, int | None] | None:
    """(ethertype, offset of the L3 header, 802.1Q TCI or None), at most one tag."""
    if len(frame) < 14:
        return None
    etype = (frame[12] << 8) | frame[13]
    if etype != _ETH_P_8021Q:
        return etype, 14, None
    if len(frame) < 18:
        return None
    tci, etype = struct.unpack_from("!HH", frame, 14)
    return etype, 18, tci


def _layout(frame: bytes) -> _Layout | None:
    """Locate the RoCE headers, trusting IP/GRH lengths over the frame's (Ethernet pad)."""
    l2 = _l2_header(frame)
    if l2 is None:
        return None
    etype, net, tci = l2
    if etype == _ETH_P_IP:
        if (len(frame) < net + 20 or frame[net] >> 4 != 4 or frame[net] & 0x0F < 5
                or frame[net + 9] != 17):
            return None
        total, frag = struct.unpack_from("!H2xH", frame, net + 2)
        if frag & 0x3FFF:  # a fragment is not a whole RoCE packet
            return None
        udp = net + (frame[net] & 0x0F) * 4
        version, length = 2, total
    elif etype in (_ETH_P_IPV6, ETH_P_ROCE_V1):
        if len(frame) < net + 40 or frame[net] >> 4 != 6:
            return None
        next_hdr = frame[net + 6]
        if etype == ETH_P_ROCE_V1:
            if next_hdr != GRH_NEXT_HDR_BTH:
                return None
            version, udp = 1, None
        elif next_hdr == 17:
            version, udp = 2, net + 40
        else:
            return None
        length = 40 + ((frame[net + 4] << 8) | frame[net + 5])
    else:
        return None
    end = net + length - _ICRC_LEN
    if end + _ICRC_LEN > len(frame):
        return None
    if udp is None:
        bth = net + 40
    else:
        if udp + 8 > end or (frame[udp + 2] << 8 | frame[udp + 3]) != ROCE_V2_PORT:
            return None
        bth = udp + 8
    if bth + _BTH_LEN > end:
        return None
    return _Layout(version, tci, net, etype == _ETH_P_IP, bth, end)


def _mask_ip(hdr: bytearray, ipv4: bool) -> None:
    """Set the IP (or GRH) fields routers rewrite to ones, as the ICRC covers them."""
    if ipv4:
        hdr[1] = 0xFF  # TOS: DSCP + ECN
        hdr[8] = 0xFF  # TTL
        hdr[10] = hdr[11] = 0xFF  # header checksum
    else:
        hdr[0] |= 0x0F  # traffic class, flow label (IPv6 or GRH)
        hdr[1:4] = b"\xff\xff\xff"
        hdr[7] = 0xFF  # hop limit


def _crc(frame: bytes, lay: _Layout) -> int:
    """CRC32 over pseudo-LRH + headers with variant fields set to ones + rest of the packet."""
    mv = memoryview(frame)
    hdr = bytearray(mv[lay.net:lay.bth + 5])
    _mask_ip(hdr, lay.ipv4)
    if lay.version == 2:
        udp = lay.bth - 8 - lay.net
        hdr[udp + 6:udp + 8] = b"\xff\xff"  # UDP checksum
    hdr[-1] = 0xFF  # BTH resv8a: FECN, BECN and 6 reserved bits, as rxe and scapy mask it
    crc = crc32(hdr, _LRH_CRC)
    return crc32(mv[lay.bth + 5:lay.end], crc)


def v2_headers_crc(ip_udp: bytes, ipv4: bool) -> int:
    """The ICRC's running CRC after the pseudo-LRH and a RoCEv2 frame's IP and UDP headers
    (masked as ``icrc`` masks them): the part a sender's frames of one length share, so it
    computes it once per length (``codec.Headers``) and goes on from the BTH (``bth_crc``).
    Compiled, the masking is C stores into the copy."""
    hdr = bytearray(ip_udp)
    _mask_ip(hdr, ipv4)
    size = len(hdr)
    hdr[size - 2] = hdr[size - 1] = 0xFF  # UDP checksum
    return crc32(hdr, _LRH_CRC)


def bth_crc(bth: bytes, crc: int) -> int:
    """The running CRC continued over a BTH, its resv8a byte masked as ``icrc`` does."""
    return crc32(bth[5:], crc32(bth[:4] + b"\xff", crc))


def _stored(crc: int) -> int:
    """The ICRC is sent least significant byte first; return the 4 bytes read big-endian."""
    return int.from_bytes(crc.to_bytes(4, "little"), "big")


def icrc(frame: bytes) -> int:
    """The ICRC a RoCE frame should carry, as its 4 trailer bytes read big-endian.

    That is how scapy's ``BTH.icrc`` and Wireshark's ``infiniband.invariant.crc`` show it.
    The trailer's current content is ignored. Raises ValueError if not RoCE.
    """
    lay = _layout(frame)
    if lay is None:
        raise ValueError("not a RoCEv1/v2 frame")
    return _stored(_crc(frame, lay))


def verify_icrc(frame: bytes) -> bool:
    """True when the frame is RoCE and its ICRC matches its contents."""
    lay = _layout(frame)
    return lay is not None and _icrc_ok(frame, lay)


def _icrc_ok(frame: bytes, lay: _Layout) -> bool:
    return frame[lay.end:lay.end + _ICRC_LEN] == _crc(frame, lay).to_bytes(4, "little")


def classify(frame: bytes) -> RoceInfo | None:
    """Decode a received RoCE frame's addressing, class and BTH; None when not RoCE."""
    lay = _layout(frame)
    if lay is None:
        return None
    n = lay.net
    if lay.ipv4:
        tclass, ttl = frame[n + 1], frame[n + 8]
        src = socket.inet_ntop(socket.AF_INET, frame[n + 12:n + 16])
        dst = socket.inet_ntop(socket.AF_INET, frame[n + 16:n + 20])
    else:
        tclass, ttl = ((frame[n] & 0x0F) << 4) | (frame[n + 1] >> 4), frame[n + 7]
        src = socket.inet_ntop(socket.AF_INET6, frame[n + 8:n + 24])
        dst = socket.inet_ntop(socket.AF_INET6, frame[n + 24:n + 40])
    sport = None if lay.version == 1 else struct.unpack_from("!H", frame, lay.bth - 8)[0]
    opcode, _, _, qp_word, psn_word = struct.unpack_from("!BBHII", frame, lay.bth)
    return RoceInfo(
        version=lay.version,
        vid=None if lay.tci is None else lay.tci & 0x0FFF,
        pcp=None if lay.tci is None else lay.tci >> 13,
        dscp=tclass >> 2,
        ecn=tclass & 3,
        ttl=ttl,
        src=src,
        dst=dst,
        sport=sport,
        opcode=opcode,
        dqpn=qp_word & 0xFFFFFF,
        psn=psn_word & 0xFFFFFF,
        becn=bool(qp_word & 0x40000000),
        icrc_ok=_icrc_ok(frame, lay),
    )


def ecn_of(frame: bytes) -> int | None:
    """ECN bits of an IPv4/IPv6 (or GRH) frame, one tag allowed; None for anything else."""
    l2 = _l2_header(frame)
    if l2 is None:
        return None
    etype, net, _ = l2
    if etype == _ETH_P_IP and len(frame) > net + 1:
        return frame[net + 1] & 3
    if etype in (_ETH_P_IPV6, ETH_P_ROCE_V1) and len(frame) > net + 1:
        return (frame[net + 1] >> 4) & 3
    return None


def mac_control(frame: bytes) -> tuple[int, dict[int, int]] | None:
    """A MAC Control frame, tagged or not, as the switch model reads it
    (``fabric.model.frames.parse_mac_control``): (opcode, {priority: quanta}), or None.
    Asked of every frame a NIC receives: an untagged one of another type is answered from
    its EtherType's two bytes."""
    if len(frame) >= 14 and frame[12] != 0x88 and frame[12] != 0x81:  # 0x8808, 0x8100
        return None
    l2 = _l2_header(frame)
    if l2 is None or l2[0] != ETH_P_MAC_CONTROL:
        return None
    return parse_mac_control(frame, l2[1])


def parse_pfc(frame: bytes) -> dict[int, int] | None:
    """Priority -> pause quanta for the classes a PFC frame enables; None when not PFC."""
    mc = mac_control(frame)
    return mc[1] if mc is not None and mc[0] == MAC_CONTROL_PFC else None


def is_pause(frame: bytes) -> bool:
    """True for an 802.3x global PAUSE frame (MAC Control opcode 0x0001)."""
    mc = mac_control(frame)
    return mc is not None and mc[0] == MAC_CONTROL_PAUSE
