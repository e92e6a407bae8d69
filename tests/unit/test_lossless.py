"""The lossless pipeline wired into Switch, with exact times: ingress admission and PFC out
of the ingress port (XOFF, refresh, XON), lossy PGs that drop and never pause, received PFC
gating one egress queue, WRED/ECN, headroom exhaustion, pacing at speed / S.

leaf1's real config_db.json, with the ingress pool shrunk so XOFF comes after a few hundred
frames instead of megabytes: h2 (Ethernet12) sends to h1 (Ethernet8), bridged in Vlan100.
"""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from rocelab.fabric.config_load import parse
from rocelab.fabric.model import Switch
from rocelab.fabric.model.frames import (ETH_P_IPV4, IPPROTO_UDP, PFC_MAC, ethernet_frame,
                                         ip_int, mac_bytes, parse_mac_control, ipv4_packet,
                                         pfc_frame)
from rocelab.fabric.model.pause import MAX_QUANTA, pause_seconds
from rocelab.fabric.model.wred import CE, ECT0, ecn_field
from tests.unit.test_forwarding import H1, H1_IP, H2, H2_IP, LEAF1_JSON

H1_PORT, H2_PORT = "Ethernet8", "Ethernet12"
S = 1000.0
RATE = 100e9 / S  # leaf1's ports are 100G
POOL = 262144  # ingress pool, shrunk: a PG alone XOFFs at ~half of it
FRAME = 1000  # bytes per test frame


def leaf1(pool: int = POOL, headroom_pool: int | None = None,
          pfc_enable: str | None = None, rand: float = 0.5,
          ecn_marking: str = "dequeue") -> Switch:
    data = json.loads(LEAF1_JSON.read_text())
    data["BUFFER_POOL"]["ingress_lossless_pool"]["size"] = str(pool)
    if headroom_pool is not None:
        data["BUFFER_POOL"]["ingress_lossless_pool"]["xoff"] = str(headroom_pool)
    if pfc_enable is not None:
        for entry in data["PORT_QOS_MAP"].values():
            entry["pfc_enable"] = pfc_enable
    return Switch(parse(data, str(LEAF1_JSON)), time_scale=S, rand=lambda: rand,
                  ecn_marking=ecn_marking)


def udp_frame(dscp: int, ecn: int = ECT0, size: int = FRAME, src: str = H2,
              dst: str = H1) -> bytes:
    payload = bytes(size - 14 - 20)
    packet = ipv4_packet(ip_int(H2_IP), ip_int(H1_IP), IPPROTO_UDP, payload,
                         tos=dscp << 2 | ecn)
    return ethernet_frame(mac_bytes(dst), mac_bytes(src), ETH_P_IPV4, packet)


def learned(sw: Switch) -> Switch:
    """h1 and h2 known to the bridge (h1's frame flooded to h2 and sent: h2's wire is idle,
    so the frame cuts through, out of ``receive`` with nothing left queued)."""
    frame = udp_frame(0, src=H1, dst=H2)
    assert sw.receive(H1_PORT, frame, 0.0) == [(H2_PORT, frame)]
    assert sw.backlogged() == [] and sw.dequeue(H2_PORT, 0.0) is None
    return sw


def pfc_quanta(out: list[tuple[str, bytes]], port: str) -> list[dict[int, int]]:
    """The PFC frames among ``out`` sent out of ``port``, as {priority: quanta}."""
    found = []
    for name, frame in out:
        if frame.startswith(PFC_MAC):
            assert name == port, (name, port)
            opcode, quanta = parse_mac_control(frame, 14)
            assert opcode == 0x0101 and len(frame) == 60
            found.append(quanta)
    return found


def blast_until_pfc(sw: Switch, now: float = 0.0, dscp: int = 26,
                    limit: int = 2000) -> tuple[int, list[dict[int, int]]]:
    for n in range(1, limit + 1):
        quanta = pfc_quanta(sw.receive(H2_PORT, udp_frame(dscp), now), H2_PORT)
        if quanta:
            return n, quanta
    return limit, []


