"""What a capture records and what a probe concludes from it, without root or a lab.

The AF_PACKET readers get fake sockets, the pcapng writer a tmp folder, and ProbeResult
synthetic sightings built from real probe frames as each hop would have rewritten them.
"""
from __future__ import annotations

import dataclasses
import shutil
import socket
import struct
import subprocess

import pytest
from scapy.utils import PcapNgReader

from rocelab.fabric import afpacket
from rocelab.labs.pcap import PcapFiles
from rocelab.labs.sighting import Sighting, vlan_tag
from rocelab.nic.roce import CE, ECT0, classify
from rocelab.traffic.packets import Flow, pfc_frame, rc_send
from rocelab.traffic.probe import PROBE_MAGIC, PROBE_QPN, ProbeResult

H1_MAC, GW_MAC, H3_MAC = "02:00:00:00:01:11", "02:52:4c:00:01:01", "02:00:00:00:02:13"
SENT = Flow(H1_MAC, GW_MAC, "10.1.1.11", "10.1.2.13", vid=0, pcp=3)
HOSTS = frozenset({"h1", "h2", "h3", "h4"})
# the route of h1 -> h3 over spine1: (node, iface, direction, TTL on that wire, tagged)
PATH = [("h1", "eth1", "out", 64, True), ("leaf1", "eth3", "in", 64, True),
        ("leaf1", "eth1", "out", 63, False), ("spine1", "eth1", "in", 63, False),
        ("spine1", "eth2", "out", 62, False), ("leaf2", "eth1", "in", 62, False),
        ("leaf2", "eth3", "out", 61, False), ("h3", "eth1", "in", 61, False)]


def probe_frame(nonce: bytes, *, ttl: int = 64, tagged: bool = True, ecn: int = ECT0,
                psn: int = 0) -> bytes:
    flow = dataclasses.replace(SENT, ttl=ttl, vid=0 if tagged else None)
    return bytes(rc_send(flow, PROBE_QPN, psn, PROBE_MAGIC + nonce, ecn=ecn))


def nonce(i: int) -> bytes:
    return bytes([i]) * 8


def journey(i: int, hops=PATH, t0: float = 0.0, **frame_kw) -> list[Sighting]:
    """Frame ``i``'s sightings along ``hops``, 1 ms apart."""
    return [Sighting.of(node, iface, direction, t0 + n * 1e-3,
                        probe_frame(nonce(i), ttl=ttl, tagged=tagged, psn=i, **frame_kw))
            for n, (node, iface, direction, ttl, tagged) in enumerate(hops)]


def result(sightings: list[Sighting], count: int = 2, kind: str = "v2",
           dst: str = "h3") -> ProbeResult:
    sent = [probe_frame(nonce(i), psn=i) for i in range(count)]
    return ProbeResult(kind, "h1", dst, sent, sightings, hosts=HOSTS)


# ------------------------------------------------------------------------ AF_PACKET


class FakeSocket:
    """Hands out one queued recvmsg() answer, then would block."""

    def __init__(self, data: bytes, anc: list, pkttype: int = socket.PACKET_HOST) -> None:
        self.queue = [(data, anc, 0, ("eth1", afpacket.ETH_P_ALL, pkttype, 1, b""))]

    def recvmsg(self, _size: int, _ancsize: int):
        if not self.queue:
            raise BlockingIOError
        return self.queue.pop()


def auxdata(status: int, tci: int, tpid: int = 0) -> tuple[int, int, bytes]:
    return (afpacket.SOL_PACKET, afpacket.PACKET_AUXDATA,
            afpacket.AUXDATA.pack(status, 60, 60, 14, 0, tci, tpid))


def test_recv_frame_puts_the_stripped_vlan_tag_back():
    untagged = probe_frame(nonce(1), tagged=False)
    sock = FakeSocket(untagged, [auxdata(afpacket.TP_STATUS_VLAN_VALID, 3 << 13)])
    frame, pkttype = afpacket.recv_frame(sock)
    assert frame == probe_frame(nonce(1))  # the priority tag (VID 0, PCP 3) is back
    assert pkttype == socket.PACKET_HOST
    assert afpacket.recv_frame(sock) is None


