"""RoCE v1/v2, PFC and ECN packets: scapy to craft them, struct to read them fast.

Builders return scapy packets with a correct ICRC, so a frame we send is one a RoCE NIC
(or the Linux rxe driver) would accept. The readers (`icrc`, `verify_icrc`, `classify`,
`parse_pfc`, `is_pause`, `ecn_of`) take raw Ethernet frames without FCS and avoid scapy:
they run on every frame a check receives, where scapy's tens of microseconds add up.
"""
from __future__ import annotations

import dataclasses
import socket
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from ipaddress import IPv6Address, ip_address
from typing import Literal, NamedTuple

from scapy.contrib.mac_control import MACControlClassBasedFlowControl, MACControlPause
from scapy.contrib.roce import AETH, BTH, GRH, CNPPadding
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet, Raw, bind_layers

# scapy binds GRH to Ether only; without this a VLAN-tagged RoCEv1 frame dissects as Raw.
bind_layers(Dot1Q, GRH, type=0x8915)

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
_MACC_PAUSE = 0x0001
_MACC_PFC = 0x0101


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


Part = Literal["only", "first", "middle", "last"]

_SEND_OPCODES = {
    "first": Opcode.RC_SEND_FIRST,
    "middle": Opcode.RC_SEND_MIDDLE,
    "last": Opcode.RC_SEND_LAST,
    "only": Opcode.RC_SEND_ONLY,
}
_WRITE_OPCODES = {
    "first": Opcode.RC_RDMA_WRITE_FIRST,
    "middle": Opcode.RC_RDMA_WRITE_MIDDLE,
    "last": Opcode.RC_RDMA_WRITE_LAST,
    "only": Opcode.RC_RDMA_WRITE_ONLY,
}


# --------------------------------------------------------------------------- crafting


@dataclass(frozen=True)
class Flow:
    """What stays the same across the packets of one direction of a QP connection.

    ``version`` 2 needs ``src_ip``/``dst_ip`` (IPv4 or IPv6; the family picks the header).
    ``version`` 1 reads them as GIDs and, when absent, derives link-local GIDs from the
    MACs as RoCEv1 NICs do; ``dscp``/``ttl`` become the GRH traffic class and hop limit,
    ``sport`` is unused. ``pcp`` only goes on the wire with a ``vid`` (VID 0 = priority tag).
    """

    src_mac: str
    dst_mac: str
    src_ip: str | None = None
    dst_ip: str | None = None
    version: Literal[1, 2] = 2
    sport: int = 0xC000
    dscp: int = DSCP_ROCE
    ttl: int = 64
    vid: int | None = None
    pcp: int = 3

    def reversed(self) -> Flow:
        """The opposite direction, for ACKs, NAKs and CNPs answering this flow."""
        return dataclasses.replace(
            self, src_mac=self.dst_mac, dst_mac=self.src_mac,
            src_ip=self.dst_ip, dst_ip=self.src_ip,
        )


def gid_from_mac(mac: str) -> str:
    """Link-local EUI-64 GID (fe80::/64, U/L bit flipped), RoCEv1's default GID 0."""
    b = bytes.fromhex(mac.replace(":", "").replace("-", ""))
    eui = bytes([b[0] ^ 0x02]) + b[1:3] + b"\xff\xfe" + b[3:6]
    return str(IPv6Address(b"\xfe\x80" + bytes(6) + eui))


def rc_send(flow: Flow, dqpn: int, psn: int, payload: bytes = b"", *,
            part: Part = "only", ecn: int = ECT0, ackreq: bool | None = None) -> Packet:
    """One packet of an RC SEND message; ``ackreq`` defaults to on for the message's end."""
    return _roce(flow, _SEND_OPCODES[part], dqpn, psn, b"", payload, ecn,
                 ackreq=_end_of_message(part) if ackreq is None else ackreq)


def rc_write(flow: Flow, dqpn: int, psn: int, payload: bytes = b"", *,
             vaddr: int = 0, rkey: int = 0, dma_len: int | None = None,
             part: Part = "only", ecn: int = ECT0, ackreq: bool | None = None) -> Packet:
    """One packet of an RDMA WRITE; FIRST/ONLY carry the RETH (``dma_len`` = message size,
    defaulting to this packet's payload, which is right for ONLY)."""
    reth = b""
    if part in ("first", "only"):
        reth = _reth(vaddr, rkey, len(payload) if dma_len is None else dma_len)
    return _roce(flow, _WRITE_OPCODES[part], dqpn, psn, reth, payload, ecn,
                 ackreq=_end_of_message(part) if ackreq is None else ackreq)


