"""traffic.packets: wire layouts, ICRC against scapy and tshark, fast parsers."""
from __future__ import annotations

import dataclasses
import shutil
import struct
import subprocess
from ipaddress import IPv6Address
from pathlib import Path

import pytest
from scapy.contrib.mac_control import MACControlClassBasedFlowControl, MACControlPause
from scapy.contrib.roce import AETH, BTH, GRH, CNPPadding
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw
from scapy.utils import checksum, wrpcap

from rocelab.nic.roce import (CE, DSCP_CNP, ECT0, ECT1, NOT_ECT, PFC_DST, NakCode, Opcode,
                              classify, ecn_of, icrc, is_pause, parse_pfc, verify_icrc)
from rocelab.traffic.packets import (Flow, cnp, gid_from_mac, pause_frame, pfc_frame, rc_ack,
                                     rc_nak, rc_read_request, rc_send, rc_write, set_ecn)

MAC_A, MAC_B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
V2_IP4 = Flow(MAC_A, MAC_B, "10.0.0.1", "10.0.0.2", sport=50001)
V2_IP6 = Flow(MAC_A, MAC_B, "fd00::1", "fd00::2", sport=50002)
V2_IP4_VLAN = dataclasses.replace(V2_IP4, vid=100, pcp=3)
V2_IP6_VLAN = dataclasses.replace(V2_IP6, vid=200, pcp=5)
V1 = Flow(MAC_A, MAC_B, version=1)
V1_VLAN = Flow(MAC_A, MAC_B, version=1, vid=10, pcp=3)
FLOWS = {
    "v2-ip4": V2_IP4, "v2-ip6": V2_IP6, "v2-ip4-vlan": V2_IP4_VLAN,
    "v2-ip6-vlan": V2_IP6_VLAN, "v1": V1, "v1-vlan": V1_VLAN,
}


def _all_kinds(flow: Flow) -> list:
    return [
        rc_send(flow, 0x11, 100, b"hello"),
        rc_send(flow, 0x11, 101, b"x" * 64, part="middle"),
        rc_write(flow, 0x12, 7, b"abc", vaddr=0x7F0000001000, rkey=0x1234),
        rc_write(flow, 0x12, 8, b"abcdefgh", part="last"),
        rc_read_request(flow, 0x13, 9, vaddr=0x2000, rkey=5, dma_len=4096),
        rc_ack(flow, 0x14, 10, msn=3),
        rc_nak(flow, 0x14, 11, msn=3),
        cnp(flow, 0x15),
    ]


def _bth_offset(frame: bytes) -> int:
    """Offset of the BTH, found independently of the module under test."""
    pkt = Ether(frame)
    return len(frame) - len(pkt[BTH])


# ---------------------------------------------------------------- known layouts


def test_cnp_layout() -> None:
    frame = bytes(cnp(V2_IP4, 0xABCDE))
    assert len(frame) == 14 + 20 + 8 + 12 + 16 + 4
    bth = 14 + 20 + 8
    assert frame[bth] == 0x81 == Opcode.CNP
    assert frame[bth + 4] & 0x40  # BECN
    assert int.from_bytes(frame[bth + 5:bth + 8], "big") == 0xABCDE
    assert frame[bth + 12:bth + 28] == bytes(16)
    assert len(frame) - (bth + 28) == 4 and verify_icrc(frame)
    assert frame[15] & 3 == NOT_ECT
    pkt = Ether(frame)
    assert pkt[BTH].becn == 1 and pkt[CNPPadding].reserved1 == pkt[CNPPadding].reserved2 == 0


def test_cnp_class_is_the_flows() -> None:
    frame = bytes(cnp(dataclasses.replace(V2_IP4, dscp=DSCP_CNP), 1))
    assert frame[15] >> 2 == 48


def test_pfc_layout() -> None:
    frame = bytes(pfc_frame(MAC_A, {3: 0xFFFF, 5: 100}))
    assert len(frame) == 60
    assert frame[0:6] == bytes.fromhex("0180c2000001")
    assert frame[12:14] == b"\x88\x08"
    assert frame[14:16] == b"\x01\x01"
    assert frame[16:18] == bytes([0, 0b0010_1000])
    times = struct.unpack_from("!8H", frame, 18)
    assert times == (0, 0, 0, 0xFFFF, 0, 100, 0, 0)
    assert frame[34:] == bytes(26)
    pkt = Ether(frame)
    assert pkt[MACControlClassBasedFlowControl].c3_enabled == 1
    assert pkt[MACControlClassBasedFlowControl].c0_enabled == 0


