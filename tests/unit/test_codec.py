"""nic.codec (struct-built RoCEv2 frames) byte for byte against traffic.packets (scapy),
and codec.parse round trips."""
from __future__ import annotations

import dataclasses
import struct

import pytest
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrHopByHop
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw

from rocelab.traffic import packets

from rocelab.nic import roce
from rocelab.nic import codec

SRC_MAC, DST_MAC = "02:00:00:00:00:01", "02:00:00:00:00:02"
SRC_IP, DST_IP = "10.0.0.1", "10.0.0.2"
DQPN = 0x00ABCD
PSN = 0xFEDCBA

PAYLOADS = [1, 2, 3, 1023, 1024]
WRITE = {"first": 0x06, "middle": 0x07, "last": 0x08, "only": 0x0A}
SEND = {"first": 0x00, "middle": 0x01, "last": 0x02, "only": 0x04}


def headers(*, dscp=26, ecn=2, src_mac=SRC_MAC, dst_mac=DST_MAC, src_ip=SRC_IP, dst_ip=DST_IP):
    return codec.Headers(src_mac, dst_mac, src_ip, dst_ip, dscp=dscp, ecn=ecn, sport=0xC001)


SRC6, DST6 = "2001:db8:1:1::11", "2001:db8:1:2::13"


def headers6(*, dscp=26, ecn=2):
    return headers(dscp=dscp, ecn=ecn, src_ip=SRC6, dst_ip=DST6)


def flow(*, dscp=26, src_mac=SRC_MAC, dst_mac=DST_MAC, src_ip=SRC_IP, dst_ip=DST_IP):
    return packets.Flow(src_mac, dst_mac, src_ip, dst_ip, sport=0xC001, dscp=dscp)


def hexdiff(a: bytes, b: bytes) -> str:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"first difference at byte {i}: {x:#04x} != {y:#04x}"
    return f"lengths {len(a)} != {len(b)}"


def assert_same(ours: bytes, theirs: bytes) -> None:
    assert ours == theirs, hexdiff(ours, theirs)


# --------------------------------------------------------------------------- data frames


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("part", ["first", "middle", "last", "only"])
@pytest.mark.parametrize("ackreq", [False, True])
@pytest.mark.parametrize("ecn", [roce.NOT_ECT, roce.ECT0, roce.CE])
def test_write_frames_match_scapy(payload, part, ackreq, ecn):
    opcode = WRITE[part]
    dma_len = 2500 if part == "first" else payload
    reth = (0, dma_len) if part in ("first", "only") else None
    ours = codec.data_frame(headers(ecn=ecn), DQPN, PSN, opcode, payload, ackreq=ackreq,
                           reth=reth)
    theirs = bytes(packets.rc_write(flow(), DQPN, PSN, bytes(payload),
                                    vaddr=codec.REMOTE_VADDR, rkey=codec.RKEY, dma_len=dma_len,
                                    part=part, ackreq=ackreq, ecn=ecn))
    assert_same(ours, theirs)
    assert roce.verify_icrc(ours)
    ext = 16 if reth else 0
    pad = -payload % 4
    assert len(ours) == 14 + 20 + 8 + 12 + ext + payload + pad + 4


@pytest.mark.parametrize("offset", [1024, 2048, 0x7FFF_0000])
def test_a_write_reth_carries_the_remote_address_of_its_offset(offset):
    ours = codec.data_frame(headers(), DQPN, PSN, 0x06, 1024, ackreq=False,
                           reth=(offset, 1 << 20))
    theirs = bytes(packets.rc_write(flow(), DQPN, PSN, bytes(1024),
                                    vaddr=codec.REMOTE_VADDR + offset, rkey=codec.RKEY,
                                    dma_len=1 << 20, part="first", ackreq=False,
                                    ecn=roce.ECT0))
    assert_same(ours, theirs)
    vaddr, rkey, dma_len = struct.unpack_from("!QII", ours, codec.BTH_AT + 12)
    assert (vaddr, rkey, dma_len) == (0x10000 + offset, 0x1234, 1 << 20)


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("part", ["first", "middle", "last", "only"])
@pytest.mark.parametrize("ackreq", [False, True])
def test_send_frames_match_scapy(payload, part, ackreq):
    ours = codec.data_frame(headers(), DQPN, PSN, SEND[part], payload, ackreq=ackreq)
    theirs = bytes(packets.rc_send(flow(), DQPN, PSN, bytes(payload), part=part,
                                   ackreq=ackreq, ecn=roce.ECT0))
    assert_same(ours, theirs)
    assert roce.verify_icrc(ours)
    assert len(ours) == 14 + 20 + 8 + 12 + payload + (-payload % 4) + 4