def rc_read_request(flow: Flow, dqpn: int, psn: int, *, vaddr: int, rkey: int,
                    dma_len: int, ecn: int = ECT0) -> Packet:
    """RDMA READ request: BTH + RETH naming the remote buffer to read."""
    return _roce(flow, Opcode.RC_RDMA_READ_REQUEST, dqpn, psn,
                 _reth(vaddr, rkey, dma_len), b"", ecn)


def rc_ack(flow: Flow, dqpn: int, psn: int, msn: int, *,
           credits: int = AETH_CREDITS_INVALID, ecn: int = ECT0) -> Packet:
    """Positive ACK of everything up to ``psn`` (AETH syndrome 0b000 + credit count)."""
    return _roce(flow, Opcode.RC_ACKNOWLEDGE, dqpn, psn,
                 AETH(syndrome=credits & 0x1F, msn=msn & 0xFFFFFF), b"", ecn)


def rc_nak(flow: Flow, dqpn: int, psn: int, msn: int,
           code: NakCode = NakCode.PSN_SEQUENCE_ERROR, *, ecn: int = ECT0) -> Packet:
    """NAK (syndrome 0b011 + code); with a sequence error ``psn`` is the one expected,
    from which the requester goes back N."""
    return _roce(flow, Opcode.RC_ACKNOWLEDGE, dqpn, psn,
                 AETH(syndrome=0x60 | code, msn=msn & 0xFFFFFF), b"", ecn)


def cnp(flow: Flow, dqpn: int, *, ecn: int = NOT_ECT) -> Packet:
    """RoCEv2 CNP (opcode 0x81, BECN, 16 zero bytes) telling ``dqpn``'s sender to slow down.

    Not ECT by default: a CNP must not itself be CE-marked into another CNP. Use
    ``dataclasses.replace(flow, dscp=DSCP_CNP)`` for the usual CNP class.
    """
    return _roce(flow, Opcode.CNP, dqpn, 0, CNPPadding(), b"", ecn, becn=True)


def _end_of_message(part: Part) -> bool:
    return part in ("only", "last")


def _reth(vaddr: int, rkey: int, dma_len: int) -> bytes:
    return struct.pack("!QII", vaddr, rkey, dma_len)


def _roce(flow: Flow, opcode: Opcode, dqpn: int, psn: int, ext: bytes | Packet,
          payload: bytes, ecn: int, *, ackreq: bool = False, becn: bool = False) -> Packet:
    """Assemble L2 / network / BTH / ext / padded payload, then fill in the ICRC."""
    if not 0 <= dqpn < 1 << 24:
        raise ValueError(f"dqpn {dqpn} does not fit 24 bits")
    if ecn not in (NOT_ECT, ECT1, ECT0, CE):
        raise ValueError(f"ecn {ecn} is not a 2-bit ECN codepoint")
    padcount = -len(payload) % 4
    bth = BTH(opcode=opcode, padcount=padcount, becn=int(becn), dqpn=dqpn,
              ackreq=int(ackreq), psn=psn & 0xFFFFFF, icrc=0)
    transport = bth / ext if isinstance(ext, Packet) else bth
    data = (b"" if isinstance(ext, Packet) else ext) + payload + bytes(padcount)
    if data:
        transport = transport / Raw(data)
    tlen = len(transport)  # BTH + ext + data + ICRC
    pkt = _l2(flow) / _network(flow, tlen, ecn) / transport
    pkt[BTH].icrc = icrc(bytes(pkt))
    return pkt


def _l2(flow: Flow) -> Packet:
    eth = Ether(src=flow.src_mac, dst=flow.dst_mac)
    return eth if flow.vid is None else eth / Dot1Q(vlan=flow.vid, prio=flow.pcp)


def _network(flow: Flow, tlen: int, ecn: int) -> Packet:
    """GRH for v1; IPv4/IPv6 + UDP for v2 (UDP checksum 0, as rxe sends it)."""
    tclass = (flow.dscp << 2) | ecn
    if flow.version == 1:
        sgid = flow.src_ip or gid_from_mac(flow.src_mac)
        dgid = flow.dst_ip or gid_from_mac(flow.dst_mac)
        return GRH(ipver=6, tclass=tclass, flowlabel=0, paylen=tlen,
                   nexthdr=GRH_NEXT_HDR_BTH, hoplmt=flow.ttl,
                   sgid=int(IPv6Address(sgid)), dgid=int(IPv6Address(dgid)))
    if flow.src_ip is None or flow.dst_ip is None:
        raise ValueError("a RoCEv2 flow needs src_ip and dst_ip")
    udp = UDP(sport=flow.sport, dport=ROCE_V2_PORT, chksum=0)
    if ip_address(flow.dst_ip).version == 6:
        return IPv6(src=flow.src_ip, dst=flow.dst_ip, tc=tclass, fl=0, hlim=flow.ttl) / udp
    return IP(src=flow.src_ip, dst=flow.dst_ip, tos=tclass, ttl=flow.ttl, flags="DF",
              id=0) / udp  # DF and ID 0, as rxe sends; traffic.wire builds the same bytes


