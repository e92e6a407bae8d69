"""RoCE v1/v2, PFC and ECN packets crafted with scapy, for probes, tests and tools.

Builders return scapy packets with a correct ICRC, so a frame we send is one a RoCE NIC
(or the Linux rxe driver) would accept. Reading frames fast (ICRC, classification, ECN,
PFC) is ``nic.roce``: struct, no scapy, on the floor below.
"""
from __future__ import annotations

import dataclasses
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import IPv6Address, ip_address
from typing import Literal

from scapy.contrib.mac_control import MACControlClassBasedFlowControl, MACControlPause
from scapy.contrib.roce import AETH, BTH, GRH, CNPPadding
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet, Raw, bind_layers

from ..nic.roce import (ROCE_V2_PORT, ETH_P_MAC_CONTROL, PFC_DST, GRH_NEXT_HDR_BTH, DSCP_ROCE,
                        AETH_CREDITS_INVALID, Opcode, NakCode, icrc, NOT_ECT, ECT1,
                        ECT0, CE)

# scapy binds GRH to Ether only; without this a VLAN-tagged RoCEv1 frame dissects as Raw.
bind_layers(Dot1Q, GRH, type=0x8915)

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
              id=0) / udp  # DF and ID 0, as rxe sends; nic.codec builds the same bytes


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