@pytest.mark.parametrize("dscp", [0, 26, 46])
@pytest.mark.parametrize("psn", [0, 1, 0xFFFFFF])
@pytest.mark.parametrize("dqpn", [0, 1, 0xFFFFFF])
def test_addresses_class_and_ids_match_scapy(dscp, psn, dqpn):
    kw = dict(src_mac="aa:bb:cc:dd:ee:ff", dst_mac="01:23:45:67:89:ab",
              src_ip="192.168.200.17", dst_ip="172.16.0.254")
    ours = codec.data_frame(headers(dscp=dscp, ecn=1, **kw), dqpn, psn, 0x07, 7, ackreq=True)
    theirs = bytes(packets.rc_write(flow(dscp=dscp, **kw), dqpn, psn, bytes(7), part="middle",
                                    ackreq=True, ecn=roce.ECT1))
    assert_same(ours, theirs)
    info = roce.classify(ours)
    assert (info.dscp, info.ecn, info.dqpn, info.psn, info.sport, info.ttl) == (
        dscp, 1, dqpn, psn, 0xC001, 64)
    assert (info.src, info.dst, info.icrc_ok, info.becn) == (
        "192.168.200.17", "172.16.0.254", True, False)


def test_the_ip_header_is_cached_per_length_and_stays_right():
    h = headers()
    a = codec.data_frame(h, DQPN, 1, 0x07, 100, ackreq=False)
    b = codec.data_frame(h, DQPN, 2, 0x07, 200, ackreq=False)
    c = codec.data_frame(h, DQPN, 3, 0x07, 100, ackreq=False)
    d = codec.data_frame(h, DQPN, 4, 0x07, 100, ackreq=False)  # the last length again
    for frame, psn, size in ((a, 1, 100), (b, 2, 200), (c, 3, 100), (d, 4, 100)):
        assert_same(frame, bytes(packets.rc_write(flow(), DQPN, psn, bytes(size),
                                                  part="middle", ackreq=False,
                                                  ecn=roce.ECT0)))
    assert sorted(h._by_length) == [116, 216]


def test_the_crc_of_a_zero_run_is_zlibs_at_every_length_and_start():
    """Every length below the tables' limit (their steps in every combination), a few
    past it (read by zlib), from starting CRCs with every byte's bits in play."""
    import random
    import zlib
    rand = random.Random(7)
    starts = [0, 0xFFFFFFFF, 0x80000001] + [rand.getrandbits(32) for _ in range(5)]
    limit = 1 << codec.ZERO_RUN_STEPS
    for n in [*range(0, limit, 61), 4096, 4100, limit - 1, limit, limit + 5]:
        for crc in starts:
            assert codec.crc32_zeros(n, crc) == zlib.crc32(bytes(n), crc), (n, crc)


def test_ipv4_checksum_of_a_known_header():
    # the classic example header (Wikipedia, "IPv4 header checksum")
    header = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert codec.ipv4_checksum(header) == 0xB861


# --------------------------------------------------------------------------- ACK, NAK, CNP


@pytest.mark.parametrize("psn, msn", [(0, 0), (5, 1), (0xFFFFFF, 0xFFFFFF), (0x123456, 42)])
def test_ack_frames_match_scapy(psn, msn):
    ours = codec.ack_frame(headers(ecn=0), DQPN, psn, msn)
    theirs = bytes(packets.rc_ack(flow(), DQPN, psn, msn, ecn=0))
    assert_same(ours, theirs)
    assert roce.verify_icrc(ours)
    assert len(ours) == 14 + 20 + 8 + 12 + 4 + 4
    assert ours[codec.BTH_AT + 12:codec.BTH_AT + 16] == bytes([0x1F]) + msn.to_bytes(3, "big")