def pfc_frame(src_mac: str, quanta: Mapping[int, int]) -> Packet:
    """802.1Qbb PFC: pause each given priority for its quanta (0 = resume), 60 bytes."""
    fields: dict[str, int] = {}
    for prio, q in quanta.items():
        _check_quanta(q)
        if not 0 <= prio <= 7:
            raise ValueError(f"priority {prio} is not 0..7")
        fields[f"c{prio}_enabled"] = 1
        fields[f"c{prio}_pause_time"] = q
    return (Ether(dst=PFC_DST, src=src_mac, type=ETH_P_MAC_CONTROL)
            / MACControlClassBasedFlowControl(**fields))


def pause_frame(src_mac: str, quanta: int) -> Packet:
    """802.3x global PAUSE: stops every priority, the blunt tool PFC replaces."""
    _check_quanta(quanta)
    return (Ether(dst=PFC_DST, src=src_mac, type=ETH_P_MAC_CONTROL)
            / MACControlPause(pause_time=quanta))


def _check_quanta(q: int) -> None:
    if not 0 <= q <= 0xFFFF:
        raise ValueError(f"pause quanta {q} is not 0..65535")


def set_ecn(pkt: Packet, ecn: int) -> Packet:
    """A copy with the ECN bits rewritten, as a switch does; the ICRC stays valid since it
    masks them, and the IPv4 header checksum is recomputed."""
    out = pkt.copy()
    if IP in out:
        out[IP].tos = (out[IP].tos & 0xFC) | ecn
        del out[IP].chksum
    elif IPv6 in out:
        out[IPv6].tc = (out[IPv6].tc & 0xFC) | ecn
    elif GRH in out:
        out[GRH].tclass = (out[GRH].tclass & 0xFC) | ecn
    else:
        raise ValueError("packet has no IPv4, IPv6 or GRH header")
    return out


# --------------------------------------------------------------------------- fast path


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
_LRH_CRC = zlib.crc32(b"\xff" * 8)


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


def _crc(frame: bytes, lay: _Layout) -> int:
    """CRC32 over pseudo-LRH + headers with variant fields set to ones + rest of the packet."""
    mv = memoryview(frame)
    hdr = bytearray(mv[lay.net:lay.bth + 5])
    if lay.ipv4:
        hdr[1] = 0xFF  # TOS: DSCP + ECN
        hdr[8] = 0xFF  # TTL
        hdr[10:12] = b"\xff\xff"  # header checksum
    else:
        hdr[0] |= 0x0F  # traffic class, flow label (IPv6 or GRH)
        hdr[1:4] = b"\xff\xff\xff"
        hdr[7] = 0xFF  # hop limit
    if lay.version == 2:
        udp = lay.bth - 8 - lay.net
        hdr[udp + 6:udp + 8] = b"\xff\xff"  # UDP checksum
    hdr[-1] = 0xFF  # BTH resv8a: FECN, BECN and 6 reserved bits, as rxe and scapy mask it
    crc = zlib.crc32(hdr, _LRH_CRC)
    return zlib.crc32(mv[lay.bth + 5:lay.end], crc)


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


def _mac_control(frame: bytes) -> tuple[int, int] | None:
    """(MAC Control opcode, offset of the opcode) for an 0x8808 frame."""
    l2 = _l2_header(frame)
    if l2 is None or l2[0] != ETH_P_MAC_CONTROL or len(frame) < l2[1] + 2:
        return None
    return (frame[l2[1]] << 8) | frame[l2[1] + 1], l2[1]


def parse_pfc(frame: bytes) -> dict[int, int] | None:
    """Priority -> pause quanta for the classes a PFC frame enables; None when not PFC."""
    mc = _mac_control(frame)
    if mc is None or mc[0] != _MACC_PFC or len(frame) < mc[1] + 20:
        return None
    enabled = frame[mc[1] + 3]  # low byte of the class-enable vector; the high one is reserved
    times = struct.unpack_from("!8H", frame, mc[1] + 4)
    return {prio: times[prio] for prio in range(8) if enabled >> prio & 1}


def is_pause(frame: bytes) -> bool:
    """True for an 802.3x global PAUSE frame (MAC Control opcode 0x0001)."""
    mc = _mac_control(frame)
    return mc is not None and mc[0] == _MACC_PAUSE