def test_recv_frame_leaves_untagged_frames_and_reports_outgoing():
    frame = probe_frame(nonce(1), tagged=False)
    sock = FakeSocket(frame, [auxdata(0, 0)], socket.PACKET_OUTGOING)
    assert afpacket.recv_frame(sock) == (frame, socket.PACKET_OUTGOING)


def test_recv_stamped_reads_the_kernel_timestamp():
    stamp = (socket.SOL_SOCKET, afpacket.SO_TIMESTAMPNS,
             afpacket.TIMESPEC.pack(1_700_000_000, 250_000_000))
    frame = probe_frame(nonce(1), tagged=False)
    sock = FakeSocket(frame, [auxdata(0, 0), stamp])
    assert afpacket.recv_stamped(sock) == (frame, socket.PACKET_HOST, 1_700_000_000.25)
    assert afpacket.recv_stamped(FakeSocket(frame, []))[2] is None


SLOT, BLOCK = 192, 512  # two slots per block and a gap, as the kernel lays them out
MAC_OFFSET = 66  # where the kernel puts a SOCK_RAW frame in a TPACKET_V2 slot


def ring_slot(ring: bytearray, at: int, frame: bytes, flags: int = 0, tci: int = 0,
              tpid: int = 0, pkttype: int = socket.PACKET_HOST, snaplen: int | None = None):
    """Fill a slot as the kernel does: header, sockaddr_ll's packet type, frame; ours."""
    snaplen = len(frame) if snaplen is None else snaplen
    afpacket.TPACKET2_HDR.pack_into(ring, at, afpacket.TP_STATUS_USER | flags, len(frame),
                                    snaplen, MAC_OFFSET, MAC_OFFSET + 14, 0, 0, tci, tpid)
    ring[at + afpacket.SLOT_PKTTYPE] = pkttype
    ring[at + MAC_OFFSET:at + MAC_OFFSET + snaplen] = frame[:snaplen]


def test_rx_ring_takes_frames_in_slot_order_across_blocks_and_hands_slots_back():
    ring = bytearray(2 * BLOCK)
    rx = afpacket.RxRing(ring, 4, SLOT, BLOCK)
    assert rx.slots == [0, 192, 512, 704] and rx.take(8) == []
    frames = [probe_frame(nonce(i), tagged=False) for i in range(6)]
    for i, at in enumerate(rx.slots):
        ring_slot(ring, at, frames[i])
    assert rx.take(3) == frames[:3]  # at most the limit
    assert ring[0:4] == bytes(4) and ring[704] & afpacket.TP_STATUS_USER  # 3 handed back
    assert rx.take(3) == frames[3:4] and rx.take(3) == []
    assert all(ring[at:at + 4] == bytes(4) for at in rx.slots)  # the kernel's again
    ring_slot(ring, 0, frames[4], pkttype=socket.PACKET_OUTGOING)  # wrapped around
    ring_slot(ring, 192, frames[5])
    assert rx.take(8) == frames[5:6]  # our own transmission left out, its slot handed back
    assert ring[0:4] == bytes(4)


def test_rx_ring_puts_the_stripped_vlan_tag_back():
    ring = bytearray(BLOCK)
    rx = afpacket.RxRing(ring, 2, SLOT, BLOCK)
    ring_slot(ring, 0, probe_frame(nonce(1), tagged=False), afpacket.TP_STATUS_VLAN_VALID,
              tci=3 << 13)
    assert rx.take(1) == [probe_frame(nonce(1))]  # 0x8100, VID 0, PCP 3
    ring_slot(ring, SLOT, probe_frame(nonce(2), tagged=False), afpacket.TP_STATUS_VLAN_VALID
              | afpacket.TP_STATUS_VLAN_TPID_VALID, tci=3 << 13, tpid=0x88A8)
    (frame,) = rx.take(1)
    assert frame[12:16] == bytes.fromhex("88a86000")


def test_oldest_stamp_is_the_kernels_receive_time_of_the_next_frame():
    ring = bytearray(BLOCK)
    rx = afpacket.RxRing(ring, 2, SLOT, BLOCK)
    assert afpacket.oldest_stamp(rx) is None  # nothing waiting
    for at, (sec, nsec) in zip(rx.slots, [(1_700_000_000, 250_000_000), (1_700_000_001, 0)]):
        ring_slot(ring, at, probe_frame(nonce(at), tagged=False))
        afpacket.SLOT_STAMP.pack_into(ring, at + afpacket.SLOT_STAMP_OFFSET, sec, nsec)
    assert afpacket.oldest_stamp(rx) == 1_700_000_000.25
    rx.take(1)
    assert afpacket.oldest_stamp(rx) == 1_700_000_001.0
    rx.take(1)
    assert afpacket.oldest_stamp(rx) is None


