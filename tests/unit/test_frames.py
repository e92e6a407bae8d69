"""Header codecs, checksums and the ECMP hash of fabric.model (pure functions)."""
from __future__ import annotations

import random
import struct

import pytest
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw

from rocelab.fabric.model import frames as f
from rocelab.fabric.model.ecmp import ecmp_index, flow_hash, packet_flow_hash


def naive_checksum(data: bytes) -> int:
    """RFC 1071 the slow, obvious way: add 16-bit words with end-around carry."""
    if len(data) % 2:
        data += b"\x00"
    total = 0
    for (word,) in struct.iter_unpack("!H", data):
        total += word
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def test_internet_checksum_matches_naive_sum_for_all_shapes():
    rng = random.Random(1)
    samples = [b"", b"\x00", b"\x00\x00", b"\xff\xff", b"\xff\xff\xff\xff", b"\x12",
               b"\xff" * 7, bytes(range(256))]
    samples += [rng.randbytes(rng.randrange(1, 1600)) for _ in range(300)]
    for data in samples:
        assert f.internet_checksum(data) == naive_checksum(data), data[:16].hex()


def test_ipv4_builder_matches_scapy():
    packet = f.ipv4_packet(f.ip_int("10.1.1.11"), f.ip_int("10.1.2.13"), 17, b"x" * 30,
                           ttl=17, tos=0x6A, ident=7)
    reference = bytes(IP(src="10.1.1.11", dst="10.1.2.13", proto=17, ttl=17, tos=0x6A, id=7,
                         flags=0) / Raw(b"x" * 30))
    assert packet == reference


def test_a_routed_packet_is_the_header_then_the_packet_with_its_ttl_decremented():
    """``routed_ipv4`` (one copy when compiled) gives what the slices and ``ttl_decrement``
    give, whatever the bytes, lengths and head; what cannot be routed is refused."""
    rng = random.Random(3)
    for _ in range(2000):
        head = rng.choice((b"", rng.randbytes(14)))
        off = rng.choice((0, 14, 18))
        frame = rng.randbytes(off + rng.randrange(20, 300))
        frame = frame[:off + 8] + bytes([rng.randrange(1, 256)]) + frame[off + 9:]
        total = rng.randrange(20, len(frame) - off + 1)
        csum, ttl, proto = frame[off + 10] << 8 | frame[off + 11], frame[off + 8], frame[off + 9]
        assert f.routed_ipv4(head, frame, off, total) == (
            head + frame[off:off + 8] + f.ttl_decrement(csum, ttl, proto)
            + frame[off + 12:off + total])
    packet = bytes(8) + b"\x40" + bytes(11)
    for frame, off, total in ((packet, 0, 21), (packet, 1, 20), (packet, 0, 19),
                              (bytes(20), 0, 20)):  # too long, too short, TTL 0
        with pytest.raises(ValueError, match="no routable IPv4 packet"):
            f.routed_ipv4(b"", frame, off, total)


def test_rfc1624_ttl_decrement_equals_full_recompute():
    rng = random.Random(2)
    for _ in range(3000):
        header = bytearray(rng.randbytes(20))
        header[0] = 0x45
        header[8] = rng.randrange(2, 256)
        header[10:12] = b"\x00\x00"
        header[10:12] = struct.pack("!H", naive_checksum(bytes(header)))
        ttl, proto, (csum,) = header[8], header[9], struct.unpack_from("!H", header, 10)
        updated = bytearray(header)
        updated[8:12] = f.ttl_decrement(csum, ttl, proto)
        assert updated[8] == ttl - 1
        assert naive_checksum(bytes(updated)) == 0  # still verifies
        recomputed = bytearray(updated)
        recomputed[10:12] = b"\x00\x00"
        assert struct.unpack_from("!H", updated, 10)[0] == naive_checksum(bytes(recomputed))


def test_checksum_adjust_edge_values():
    # Words that drive the sum to 0xffff/0x0000 are where RFC 1141 updates went wrong.
    for old in (0x0000, 0x0001, 0xFFFE, 0xFFFF, 0x0100):
        for new in (0x0000, 0x0001, 0xFFFE, 0xFFFF, 0x00FF):
            data = struct.pack("!HHH", 0x1234, old, 0xABCD)
            csum = naive_checksum(data)
            adjusted = f.checksum_adjust(csum, old, new)
            fresh = naive_checksum(struct.pack("!HHH", 0x1234, new, 0xABCD))
            # one's complement has two zeros; a verifying checksum is what matters
            assert naive_checksum(struct.pack("!HHHH", 0x1234, new, 0xABCD, adjusted)) == 0
            assert adjusted == fresh or {adjusted, fresh} == {0x0000, 0xFFFF}


def test_parse_l2_untagged_and_tagged():
    frame = bytes(Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01") /
                  Dot1Q(vlan=100, prio=3) / IP() / UDP())
    l2 = f.parse_l2(frame)
    assert (l2.tagged, l2.vid, l2.pcp, l2.ethertype, l2.payload_offset) == (True, 100, 3,
                                                                           0x0800, 18)
    assert f.mac_text(l2.dst) == "02:00:00:00:00:02"
    plain = f.parse_l2(bytes(Ether() / ARP()))
    assert (plain.tagged, plain.ethertype, plain.payload_offset) == (False, 0x0806, 14)