def test_pause_layout() -> None:
    frame = bytes(pause_frame(MAC_A, 0x1234))
    assert len(frame) == 60
    assert frame[0:6] == bytes.fromhex("0180c2000001") and frame[12:14] == b"\x88\x08"
    assert frame[14:18] == b"\x00\x01\x12\x34"
    assert Ether(frame)[MACControlPause].pause_time == 0x1234


@pytest.mark.parametrize("size", range(8))
def test_payload_padding(size: int) -> None:
    payload = bytes(range(1, size + 1))
    pkt = rc_send(V2_IP4, 1, 1, payload)
    pad = -size % 4
    assert pkt[BTH].padcount == pad
    frame = bytes(pkt)
    assert len(frame) == 14 + 20 + 8 + 12 + size + pad + 4
    assert frame[54:54 + size] == payload and frame[54 + size:-4] == bytes(pad)
    assert (len(frame) - 54 - 4) % 4 == 0
    assert Ether(frame)[BTH].padcount == pad and verify_icrc(frame)


def test_reth_and_lengths() -> None:
    frame = bytes(rc_write(V2_IP4, 0x12, 7, b"abc", vaddr=0x7F0000001000, rkey=0x1234))
    pkt = Ether(frame)
    assert pkt[IP].len == len(frame) - 14 and pkt[UDP].len == len(frame) - 34
    assert pkt[UDP].dport == 4791 and pkt[UDP].sport == 50001
    va, rkey, dma_len = struct.unpack_from("!QII", pkt[Raw].load)
    assert (va, rkey, dma_len) == (0x7F0000001000, 0x1234, 3)
    assert pkt[Raw].load[16:] == b"abc\x00"
    # MIDDLE/LAST carry no RETH
    assert Ether(bytes(rc_write(V2_IP4, 1, 1, b"abcd", part="last")))[Raw].load == b"abcd"
    req = Ether(bytes(rc_read_request(V2_IP4, 1, 1, vaddr=9, rkey=8, dma_len=4096)))
    assert struct.unpack("!QII", req[Raw].load) == (9, 8, 4096)


def test_aeth_syndromes() -> None:
    ack = Ether(bytes(rc_ack(V2_IP4, 1, 77, msn=0x123456)))
    assert ack[BTH].opcode == Opcode.RC_ACKNOWLEDGE and ack[BTH].psn == 77
    assert ack[AETH].syndrome == 0x1F and ack[AETH].msn == 0x123456
    nak = Ether(bytes(rc_nak(V2_IP4, 1, 78, msn=1)))
    assert nak[AETH].syndrome == 0x60 | NakCode.PSN_SEQUENCE_ERROR == 0x60
    access = Ether(bytes(rc_nak(V2_IP4, 1, 78, msn=1, code=NakCode.REMOTE_ACCESS_ERROR)))
    assert access[AETH].syndrome == 0x62


def test_send_parts_and_ackreq() -> None:
    opcodes = {part: Ether(bytes(rc_send(V2_IP4, 1, 1, b"ab", part=part)))[BTH]
               for part in ("first", "middle", "last", "only")}
    assert [b.opcode for b in opcodes.values()] == [0x00, 0x01, 0x02, 0x04]
    assert [b.ackreq for b in opcodes.values()] == [0, 0, 1, 1]


def test_dscp_ecn_ttl_vlan_on_the_wire() -> None:
    pkt = Ether(bytes(rc_send(dataclasses.replace(V2_IP6_VLAN, ttl=7, dscp=24), 1, 1)))
    assert pkt[Dot1Q].vlan == 200 and pkt[Dot1Q].prio == 5
    assert pkt[IPv6].tc == (24 << 2) | ECT0 and pkt[IPv6].hlim == 7 and pkt[IPv6].fl == 0


def test_grh_fields_and_paylen() -> None:
    for flow, l2 in ((V1, 14), (V1_VLAN, 18)):
        frame = bytes(rc_send(flow, 0x21, 5, b"hello"))
        pkt = Ether(frame)
        grh = pkt[GRH]
        assert grh.paylen == len(frame) - l2 - 40
        assert (grh.ipver, grh.nexthdr, grh.flowlabel, grh.hoplmt) == (6, 0x1B, 0, 64)
        assert grh.tclass == (26 << 2) | ECT0
        assert grh.sgid == int(IPv6Address("fe80::ff:fe00:a"))
        assert pkt[BTH].dqpn == 0x21
    assert Ether(bytes(rc_send(V1_VLAN, 1, 1)))[Dot1Q].type == 0x8915