@pytest.mark.parametrize("psn, msn", [(0, 0), (5, 1), (0xFFFFFF, 0xFFFFFF), (0x123456, 42)])
def test_nak_frames_match_scapy(psn, msn):
    ours = codec.ack_frame(headers(ecn=0), DQPN, psn, msn, nak=True)
    theirs = bytes(packets.rc_nak(flow(), DQPN, psn, msn, ecn=0))
    assert_same(ours, theirs)
    assert roce.verify_icrc(ours)
    assert ours[codec.BTH_AT + 12] == 0x60


@pytest.mark.parametrize("dqpn", [0, 0x11, 0xFFFFFF])
def test_cnp_frames_match_scapy(dqpn):
    ours = codec.cnp_frame(headers(dscp=48, ecn=0), dqpn)
    theirs = bytes(packets.cnp(dataclasses.replace(flow(), dscp=48), dqpn))
    assert_same(ours, theirs)
    assert roce.verify_icrc(ours)
    assert len(ours) == 14 + 20 + 8 + 12 + 16 + 4
    info = roce.classify(ours)
    assert (info.opcode, info.becn, info.psn, info.dqpn, info.dscp, info.ecn) == (
        0x81, True, 0, dqpn, 48, 0)


def test_a_corrupted_frame_fails_the_icrc():
    frame = bytearray(codec.data_frame(headers(), DQPN, PSN, 0x0A, 64, ackreq=True,
                                      reth=(0, 64)))
    frame[codec.BTH_AT + 30] ^= 1  # a payload bit
    assert not roce.verify_icrc(bytes(frame))


# --------------------------------------------------------------------------- parse


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("opcode", [0x00, 0x01, 0x02, 0x04, 0x06, 0x07, 0x08, 0x0A])
@pytest.mark.parametrize("ackreq", [False, True])
@pytest.mark.parametrize("ecn", [0, 1, 2, 3])
def test_parse_round_trips_data_frames(payload, opcode, ackreq, ecn):
    reth = (1024, 4096) if opcode in (0x06, 0x0A) else None
    frame = codec.data_frame(headers(ecn=ecn), DQPN, PSN, opcode, payload, ackreq=ackreq,
                            reth=reth)
    assert codec.parse(frame) == codec.Incoming(
        src_ip=bytes([10, 0, 0, 1]), ecn=ecn, opcode=opcode, dqpn=DQPN, psn=PSN,
        ackreq=ackreq, payload=payload, aeth=None)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_parse_reads_scapy_built_frames_too(payload):
    frame = bytes(packets.rc_write(flow(), 7, 9, bytes(payload), part="only",
                                   ecn=roce.CE))
    got = codec.parse(frame)
    assert (got.opcode, got.dqpn, got.psn, got.ackreq, got.payload, got.ecn) == (
        0x0A, 7, 9, True, payload, 3)


@pytest.mark.parametrize("nak, syndrome", [(False, 0x1F), (True, 0x60)])
@pytest.mark.parametrize("psn, msn", [(0, 0), (77, 3), (0xFFFFFF, 0xFFFFFF)])
def test_parse_round_trips_acks_and_naks(nak, syndrome, psn, msn):
    frame = codec.ack_frame(codec.Headers(DST_MAC, SRC_MAC, DST_IP, SRC_IP, dscp=26, ecn=0,
                                        sport=0xC001), DQPN, psn, msn, nak=nak)
    got = codec.parse(frame)
    assert got == codec.Incoming(src_ip=bytes([10, 0, 0, 2]), ecn=0, opcode=0x11, dqpn=DQPN,
                                psn=psn, ackreq=False, payload=0,
                                aeth=syndrome << 24 | msn)
    assert (got.aeth >> 29 == 0b011) is nak  # how the endpoint tells a NAK from an ACK


def test_parse_reads_a_cnp():
    got = codec.parse(codec.cnp_frame(headers(dscp=48, ecn=0), 0x42))
    assert (got.opcode, got.dqpn, got.psn, got.ackreq, got.ecn, got.aeth) == (
        0x81, 0x42, 0, False, 0, None)