def test_vlan_tag_and_frame_builder():
    assert f.vlan_tag(100, 3) == b"\x81\x00\x60\x64"
    assert f.vlan_tag(0, 7, 1) == b"\x81\x00\xf0\x00"
    frame = f.ethernet_frame(f.BROADCAST_MAC, b"\x02" * 6, f.ETH_P_ARP, b"\x01" * 28,
                             tag=f.vlan_tag(5), pad=True)
    assert len(frame) == 64 and frame[12:16] == f.vlan_tag(5) and frame[16:18] == b"\x08\x06"


def test_arp_codec_round_trip_and_matches_scapy():
    body = f.arp_packet(f.ARP_REQUEST, b"\x02\x00\x00\x00\x00\x01", f.ip_int("10.1.1.11"),
                        f.ZERO_MAC, f.ip_int("10.1.1.1"))
    reference = bytes(ARP(op=1, hwsrc="02:00:00:00:00:01", psrc="10.1.1.11",
                          hwdst="00:00:00:00:00:00", pdst="10.1.1.1"))
    assert body == reference
    parsed = f.parse_arp(body)
    assert parsed == f.ArpPacket(1, b"\x02\x00\x00\x00\x00\x01", f.ip_int("10.1.1.11"),
                                 f.ZERO_MAC, f.ip_int("10.1.1.1"))
    assert f.parse_arp(body[:20]) is None


def test_icmp_echo_reply_keeps_id_seq_data_and_checksum_valid():
    request = bytes(ICMP(type=8, id=0x1234, seq=9) / Raw(b"ping" * 300))
    reply = f.icmp_echo_reply(request)
    assert reply[0] == 0 and reply[4:] == request[4:]
    assert naive_checksum(reply) == 0
    assert bytes(ICMP(reply)) == reply  # scapy agrees field by field


def test_icmp_error_quotes_at_most_576_byte_datagram():
    original = bytes(IP(src="1.2.3.4", dst="5.6.7.8", ttl=1) / UDP() / Raw(b"z" * 1000))
    message = f.icmp_error(f.ICMP_TIME_EXCEEDED, 0, original)
    assert message[0] == 11 and message[1] == 0 and message[4:8] == b"\x00" * 4
    assert 20 + len(message) == 576 and message[8:] == original[:548]
    assert naive_checksum(message) == 0


def test_link_local_control_addresses():
    assert f.is_link_local_control(f.PFC_MAC)
    assert f.is_link_local_control(bytes.fromhex("0180c200000e"))  # LLDP
    assert not f.is_link_local_control(bytes.fromhex("0180c2000010"))
    assert not f.is_link_local_control(f.BROADCAST_MAC)


def test_flow_hash_is_the_packed_tuple_and_matches_packet_hash():
    src, dst = f.ip_int("10.1.1.11"), f.ip_int("10.1.2.13")
    packet = bytes(IP(src="10.1.1.11", dst="10.1.2.13") / UDP(sport=49153, dport=4791))
    import zlib
    assert flow_hash(src, dst, 17, 49153, 4791) == zlib.crc32(
        struct.pack("!IIBHH", src, dst, 17, 49153, 4791))
    assert packet_flow_hash(packet) == flow_hash(src, dst, 17, 49153, 4791)
    icmp = bytes(IP(src="10.1.1.11", dst="10.1.2.13") / ICMP())
    assert packet_flow_hash(icmp) == flow_hash(src, dst, 1)
    fragment = bytes(IP(src="10.1.1.11", dst="10.1.2.13", flags="MF") / UDP(sport=1, dport=2))
    assert packet_flow_hash(fragment) == flow_hash(src, dst, 17)  # no ports on fragments
    assert ecmp_index(src, dst, 17, 49153, 4791, 2) == flow_hash(src, dst, 17, 49153, 4791) % 2


def test_packet_flow_hash_reads_the_header_where_it_sits_with_salt_options_and_short_ports():
    """The compiled hash continues crc32 over the frame's own bytes: the same value as the
    key of slices, behind an Ethernet header, with a salt, past IP options, and with only
    part of the ports in a cut-off packet (as the slice takes them)."""
    import zlib

    def sliced(packet: bytes, off: int, salt: int) -> int:
        ihl = (packet[off] & 0x0F) << 2
        key = packet[off + 12:off + 20] + bytes((packet[off + 9],))
        if packet[off + 9] in (6, 17) and not (packet[off + 6] << 8 | packet[off + 7]) & 0x3FFF:
            key += packet[off + ihl:off + ihl + 4]
        return zlib.crc32(key, salt)

    eth = bytes(14)
    udp = bytes(IP(src="10.1.1.11", dst="10.1.2.13") / UDP(sport=49153, dport=4791))
    options = bytes(IP(src="10.1.1.11", dst="10.1.2.13", options=b"\x01" * 8) / TCP(sport=7))
    for packet in (udp, options, udp[:22], udp[:20]):
        for salt in (0, 1, 0xDEADBEEF, 0xFFFFFFFF):
            assert packet_flow_hash(eth + packet, 14, salt) == sliced(eth + packet, 14, salt)
    assert packet_flow_hash(eth + udp, 14, 5) != packet_flow_hash(eth + udp, 14, 6)


def test_bytes_at_is_the_slice_inside_the_frame_and_past_its_end():
    frame = bytes(range(20))
    for start, n in ((0, 6), (6, 6), (14, 6), (18, 6), (20, 1), (25, 4), (3, 0)):
        assert f.bytes_at(frame, start, n) == frame[start:start + n]