def test_given_gids() -> None:
    flow = Flow(MAC_A, MAC_B, "fe80::1", "fe80::2", version=1)
    info = classify(bytes(rc_send(flow, 1, 1)))
    assert (info.src, info.dst) == ("fe80::1", "fe80::2")


def test_gid_from_mac() -> None:
    assert gid_from_mac("00:11:22:33:44:55") == "fe80::211:22ff:fe33:4455"
    assert gid_from_mac("02:00:00:00:00:0a") == "fe80::ff:fe00:a"


# ---------------------------------------------------------------- ICRC


@pytest.mark.parametrize("name", [n for n in FLOWS if n.startswith("v2")])
def test_icrc_matches_scapy(name: str) -> None:
    for pkt in _all_kinds(FLOWS[name]):
        frame = bytes(pkt)
        redo = Ether(frame)
        redo[BTH].icrc = None  # scapy computes its own ICRC when the field is None
        assert bytes(redo) == frame
        assert icrc(frame) == pkt[BTH].icrc


@pytest.mark.parametrize("name", FLOWS)
def test_verify_icrc_all_kinds(name: str) -> None:
    for pkt in _all_kinds(FLOWS[name]):
        frame = bytes(pkt)
        assert verify_icrc(frame)
        assert verify_icrc(frame + bytes(6))  # Ethernet padding is not covered


@pytest.mark.parametrize("name", FLOWS)
def test_icrc_detects_corruption(name: str) -> None:
    frame = bytes(rc_send(FLOWS[name], 0x11, 5, b"payload!"))
    bth = _bth_offset(frame)
    for offset in (bth + 12, len(frame) - 5, bth + 7, bth + 11):  # payload, dqpn, psn
        bad = bytearray(frame)
        bad[offset] ^= 0x01
        assert not verify_icrc(bytes(bad)), offset
    bad = bytearray(frame)
    bad[-1] ^= 0x80  # the ICRC itself
    assert not verify_icrc(bytes(bad))


def _rewrite_variant_fields(frame: bytes) -> bytes:
    """What switches and routers may change: DSCP, ECN, TTL, FECN/BECN (and checksums)."""
    pkt = Ether(frame)
    if IP in pkt:
        pkt[IP].tos, pkt[IP].ttl = (46 << 2) | CE, 3
        del pkt[IP].chksum
    elif IPv6 in pkt:
        pkt[IPv6].tc, pkt[IPv6].hlim, pkt[IPv6].fl = (46 << 2) | CE, 3, 0xABCDE
    else:
        pkt[GRH].tclass, pkt[GRH].hoplmt, pkt[GRH].flowlabel = (46 << 2) | CE, 3, 0x12345
    if UDP in pkt:
        pkt[UDP].chksum = 0x1234
    pkt[BTH].fecn = 1
    return bytes(pkt)


@pytest.mark.parametrize("name", FLOWS)
def test_icrc_survives_variant_fields(name: str) -> None:
    """A switch may CE-mark or change class/TTL without breaking the ICRC."""
    frame = bytes(rc_write(FLOWS[name], 0x12, 7, b"some data", vaddr=1, rkey=2))
    changed = _rewrite_variant_fields(frame)
    assert changed != frame and ecn_of(changed) == CE
    assert verify_icrc(changed)
    assert icrc(changed) == icrc(frame)


def test_icrc_rejects_non_roce() -> None:
    plain = bytes(Ether() / IP(dst="10.0.0.2") / UDP(dport=4792) / Raw(bytes(20)))
    assert not verify_icrc(plain) and classify(plain) is None
    with pytest.raises(ValueError):
        icrc(plain)
    assert not verify_icrc(bytes(pfc_frame(MAC_A, {3: 1})))
    assert not verify_icrc(b"\x00" * 10)
    truncated = bytes(rc_send(V2_IP4, 1, 1, b"x" * 32))[:-8]
    assert not verify_icrc(truncated) and classify(truncated) is None


# ---------------------------------------------------------------- ECN


@pytest.mark.parametrize("name", FLOWS)
def test_set_ecn(name: str) -> None:
    pkt = rc_send(FLOWS[name], 1, 1, b"data")
    assert ecn_of(bytes(pkt)) == ECT0
    for ecn in (CE, ECT1, NOT_ECT):
        frame = bytes(set_ecn(pkt, ecn))
        assert ecn_of(frame) == ecn and verify_icrc(frame)
        assert classify(frame).dscp == 26  # only the ECN bits change
        if IP in pkt:
            ip = len(frame) - len(pkt[IP])
            assert checksum(frame[ip:ip + 20]) == 0  # header checksum recomputed
    assert ecn_of(bytes(pkt)) == ECT0  # the original is untouched