def test_rx_ring_skips_and_counts_frames_longer_than_a_slot():
    ring = bytearray(BLOCK)
    rx = afpacket.RxRing(ring, 2, SLOT, BLOCK)
    long, short = probe_frame(nonce(1), tagged=False) + bytes(SLOT), probe_frame(nonce(2))
    ring_slot(ring, 0, long, snaplen=SLOT - MAC_OFFSET)
    ring_slot(ring, SLOT, short[:100])
    assert rx.take(4) == [short[:100]] and rx.truncated == 1


# ------------------------------------------------------------------------ sightings


def test_sighting_reads_tag_and_roce_fields():
    s = Sighting.of("h1", "eth1", "out", 1.0, probe_frame(nonce(1), ttl=63))
    assert (s.pcp, s.vid, s.port) == (3, 0, "h1:eth1")
    assert s.info is not None and s.info.ttl == 63 and s.info.icrc_ok
    pfc = Sighting.of("leaf1", "eth3", "in", 1.0, bytes(pfc_frame(H1_MAC, {3: 0xFFFF})))
    assert (pfc.info, pfc.pcp, pfc.vid) == (None, None, None)


def test_vlan_tag():
    tagged = probe_frame(nonce(1))
    assert vlan_tag(tagged) == (3, 0)
    assert vlan_tag(tagged[:12] + struct.pack("!HH", 0x8100, 5 << 13 | 100) + tagged[16:]) \
        == (5, 100)
    assert vlan_tag(probe_frame(nonce(1), tagged=False)) == (None, None)
    assert vlan_tag(b"\x00" * 10) == (None, None)


# ------------------------------------------------------------------------ pcapng


def test_pcap_files_keep_exact_bytes_direction_and_time(tmp_path):
    files = PcapFiles(tmp_path / "evidence")
    out, back = probe_frame(nonce(1)), probe_frame(nonce(2), tagged=False)
    files.write("h1", "eth1", "out", 1_700_000_000_500_000_000, out)
    files.write("h1", "eth1", "in", 1_700_000_001_250_000_086, back)
    files.write("leaf1", "eth3", "in", 1_700_000_000_750_000_000, out)
    written = files.close()
    assert sorted(p.name for p in written) == ["h1-eth1.pcapng", "leaf1-eth3.pcapng"]
    packets = list(PcapNgReader(str(tmp_path / "evidence" / "h1-eth1.pcapng")))
    assert [bytes(p) for p in packets] == [out, back]
    assert [p.direction for p in packets] == [2, 1]  # pcapng: 2 outbound, 1 inbound
    assert [p.sniffed_on for p in packets] == ["h1:eth1", "h1:eth1"]
    assert [float(p.time) for p in packets] == pytest.approx(  # scapy reads floats back
        [1_700_000_000.5, 1_700_000_001.250_000_086], abs=1e-6)
    assert classify(bytes(packets[0])).icrc_ok  # byte-exact: the ICRC still checks


def test_pcap_files_keep_nanoseconds_as_tshark_reads_them(tmp_path):
    """Frames 86 ns apart (one 1 KB frame at 100G) stay 86 ns apart: microsecond stamps
    would merge a simulated wire's frames."""
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed (scripts/install.sh installs it)")
    files = PcapFiles(tmp_path)
    for ns in (0, 86, 1500, 3000):
        files.write("h1", "eth1", "out", ns, probe_frame(nonce(1)))
    (path,) = files.close()
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e",
                          "frame.time_relative"], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0.000000000", "0.000000086", "0.000001500", "0.000003000"]


def test_pcap_files_write_nothing_when_nothing_was_seen(tmp_path):
    assert PcapFiles(tmp_path / "empty").close() == []
    assert list((tmp_path / "empty").iterdir()) == []


# ------------------------------------------------------------------------ ProbeResult