def test_parse_counts_no_payload_in_a_cnp():
    # the CNP's 16 reserved bytes are an extension header, not payload
    assert codec.parse(codec.cnp_frame(headers(dscp=48, ecn=0), 0x42)).payload == 0


def test_parse_ignores_ethernet_padding_after_the_frame():
    frame = codec.ack_frame(headers(ecn=0), DQPN, 3, 1)
    assert codec.parse(frame + bytes(6)) == codec.parse(frame)


def _not_roce_frames():
    roce = codec.data_frame(headers(), DQPN, PSN, 0x0A, 1024, ackreq=True, reth=(0, 1024))
    eth = Ether(src=SRC_MAC, dst=DST_MAC)
    return {
        "arp": bytes(eth / ARP(psrc=SRC_IP, pdst=DST_IP)),
        "ipv4 tcp": bytes(eth / IP(src=SRC_IP, dst=DST_IP) / TCP(sport=4791, dport=4791)
                          / Raw(bytes(64))),
        "udp to another port": bytes(eth / IP(src=SRC_IP, dst=DST_IP)
                                     / UDP(sport=0xC001, dport=4792) / Raw(bytes(64))),
        "udp from 4791 to another port": bytes(eth / IP(src=SRC_IP, dst=DST_IP)
                                               / UDP(sport=4791, dport=53) / Raw(bytes(64))),
        "truncated below the headers": roce[:57],
        "headers only": roce[:42],
        "empty": b"",
        "pfc": bytes(packets.pfc_frame(SRC_MAC, {3: 100})),
        "pause": bytes(packets.pause_frame(SRC_MAC, 100)),
        "vlan-tagged roce": bytes(Ether(src=SRC_MAC, dst=DST_MAC) / Dot1Q(vlan=10, prio=3)
                                  / IP(src=SRC_IP, dst=DST_IP)
                                  / UDP(sport=0xC001, dport=4791) / Raw(bytes(80))),
        "ipv4 with options": bytes(eth / IP(src=SRC_IP, dst=DST_IP, options=b"\x01" * 4)
                                   / UDP(sport=0xC001, dport=4791) / Raw(bytes(80))),
        "roce over ipv6 behind a hop-by-hop header": bytes(
            eth / IPv6(src=SRC6, dst=DST6) / IPv6ExtHdrHopByHop()
            / UDP(sport=0xC001, dport=4791) / Raw(bytes(80))),
        "ipv6 udp to another port": bytes(eth / IPv6(src=SRC6, dst=DST6)
                                          / UDP(sport=0xC001, dport=4792) / Raw(bytes(64))),
        "truncated ipv6 roce": codec.data_frame(headers6(), DQPN, PSN, 0x0A, 64,
                                               ackreq=True, reth=(0, 64))[:100],
        "roce v1": bytes(packets.rc_write(packets.Flow(SRC_MAC, DST_MAC, version=1), DQPN,
                                          PSN, bytes(64))),
    }


@pytest.mark.parametrize("name", list(_not_roce_frames()))
def test_parse_returns_none_for_anything_but_untagged_ip_roce(name):
    assert codec.parse(_not_roce_frames()[name]) is None


@pytest.mark.parametrize("keep", [58, 100, 1097])
def test_parse_returns_none_for_a_truncated_frame(keep):
    # shorter than its IPv4 total length says: not a whole packet
    frame = codec.data_frame(headers(), DQPN, PSN, 0x0A, 1024, ackreq=True, reth=(0, 1024))
    assert len(frame) == 1098
    assert codec.parse(frame[:keep]) is None


# --------------------------------------------------------------------------- IPv6


def scapy_icrc(frame: bytes) -> int:
    """The ICRC scapy's own BTH computes (its IPv6 masks: traffic class, flow label, hop
    limit), independent of traffic.packets."""
    pkt = Ether(frame)
    pkt[BTH].icrc = None
    return Ether(bytes(pkt))[BTH].icrc