def test_next_timer_is_when_tick_has_work():
    """PFC refresh due at half the pause, watchdog polls every poll interval x S, the FDB
    sweep: a caller that ticks only at next_timer sends every refresh on time, so the
    upstream's pause never lapses while the PG stays in XOFF."""
    sw = learned(leaf1())
    sw.tick(0.0)  # first polls and sweep
    idle = sw.next_timer()
    assert idle == 1.0  # the FDB sweep; the watchdogs' polls are 200 ms x S away
    blast_until_pfc(sw)
    half = pause_seconds(MAX_QUANTA, RATE) / 2
    assert sw.next_timer() == half  # XOFF at 0.0: the refresh
    refreshes, now = [], 0.0
    while len(refreshes) < 4:
        now = sw.next_timer()
        out = pfc_quanta(sw.tick(now), H2_PORT)
        if out:
            refreshes.append(now)
    assert refreshes == pytest.approx([half * k for k in range(1, 5)])
    watchdogs = sw.counters()["ports"][H1_PORT]["watchdog"]
    assert watchdogs and sw.counters()["pfc_watchdog"] == "fabric"


def test_xoff_sends_pfc_for_priority_3_out_of_the_ingress_port_at_once():
    sw = learned(leaf1())
    n, quanta = blast_until_pfc(sw)
    assert quanta == [{3: MAX_QUANTA}]
    pg = sw.counters()["ports"][H2_PORT]["pgs"]["3"]
    assert pg["xoff"] and pg["xoff_count"] == 1
    assert n * FRAME > pg["reserved"]  # past the reserved part, at the shared threshold
    assert sw.counters()["ports"][H2_PORT]["pfc_tx"] == [0, 0, 0, 1, 0, 0, 0, 0]
    # the PFC frame itself, byte by byte: PFC MAC, our MAC, 0x8808, opcode, vector 0x0008
    frame = pfc_frame(sw.router_mac, {3: MAX_QUANTA})
    assert frame[:6] == bytes.fromhex("0180c2000001") and frame[12:18] == bytes.fromhex(
        "880801010008")


def test_pfc_is_refreshed_at_half_the_pause_then_xon_sends_quanta_0():
    sw = learned(leaf1())
    blast_until_pfc(sw)
    half = pause_seconds(MAX_QUANTA, RATE) / 2
    assert pfc_quanta(sw.tick(half - 1e-6), H2_PORT) == []
    assert pfc_quanta(sw.tick(half), H2_PORT) == [{3: MAX_QUANTA}]
    # drain h1's port at line rate: the PG falls to XON and sends quanta 0
    now, xon = half, []
    while not xon:
        at = sw.next_send_time(H1_PORT)
        assert at is not None, "drained without XON"
        now = max(now, at)
        assert sw.dequeue(H1_PORT, now) is not None
        xon = pfc_quanta(sw.take_control(), H2_PORT)
    assert xon == [{3: 0}]
    assert not sw.counters()["ports"][H2_PORT]["pgs"]["3"]["xoff"]
    assert pfc_quanta(sw.tick(now + 10 * half), H2_PORT) == []  # no refresh in XON


def test_lossy_pg_drops_at_its_limit_and_never_sends_pfc():
    sw = learned(leaf1())
    n, quanta = blast_until_pfc(sw, dscp=0, limit=1000)
    assert quanta == []
    port = sw.counters()["ports"][H2_PORT]
    assert port["drops"].get("lossy_limit", 0) > 0
    assert port["pfc_tx"] == [0] * 8


def test_without_pfc_enable_the_roce_pg_is_lossy():
    sw = learned(leaf1(pfc_enable=""))
    _, quanta = blast_until_pfc(sw, limit=1000)
    assert quanta == []
    assert sw.counters()["ports"][H2_PORT]["drops"].get("lossy_limit", 0) > 0


def test_headroom_exhaustion_drops_are_counted():
    sw = learned(leaf1(headroom_pool=0))  # private headroom: the profile's xoff, 48128 B
    blast_until_pfc(sw)
    for _ in range(60):  # the upstream ignores the pause
        sw.receive(H2_PORT, udp_frame(26), 0.0)
    port = sw.counters()["ports"][H2_PORT]
    assert port["drops"]["headroom_exhausted"] > 0
    assert port["pgs"]["3"]["drops"] == port["drops"]["headroom_exhausted"]
    assert not port["fidelity"]["headroom"][0]["within"]