def test_ecn_of_non_ip() -> None:
    assert ecn_of(bytes(pfc_frame(MAC_A, {0: 1}))) is None
    assert ecn_of(b"") is None


# ---------------------------------------------------------------- PFC parsing


def test_parse_pfc() -> None:
    assert parse_pfc(bytes(pfc_frame(MAC_A, {3: 0xFFFF, 5: 100}))) == {3: 0xFFFF, 5: 100}
    assert parse_pfc(bytes(pfc_frame(MAC_A, {0: 0, 7: 1}))) == {0: 0, 7: 1}  # 0 = XON
    assert parse_pfc(bytes(pfc_frame(MAC_A, {}))) == {}
    assert parse_pfc(bytes(pause_frame(MAC_A, 5))) is None
    assert parse_pfc(bytes(rc_send(V2_IP4, 1, 1))) is None
    assert parse_pfc(bytes(pfc_frame(MAC_A, {3: 1}))[:20]) is None
    tagged = bytes(Ether(src=MAC_A, dst=PFC_DST) / Dot1Q(vlan=0, prio=7)
                   / MACControlClassBasedFlowControl(c6_enabled=1, c6_pause_time=9))
    assert parse_pfc(tagged) == {6: 9}


def test_is_pause() -> None:
    assert is_pause(bytes(pause_frame(MAC_A, 0xFFFF)))
    assert not is_pause(bytes(pfc_frame(MAC_A, {3: 1})))
    assert not is_pause(bytes(cnp(V2_IP4, 1)))
    assert not is_pause(b"")


def test_pfc_validation() -> None:
    with pytest.raises(ValueError):
        pfc_frame(MAC_A, {8: 1})
    with pytest.raises(ValueError):
        pfc_frame(MAC_A, {3: 0x10000})
    with pytest.raises(ValueError):
        pause_frame(MAC_A, -1)


# ---------------------------------------------------------------- classify


def test_classify_v2_ipv6_vlan() -> None:
    flow = dataclasses.replace(V2_IP6_VLAN, ttl=9)
    info = classify(bytes(rc_write(flow, 0xFEDCBA, 0xFFFFFF + 5, b"xyz", vaddr=1, rkey=2)))
    assert info is not None
    assert (info.version, info.vid, info.pcp) == (2, 200, 5)
    assert (info.dscp, info.ecn, info.ttl) == (26, ECT0, 9)
    assert (info.src, info.dst, info.sport) == ("fd00::1", "fd00::2", 50002)
    assert (info.opcode, info.dqpn, info.psn) == (Opcode.RC_RDMA_WRITE_ONLY, 0xFEDCBA, 4)
    assert not info.becn and info.icrc_ok


def test_classify_v2_ipv4_cnp() -> None:
    info = classify(bytes(cnp(V2_IP4.reversed(), 0x42)))
    assert (info.version, info.vid, info.pcp) == (2, None, None)
    assert (info.src, info.dst, info.sport) == ("10.0.0.2", "10.0.0.1", 50001)
    assert (info.opcode, info.dqpn, info.psn, info.becn, info.ecn) == (0x81, 0x42, 0, True, NOT_ECT)
    assert info.icrc_ok


def test_classify_v1() -> None:
    info = classify(bytes(rc_send(V1_VLAN, 0x33, 12, b"hi", ecn=CE)))
    assert (info.version, info.vid, info.pcp, info.sport) == (1, 10, 3, None)
    assert (info.src, info.dst) == ("fe80::ff:fe00:a", "fe80::ff:fe00:b")
    assert (info.opcode, info.dqpn, info.psn, info.ecn, info.ttl) == (4, 0x33, 12, CE, 64)
    assert info.icrc_ok


def test_classify_reports_bad_icrc() -> None:
    frame = bytearray(bytes(rc_send(V2_IP4, 1, 1, b"abcd")))
    frame[-6] ^= 0xFF
    info = classify(bytes(frame))
    assert info is not None and not info.icrc_ok


def test_builder_validation() -> None:
    with pytest.raises(ValueError):
        rc_send(V2_IP4, 1 << 24, 0)
    with pytest.raises(ValueError):
        rc_send(V2_IP4, 1, 0, ecn=4)
    with pytest.raises(ValueError):
        rc_send(Flow(MAC_A, MAC_B), 1, 0)  # v2 without IPs