IPV6_KINDS = {
    "write only": lambda h, ecn: codec.data_frame(h, DQPN, PSN, 0x0A, 1023, ackreq=True,
                                                 reth=(0, 1023)),
    "write middle": lambda h, ecn: codec.data_frame(h, DQPN, PSN, 0x07, 1024, ackreq=False),
    "send only": lambda h, ecn: codec.data_frame(h, DQPN, PSN, 0x04, 3, ackreq=True),
    "ack": lambda h, ecn: codec.ack_frame(h, DQPN, 0x123456, 42),
    "nak": lambda h, ecn: codec.ack_frame(h, DQPN, 5, 1, nak=True),
    "cnp": lambda h, ecn: codec.cnp_frame(h, 0x11),
}
SCAPY_IPV6 = {
    "write only": lambda f, ecn: packets.rc_write(f, DQPN, PSN, bytes(1023),
                                                  vaddr=codec.REMOTE_VADDR, rkey=codec.RKEY,
                                                  part="only", ecn=ecn),
    "write middle": lambda f, ecn: packets.rc_write(f, DQPN, PSN, bytes(1024),
                                                    part="middle", ecn=ecn),
    "send only": lambda f, ecn: packets.rc_send(f, DQPN, PSN, bytes(3), ecn=ecn),
    "ack": lambda f, ecn: packets.rc_ack(f, DQPN, 0x123456, 42, ecn=ecn),
    "nak": lambda f, ecn: packets.rc_nak(f, DQPN, 5, 1, ecn=ecn),
    "cnp": lambda f, ecn: packets.cnp(f, 0x11, ecn=ecn),
}


@pytest.mark.parametrize("ecn", [roce.NOT_ECT, roce.ECT0, roce.CE])
@pytest.mark.parametrize("kind", list(IPV6_KINDS))
def test_ipv6_frames_match_scapy_byte_for_byte_icrc_included(kind, ecn):
    ours = IPV6_KINDS[kind](headers6(ecn=ecn), ecn)
    theirs = bytes(SCAPY_IPV6[kind](packets.Flow(SRC_MAC, DST_MAC, SRC6, DST6, sport=0xC001,
                                                 dscp=26), ecn))
    assert_same(ours, theirs)
    assert int.from_bytes(ours[-4:], "big") == scapy_icrc(ours)
    assert roce.verify_icrc(ours)
    pkt = Ether(ours)
    assert pkt.type == 0x86DD and pkt[IPv6].nh == 17 and pkt[IPv6].fl == 0
    assert pkt[IPv6].tc == 26 << 2 | ecn and pkt[IPv6].plen == len(ours) - 54


def test_ipv6_icrc_masks_traffic_class_flow_label_and_hop_limit_only():
    frame = bytearray(codec.data_frame(headers6(), DQPN, PSN, 0x0A, 64, ackreq=True,
                                      reth=(0, 64)))
    frame[14:18] = bytes([0x6F, 0xFA, 0xBC, 0xDE])  # traffic class 0xFF, flow label 0xABCDE
    frame[21] = 3  # hop limit after a few routers
    assert roce.verify_icrc(bytes(frame))
    assert int.from_bytes(frame[-4:], "big") == scapy_icrc(bytes(frame))
    frame[30] ^= 1  # a source address bit is covered
    assert not roce.verify_icrc(bytes(frame))


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("ecn", [0, 2, 3])
def test_parse_round_trips_ipv6_data_frames(payload, ecn):
    frame = codec.data_frame(headers6(ecn=ecn), DQPN, PSN, 0x06, payload, ackreq=True,
                            reth=(0, 4096))
    assert codec.parse(frame) == codec.Incoming(
        src_ip=bytes.fromhex("20010db8000100010000000000000011"), ecn=ecn, opcode=0x06,
        dqpn=DQPN, psn=PSN, ackreq=True, payload=payload, aeth=None)
    assert codec.parse(frame + bytes(6)) == codec.parse(frame)


def test_parse_reads_ipv6_acks_and_cnps():
    ack = codec.parse(codec.ack_frame(headers6(ecn=0), DQPN, 9, 4, nak=True))
    assert (ack.opcode, ack.psn, ack.aeth, ack.payload) == (0x11, 9, 0x60 << 24 | 4, 0)
    cnp = codec.parse(codec.cnp_frame(headers6(dscp=48, ecn=0), 0x42))
    assert (cnp.opcode, cnp.dqpn, cnp.payload) == (0x81, 0x42, 0)