def test_received_pfc_pauses_queue_3_for_its_quanta_and_other_queues_flow():
    sw = learned(leaf1())
    quanta = 1000
    sw.receive(H1_PORT, pfc_frame(mac_bytes(H1), {3: quanta}), 1.0)
    sw.receive(H2_PORT, udp_frame(26), 1.0)
    sw.receive(H2_PORT, udp_frame(0), 1.0)
    out = sw.dequeue(H1_PORT, 1.0)
    assert out is not None and out[15] >> 2 == 0  # queue 0's frame, DSCP 0
    assert sw.dequeue(H1_PORT, 1.0) is None
    end = 1.0 + quanta * 512 / RATE
    assert sw.next_send_time(H1_PORT) == end
    assert sw.dequeue(H1_PORT, end - 1e-9) is None
    assert sw.dequeue(H1_PORT, end)[15] >> 2 == 26
    port = sw.counters()["ports"][H1_PORT]
    assert port["pfc_rx"] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert abs(port["paused_s"][3] - quanta * 512 / RATE) < 1e-12


def test_pause_and_empty_vector_pfc():
    sw = learned(leaf1())
    empty = pfc_frame(mac_bytes(H1), {})
    sw.receive(H1_PORT, empty, 1.0)
    pause = bytes.fromhex("0180c2000001") + mac_bytes(H1) + bytes.fromhex("88080001ffff")
    sw.receive(H1_PORT, pause + bytes(60 - len(pause)), 1.0)
    port = sw.counters()["ports"][H1_PORT]
    assert port["pfc_rx"] == [0] * 8 and port["pause_rx"] == 1
    sw.receive(H2_PORT, udp_frame(0), 1.0)
    assert sw.dequeue(H1_PORT, 1.0) is None  # PAUSE stops every priority


def test_received_pfc_and_pause_count_as_flow_control_not_as_drops():
    sw = learned(leaf1())
    sw.receive(H1_PORT, pfc_frame(mac_bytes(H1), {3: 1000, 4: 0}), 1.0)
    sw.receive(H1_PORT, pfc_frame(mac_bytes(H1), {}), 1.0)  # empty vector: pauses nothing
    pause = bytes.fromhex("0180c2000001") + mac_bytes(H1) + bytes.fromhex("88080001ffff")
    sw.receive(H1_PORT, pause + bytes(60 - len(pause)), 1.0)
    lldp = ethernet_frame(bytes.fromhex("0180c200000e"), mac_bytes(H1), 0x88CC, bytes(46))
    sw.receive(H1_PORT, lldp, 1.0)  # link-local but no flow control: still a drop
    counters = sw.counters()
    port = counters["ports"][H1_PORT]
    assert port["flow_control"] == 3 and port["drops"] == {"mac_control": 1}
    assert port["pfc_rx"] == [0, 0, 0, 1, 1, 0, 0, 0] and port["pause_rx"] == 1
    assert counters["drops"] == {"mac_control": 1}
    assert port["rx_packets"] == 5 == port["forwarded"] + port["flow_control"] + 1


def drain(sw: Switch, port: str) -> list[bytes]:
    """Everything queued on ``port``, dequeued as the wire frees."""
    now, frames = 0.0, []
    while (at := sw.next_send_time(port)) is not None:
        now = max(now, at)
        frames.append(sw.dequeue(port, now))
    return frames