# ---------------------------------------------------------------- scapy round trips


@pytest.mark.parametrize("name", FLOWS)
def test_scapy_round_trip(name: str) -> None:
    for pkt in _all_kinds(FLOWS[name]):
        frame = bytes(pkt)
        again = Ether(frame)
        assert bytes(again) == frame
        assert again[BTH].opcode == pkt[BTH].opcode and again[BTH].psn == pkt[BTH].psn
        assert again[BTH].dqpn == pkt[BTH].dqpn and again[BTH].icrc == icrc(frame)


# ---------------------------------------------------------------- tshark

TSHARK = shutil.which("tshark")
needs_tshark = pytest.mark.skipif(
    TSHARK is None, reason="tshark not installed (apt-get install tshark)")


def _tshark(pcap: Path, *fields: str) -> list[list[str]]:
    argv = [TSHARK, "-r", str(pcap), "-o", "infiniband.rroce.port:4791",
            "--disable-protocol", "rpcordma", "-T", "fields", "-E", "separator=/t"]
    for f in fields:
        argv += ["-e", f]
    out = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60).stdout
    return [line.split("\t") for line in out.splitlines()]


@needs_tshark
def test_tshark_decodes_roce_v2(tmp_path: Path) -> None:
    pkts = [rc_send(V2_IP4, 0x11, 100, b"hello"),
            rc_write(V2_IP6_VLAN, 0x12, 200, b"hello world", vaddr=0x1000, rkey=9),
            rc_nak(V2_IP4, 0x13, 300, msn=1),
            cnp(V2_IP4, 0x14)]
    wrpcap(str(tmp_path / "v2.pcap"), pkts)
    rows = _tshark(tmp_path / "v2.pcap", "frame.protocols", "infiniband.bth.opcode",
                   "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.invariant.crc",
                   "infiniband.reth.dmalen", "infiniband.aeth.syndrome", "ip.dsfield.ecn")
    assert all("udp:infiniband" in r[0] for r in rows)
    assert [(int(r[1]), int(r[2], 16), int(r[3])) for r in rows] == [
        (0x04, 0x11, 100), (0x0A, 0x12, 200), (0x11, 0x13, 300), (0x81, 0x14, 0)]
    # Wireshark shows the ICRC as stored; it equals ours for the data packets (no CRC for CNP)
    assert [int(r[4], 16) for r in rows[:3]] == [icrc(bytes(p)) for p in pkts[:3]]
    assert rows[1][5] == "11" and int(rows[2][6]) == 0x60
    assert [rows[0][7], rows[3][7]] == [str(ECT0), str(NOT_ECT)]


@needs_tshark
def test_tshark_decodes_roce_v1(tmp_path: Path) -> None:
    pkts = [rc_send(V1_VLAN, 0x21, 7, b"abc"), rc_write(V1, 0x22, 8, b"abcdefg", rkey=3)]
    wrpcap(str(tmp_path / "v1.pcap"), pkts)
    rows = _tshark(tmp_path / "v1.pcap", "frame.protocols", "infiniband.grh.nxthdr",
                   "infiniband.grh.paylen", "infiniband.grh.sgid", "infiniband.bth.opcode",
                   "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.padcnt")
    assert all(r[0].endswith("ethertype:infiniband:data") and "ip" not in r[0].split(":")
               for r in rows)
    assert [(int(r[1]), int(r[2])) for r in rows] == [(0x1B, 12 + 4 + 4), (0x1B, 12 + 16 + 8 + 4)]
    assert rows[0][3] == gid_from_mac(MAC_A)
    assert [(int(r[4]), int(r[5], 16), int(r[6]), int(r[7])) for r in rows] == [
        (0x04, 0x21, 7, 1), (0x0A, 0x22, 8, 1)]


@needs_tshark
def test_tshark_decodes_pfc(tmp_path: Path) -> None:
    wrpcap(str(tmp_path / "pfc.pcap"),
           [pfc_frame(MAC_A, {3: 0xFFFF}), pfc_frame(MAC_A, {3: 0}), pause_frame(MAC_A, 9)])
    rows = _tshark(tmp_path / "pfc.pcap", "macc.opcode", "macc.cbfc.enbv.c3",
                   "macc.cbfc.pause_time.c3", "macc.cbfc.enbv.c4", "macc.pause_time")
    assert rows[0][:4] == ["0x0101", "1", "65535", "0"]
    assert rows[1][:3] == ["0x0101", "1", "0"]
    assert rows[2][0] == "0x0001" and rows[2][4] == "9"