def test_routed_probe_reach_ports_and_ttl():
    r = result(journey(0) + journey(1, t0=0.1))
    assert r.received_by() == {"leaf1", "spine1", "leaf2", "h3"}
    assert r.hosts_reached() == {"h3"}
    assert r.seen_on() == {(node, iface) for node, iface, *_ in PATH}
    assert r.stopped_at() == {}
    assert r.verdict() == "v2 h1 -> h3: reached h3; seen on 8 ports; TTL 64 -> 61"


def test_journeys_follow_each_frame_by_its_nonce():
    spine2 = [(n.replace("spine1", "spine2"), *rest) for n, *rest in PATH]
    r = result(journey(0) + journey(1, spine2, t0=0.0005))
    paths = r.journeys()
    assert sorted(paths) == [0, 1]
    assert [s.port for s in paths[0]] == [f"{n}:{i}" for n, i, *_ in PATH]
    assert {s.node for s in paths[1] if s.node.startswith("spine")} == {"spine2"}


def test_changes_in_path_order_with_what_changed():
    r = result(journey(0) + journey(1, t0=0.1))
    changes = r.changes()
    assert [(c.node, c.iface, c.direction) for c in changes] == [p[:3] for p in PATH]
    first, routed, last = changes[0], changes[2], changes[-1]
    assert (first.frames, first.ttl, first.pcp, first.vid, first.changed) == (
        2, (64,), (3,), (0,), ())
    assert routed.ttl == (63,) and routed.changed == ("ttl", "pcp", "vid")
    assert (last.ttl, last.dscp, last.ecn, last.icrc_ok) == ((61,), (26,), (ECT0,), (True,))


def test_changes_report_ecn_marks_and_a_broken_icrc():
    marked = journey(0, PATH[-1:], ecn=CE)[0]
    corrupted = bytearray(probe_frame(nonce(1), ttl=61, tagged=False, psn=1))
    corrupted[14 + 20 + 8 + 7] ^= 0xFF  # the BTH's dest QP: the ICRC no longer matches
    broken = Sighting.of("h3", "eth1", "in", 0.002, bytes(corrupted))
    r = result([marked, broken])
    (obs,) = r.changes()
    assert obs.ecn == (ECT0, CE) and obs.icrc_ok == (False, True)
    assert set(obs.changed) == {"ttl", "ecn", "pcp", "vid", "icrc_ok"}
    assert "ICRC invalid on h3:eth1" in r.verdict()


def test_dropped_probe_names_where_it_stopped():
    r = result(journey(0, PATH[:2]) + journey(1, PATH[:2], t0=0.1), kind="v1")
    assert r.hosts_reached() == set()
    assert r.stopped_at() == {"leaf1": 2}
    assert r.verdict() == ("v1 h1 -> h3: did not reach h3 (reached no host); "
                           "stopped at leaf1 (2 of 2); seen on 2 ports")


def test_probe_flooded_to_the_wrong_host_says_so():
    wrong = [("h1", "eth1", "out", 64, True), ("leaf1", "eth3", "in", 64, True),
             ("leaf1", "eth4", "out", 64, False), ("h2", "eth1", "in", 64, False)]
    r = result(journey(0, wrong), count=1)
    assert r.verdict().startswith("v2 h1 -> h3: did not reach h3 (but reached h2)")


def test_pfc_probe_consumed_by_the_switch():
    frame = bytes(pfc_frame(H1_MAC, {3: 0xFFFF}))
    sightings = [Sighting.of(node, "eth" + iface, direction, t, frame)
                 for t, (node, iface, direction) in enumerate(
                     [("h1", "1", "out"), ("leaf1", "3", "in")] * 3)]
    r = ProbeResult("pfc", "h1", "h3", [frame] * 3, sightings, hosts=HOSTS)
    assert r.journeys() == {}
    assert r.received_by() == {"leaf1"} and r.hosts_reached() == set()
    assert r.stopped_at() == {"leaf1": 3}
    assert [(c.node, c.direction, c.frames, c.ttl, c.changed) for c in r.changes()] == [
        ("h1", "out", 3, (None,), ()), ("leaf1", "in", 3, (None,), ())]
    assert r.verdict() == ("pfc h1 -> h3: reached no host; stopped at leaf1 (3 of 3); "
                           "seen on 2 ports")


def test_capture_losses_are_reported():
    r = result(journey(0), count=1)
    r.capture_drops = 4
    assert r.verdict().endswith("capture lost 4 frames: sightings incomplete")