def test_wred_at_enqueue_marks_frames_that_find_the_queue_above_min():
    sw = learned(leaf1(pool=1 << 24, rand=0.0, ecn_marking="enqueue"))
    minimum = 150000  # AZURE_LOSSLESS green_min_threshold
    for _ in range(minimum // FRAME + 5):
        sw.receive(H2_PORT, udp_frame(26), 0.0)
    sw.receive(H2_PORT, udp_frame(26, ecn=0), 0.0)  # Not-ECT: WRED drops it
    ecns = [ecn_field(f) for f in drain(sw, H1_PORT)]
    first_marked = ecns.index(CE)
    assert first_marked * FRAME >= minimum and set(ecns[first_marked:]) == {CE}
    port = sw.counters()["ports"][H1_PORT]
    assert port["ecn_marked"] == len(ecns) - first_marked
    assert port["egress_drops"] == {"wred": 1}


def test_wred_at_dequeue_marks_frames_that_leave_the_queue_above_min():
    """The same burst, marking at dequeue: a frame is marked when the bytes still queued
    behind it are above the minimum, so the head of the burst is marked and the last
    ~150 KB are not, however long they waited; Not-ECT frames are still dropped on entry."""
    sw = learned(leaf1(pool=1 << 24, rand=0.0))
    minimum = 150000
    for _ in range(minimum // FRAME + 5):
        sw.receive(H2_PORT, udp_frame(26), 0.0)
    sw.receive(H2_PORT, udp_frame(26, ecn=0), 0.0)  # Not-ECT: WRED drops it at enqueue
    ecns = [ecn_field(f) for f in drain(sw, H1_PORT)]
    queued = len(ecns)  # the burst but its first frame, which cut through the idle wire
    behind = [(queued - 1 - k) * FRAME for k in range(queued)]
    assert ecns == [CE if depth > minimum else ECT0 for depth in behind]  # p = 0 at min
    port = sw.counters()["ports"][H1_PORT]
    assert port["ecn_marked"] == ecns.count(CE) > 0
    assert port["egress_drops"] == {"wred": 1}


def test_wred_marking_point_is_validated():
    with pytest.raises(ValueError, match="'ingress' is not one of dequeue, enqueue"):
        leaf1(ecn_marking="ingress")


def test_dequeue_is_paced_at_speed_over_s():
    sw = learned(leaf1())
    first = udp_frame(26)
    assert sw.receive(H2_PORT, first, 5.0) == [(H1_PORT, first)]  # idle wire: cut through
    for _ in range(2):  # the wire is busy with the first frame: these queue
        assert sw.receive(H2_PORT, udp_frame(26), 5.0) == []
    assert sw.backlogged() == [H1_PORT]
    assert sw.dequeue(H1_PORT, 5.0) is None
    assert sw.next_send_time(H1_PORT) == 5.0 + FRAME * 8 / RATE
    assert sw.dequeue(H1_PORT, 5.0 + 2 * FRAME * 8 / RATE) is not None
    assert sw.dequeue(H1_PORT, 5.0 + 2 * FRAME * 8 / RATE) is not None  # caught up
    assert sw.backlogged() == []
    lateness = sw.counters()["ports"][H1_PORT]["fidelity"]["lateness"]
    assert lateness["count"] == 3 and abs(lateness["max_s"] - FRAME * 8 / RATE) < 1e-12


def test_a_frame_cuts_through_only_to_an_idle_unpaused_port_with_a_free_wire():
    sw = learned(leaf1())
    end = 1.0 + 1000 * 512 / RATE
    sw.receive(H1_PORT, pfc_frame(mac_bytes(H1), {3: 1000}), 1.0)
    paused, other = udp_frame(26), udp_frame(0)
    assert sw.receive(H2_PORT, paused, 1.0) == []  # queue 3 is paused: it waits
    assert sw.receive(H2_PORT, other, 1.0) == []  # queue 0 is open, but a frame waits
    assert sw.backlogged() == [H1_PORT] and sw.next_send_time(H1_PORT) == 1.0
    assert sw.dequeue(H1_PORT, 1.0) == other and sw.dequeue(H1_PORT, end) == paused
    later = end + 1.0  # everything sent, the wire free again: straight out, counted
    assert sw.receive(H2_PORT, paused, later) == [(H1_PORT, paused)]
    port = sw.counters()["ports"][H1_PORT]
    assert port["queues"]["3"]["tx_packets"] == 2 and port["queues"]["0"]["tx_packets"] == 1
    assert port["queues"]["3"]["watermark_bytes"] == FRAME
    assert port["fidelity"]["lateness"]["count"] == 3
    assert sw.counters()["ports"][H2_PORT]["pgs"]["3"]["used"] == 0  # its bytes freed


def test_back_to_back_frames_wait_for_the_wire():
    sw = learned(leaf1())
    frame_time = FRAME * 8 / RATE
    first, second = udp_frame(26), udp_frame(26)
    assert sw.receive(H2_PORT, first, 2.0) == [(H1_PORT, first)]
    assert sw.receive(H2_PORT, second, 2.0 + frame_time / 2) == []  # mid-frame: queued
    assert sw.counters()["ports"][H2_PORT]["pgs"]["3"]["used"] == FRAME  # held meanwhile
    assert sw.next_send_time(H1_PORT) == 2.0 + frame_time
    assert sw.dequeue(H1_PORT, 2.0 + frame_time - 1e-9) is None
    assert sw.dequeue(H1_PORT, 2.0 + frame_time) == second
    third = udp_frame(26)
    assert sw.receive(H2_PORT, third, 2.0 + 2 * frame_time) == [(H1_PORT, third)]


def test_a_flood_holds_its_bytes_until_its_queued_copy_leaves():
    """One copy cuts through, the other waits: the frame's PG bytes stay until the second
    leaves (leaf1 with Ethernet4 moved into Vlan100 for a third member)."""
    data = json.loads(LEAF1_JSON.read_text())
    data["INTERFACE"] = {k: v for k, v in data["INTERFACE"].items() if "Ethernet4" not in k}
    data["STATIC_ROUTE"] = {}
    data["VLAN_MEMBER"]["Vlan100|Ethernet4"] = {"tagging_mode": "untagged"}
    sw = Switch(parse(data, str(LEAF1_JSON)), time_scale=S)
    frame_time, bcast = FRAME * 8 / RATE, "ff:ff:ff:ff:ff:ff"
    warm = udp_frame(0, src="02:00:00:00:00:33", dst=bcast)
    assert {p for p, _ in sw.receive("Ethernet4", warm, 1.0)} == {H1_PORT, H2_PORT}
    flood = udp_frame(26, dst=bcast)  # h1's wire is busy with ``warm``, Ethernet4's is idle
    assert sw.receive(H2_PORT, flood, 1.0) == [("Ethernet4", flood)]
    pg = sw.counters()["ports"][H2_PORT]["pgs"]["3"]
    assert pg["used"] == FRAME
    assert sw.dequeue(H1_PORT, 1.0 + frame_time) == flood
    assert sw.counters()["ports"][H2_PORT]["pgs"]["3"]["used"] == 0


@pytest.mark.parametrize("profile, scale", [("fabric", S), ("storm-check", 1.0)])
def test_pfc_storm_is_detected_and_the_watchdog_drops_the_queue(profile, scale):
    """PFC_WD (drop, 200 ms, poll 200 ms) in fabric time, x S, or in the storm check's
    profile, as wall time."""
    sw = learned(leaf1())
    sw.set_watchdog_profile(profile)
    storm = pfc_frame(mac_bytes(H1), {3: MAX_QUANTA})
    sw.receive(H1_PORT, storm, 0.0)  # paused first, so the frame stays in queue 3
    sw.receive(H2_PORT, udp_frame(26), 0.0)
    now, step = 0.0, 0.05 * min(scale, pause_seconds(MAX_QUANTA, RATE) / 0.05 / 2)
    while now < 0.5 * scale:  # h1 keeps pausing queue 3, a pause's time apart at most
        sw.receive(H1_PORT, storm, now)
        if now >= sw.next_timer():
            sw.tick(now)
        now += step
    port = sw.counters()["ports"][H1_PORT]
    (event,) = port["watchdog"]["3"]["events"]
    assert event["kind"] == "storm" and 0.2 * scale <= event["time"] <= (0.4 + 1e-9) * scale
    assert port["egress_drops"] == {"pfc_wd": 1} and sw.backlogged() == []
    sw.receive(H2_PORT, udp_frame(26), now)  # arriving frames are dropped too
    assert sw.counters()["ports"][H1_PORT]["egress_drops"] == {"pfc_wd": 2}
    assert sw.counters()["ports"][H2_PORT]["pgs"]["3"]["used"] == 0  # buffers freed
    sw.tick(now + 0.1 * scale)  # the last PFC came one step before now
    assert sw.counters()["ports"][H1_PORT]["watchdog"]["3"]["stormed"] is True
    while (due := sw.next_timer()) <= now + 0.2 * scale:  # no PFC for 200 ms: restored
        sw.tick(due)
    assert sw.counters()["ports"][H1_PORT]["watchdog"]["3"]["stormed"] is False
    assert sw.counters()["pfc_watchdog"] == profile


def test_watchdog_profile_is_validated():
    with pytest.raises(ValueError, match="'wall' is not one of fabric, storm-check"):
        learned(leaf1()).set_watchdog_profile("wall")


def test_fidelity_verdict_names_what_was_lost():
    from rocelab.fabric.client import fidelity
    sw = learned(leaf1(headroom_pool=0))
    assert fidelity(sw.counters()) == {"ok": True, "problems": [], "worst": None}
    blast_until_pfc(sw)
    for _ in range(60):
        sw.receive(H2_PORT, udp_frame(26), 0.0)
    counters = sw.counters()
    counters["ports"][H1_PORT]["kernel_rx_drops"] = 2
    verdict = fidelity(counters)
    assert not verdict["ok"]
    assert verdict["problems"][0] == "Ethernet8: 2 frames dropped in the kernel"
    assert verdict["problems"][1].startswith("Ethernet12 PG 3: ")


def test_clearing_fidelity_forgets_earlier_episodes_and_lateness_only():
    from rocelab.fabric.client import fidelity
    sw = learned(leaf1(headroom_pool=0))
    blast_until_pfc(sw)
    for _ in range(60):
        sw.receive(H2_PORT, udp_frame(26), 0.0)
    while sw.dequeue(H1_PORT, 1.0) is not None:  # late: the wire was free long before
        pass
    before = sw.counters()
    assert not fidelity(before)["ok"]
    worst = fidelity(before)["worst"]
    assert worst["where"] == H1_PORT and worst["what"] == "lateness" and worst["ratio"] > 1
    assert before["ports"][H1_PORT]["fidelity"]["lateness"]["count"] > 0
    sw.clear_fidelity()
    after = sw.counters()
    assert fidelity(after) == {"ok": True, "problems": [], "worst": None}  # nothing timed
    assert after["ports"][H1_PORT]["fidelity"]["lateness"]["count"] == 0
    pg = after["ports"][H2_PORT]["pgs"]["3"]
    assert pg["after_xoff_max"] == 0
    # the counters themselves are not fidelity: drops and PFC sent stay
    assert pg["drops"] == before["ports"][H2_PORT]["pgs"]["3"]["drops"] > 0
    assert after["ports"][H2_PORT]["pfc_tx"] == before["ports"][H2_PORT]["pfc_tx"]


@pytest.mark.parametrize("key, what", [("lateness", "lateness"), ("ingress_lag", "ingress lag"),
                                       ("arrival_lateness", "arrival lateness")])
@pytest.mark.parametrize("count, late", [(100, True), (99, False)])
def test_lateness_fails_fidelity_only_over_enough_frames(count, late, key, what):
    """A p99 over a handful of frames is the worst one: it is reported, not judged. The
    agent's ingress lag (kernel stamp to taken) is judged like the scheduler's lateness."""
    from rocelab.fabric.client import MIN_FRAMES_FOR_P99, fidelity
    assert MIN_FRAMES_FOR_P99 == 100
    port = {"fidelity": {"mtu_frame_s": 2e-3, "headroom": [],
                         key: {"count": count, "p99_s": 3e-3, "max_s": 5e-3}}}
    verdict = fidelity({"time_scale": 3000, "ports": {"Ethernet8": port}})
    assert verdict["ok"] is not late
    assert verdict["problems"] == ([f"Ethernet8: p99 {what} 3.00 ms > one MTU frame (2.00 ms)"]
                                   if late else [])


def test_with_a_delay_line_a_lag_the_cable_absorbed_is_not_judged():
    """A port with a delay line is judged by its frames' arrival lateness: a long ingress lag
    whose frames still arrived on time over their cable is no problem."""
    from rocelab.fabric.client import fidelity
    port = {"fidelity": {"mtu_frame_s": 2e-3, "headroom": [],
                         "ingress_lag": {"count": 500, "p99_s": 3e-3, "max_s": 5e-3},
                         "arrival_lateness": {"count": 500, "p99_s": 0.5e-3, "max_s": 1e-3}}}
    assert fidelity({"time_scale": 3000, "ports": {"Ethernet8": port}})["ok"]


@pytest.mark.parametrize("quanta", [{3: 0xFFFF}, {3: 0}, {3: 0x1234, 4: 7}])
def test_switch_pfc_frames_are_the_ones_wireshark_decodes(quanta, tmp_path):
    """The switch builds PFC with struct on its hot path; it must be byte for byte the frame
    the crafting module (checked against tshark's CBFC decoding) builds."""
    from rocelab.fabric.model.frames import mac_bytes, pfc_frame as switch_pfc
    from rocelab.traffic.packets import pfc_frame as crafted_pfc
    mac = "02:52:4c:00:01:01"
    assert switch_pfc(mac_bytes(mac), quanta) == bytes(crafted_pfc(mac, quanta))
    if shutil.which("tshark") is None:
        pytest.skip("tshark not installed (apt-get install tshark)")
    from scapy.utils import wrpcap
    from scapy.layers.l2 import Ether
    pcap = tmp_path / "pfc.pcap"
    wrpcap(str(pcap), [Ether(switch_pfc(mac_bytes(mac), quanta))])
    fields = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", "-e", "macc.opcode",
                             "-e", "macc.cbfc.enbv.c3", "-e", "macc.cbfc.pause_time.c3"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert fields[0] == "0x0101"
    assert fields[1] in ("1", "True") and int(fields[2]) == quanta[3]
