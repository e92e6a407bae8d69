"""nic.pause.PauseTimer: how a host obeys the PFC and PAUSE frames it receives, with
injected times. (tests/unit/test_pause.py is the switch-side fabric.model.pause.)

RATE = 2**19 b/s makes a quantum (512 bit times) exactly 2**-10 s, so 1024 quanta are
exactly one second and every sum below is exact."""
from __future__ import annotations

import pytest
from scapy.contrib.mac_control import MACControlPause
from scapy.layers.l2 import ARP, Dot1Q, Ether

from rocelab.traffic import packets

from rocelab.nic import roce
from rocelab.nic import codec
from rocelab.nic.pause import PauseTimer

MAC = "02:00:00:00:00:09"
RATE = 2 ** 19
SECOND = 1024  # quanta at RATE


def pfc(quanta: dict[int, int]) -> bytes:
    return bytes(packets.pfc_frame(MAC, quanta))


def pause(q: int) -> bytes:
    return bytes(packets.pause_frame(MAC, q))


def test_a_pfc_frame_pauses_its_priority_for_q_times_512_bit_times():
    timer = PauseTimer(3, 1e6)
    assert timer.quantum_s == 512 / 1e6
    assert timer.on_frame(pfc({3: 100}), 2.0) is True
    assert timer.until == 2.0512  # 100 * 512 bits at 1 Mb/s = 51.2 ms
    assert timer.began == 2.0
    assert timer.received == {"xoff": 1, "xon": 0, "pause": 0}


def test_pause_length_at_a_binary_rate_is_exact():
    timer = PauseTimer(3, RATE)
    assert timer.quantum_s == 2 ** -10
    timer.on_frame(pfc({3: 100}), 0.0)
    assert timer.until == 0.09765625
    timer.on_frame(pfc({3: 0xFFFF}), 1.0)
    assert timer.until == 1.0 + 0xFFFF / 1024


def test_the_frame_may_name_several_priorities():
    timer = PauseTimer(4, RATE)
    assert timer.on_frame(pfc({3: 10, 4: 2 * SECOND, 5: 7}), 1.0)
    assert timer.until == 3.0
    assert timer.received == {"xoff": 1, "xon": 0, "pause": 0}


def test_quanta_zero_resumes_at_once():
    timer = PauseTimer(3, RATE)
    timer.on_frame(pfc({3: 0xFFFF}), 1.0)
    assert timer.on_frame(pfc({3: 0}), 1.25) is True
    assert timer.until == 1.25
    assert timer.paused_s == 0.25  # counted up to the XON
    timer.settle(5.0)
    assert timer.paused_s == 0.25
    assert timer.received == {"xoff": 1, "xon": 1, "pause": 0}


def test_an_xon_while_running_changes_nothing_but_the_count():
    timer = PauseTimer(3, RATE)
    assert timer.on_frame(pfc({3: 0}), 1.0)
    assert timer.until == 1.0 and timer.paused_s == 0.0
    timer.settle(2.0)
    assert timer.paused_s == 0.0
    assert timer.received == {"xoff": 0, "xon": 1, "pause": 0}


@pytest.mark.parametrize("others", [{2: 100}, {0: 5, 7: 0xFFFF}, {4: 0}, {}])
def test_pfc_for_other_priorities_is_consumed_but_does_not_pause(others):
    timer = PauseTimer(3, RATE)
    assert timer.on_frame(pfc(others), 1.0) is True
    assert timer.until == 0.0 and timer.began == 0.0
    timer.settle(10.0)
    assert timer.paused_s == 0.0
    assert timer.received == {"xoff": 0, "xon": 0, "pause": 0}


def test_pfc_for_another_priority_leaves_a_running_pause_alone():
    timer = PauseTimer(3, RATE)
    timer.on_frame(pfc({3: SECOND}), 1.0)
    timer.on_frame(pfc({4: 0}), 1.5)  # an XON, but for priority 4
    assert timer.until == 2.0
    timer.settle(3.0)
    assert timer.paused_s == 1.0


def test_an_802_3x_pause_pauses_every_priority_and_is_counted_as_pause():
    for priority in (0, 3, 7):
        timer = PauseTimer(priority, RATE)
        assert timer.on_frame(pause(SECOND // 2), 4.0) is True
        assert timer.until == 4.5
        # counted as a PAUSE, and as the XOFF it amounts to
        assert timer.received == {"xoff": 1, "xon": 0, "pause": 1}
        assert timer.on_frame(pause(0), 4.25) is True
        assert timer.until == 4.25 and timer.paused_s == 0.25
        assert timer.received == {"xoff": 1, "xon": 1, "pause": 2}


def test_a_pause_at_1_mbps_lasts_q_times_512_us():
    timer = PauseTimer(3, 1e6)
    timer.on_frame(pause(100), 2.0)
    assert timer.until == 2.0512


@pytest.mark.parametrize("frame", [
    codec.data_frame(codec.Headers("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1",
                                 "10.0.0.2", dscp=26, ecn=2, sport=0xC001),
                    1, 2, 0x0A, 64, ackreq=True, reth=(0, 64)),
    bytes(Ether(src=MAC, dst="ff:ff:ff:ff:ff:ff") / ARP()),
    # MAC Control, but neither PAUSE (0x0001) nor PFC (0x0101): opcode 0x0003
    bytes(Ether(src=MAC, dst=roce.PFC_DST, type=0x8808)) + bytes([0, 3]) + bytes(44),
    b"",
    bytes(12),
], ids=["roce", "arp", "other mac control", "empty", "runt"])
def test_anything_but_pfc_or_pause_is_not_consumed(frame):
    timer = PauseTimer(3, RATE)
    assert timer.on_frame(frame, 1.0) is False
    assert timer.until == 0.0 and timer.paused_s == 0.0
    assert timer.received == {"xoff": 0, "xon": 0, "pause": 0}


def test_paused_time_stops_at_the_end_of_the_pause():
    timer = PauseTimer(3, RATE)
    timer.on_frame(pfc({3: SECOND}), 1.0)
    timer.settle(1.25)
    assert timer.paused_s == 0.25
    timer.settle(1.25)  # settling twice counts nothing twice
    assert timer.paused_s == 0.25
    timer.settle(3.0)
    assert timer.paused_s == 1.0  # only to until = 2.0
    timer.settle(4.0)
    assert timer.paused_s == 1.0


def test_paused_time_adds_up_over_pauses_and_skips_the_gaps():
    timer = PauseTimer(3, RATE)
    timer.on_frame(pfc({3: SECOND}), 1.0)  # 1.0 .. 2.0, runs out
    timer.on_frame(pfc({3: SECOND}), 4.0)  # 4.0 .. 4.25, cut short by XON
    assert timer.paused_s == 1.0
    timer.on_frame(pfc({3: 0}), 4.25)
    assert timer.paused_s == 1.25
    timer.on_frame(pfc({3: SECOND}), 5.0)  # 5.0 .. 6.0, refreshed at 5.5 to 6.5
    timer.on_frame(pfc({3: SECOND}), 5.5)
    assert timer.until == 6.5 and timer.paused_s == 1.75
    timer.settle(7.0)
    assert timer.paused_s == 2.75
    timer.on_frame(pfc({3: SECOND}), 8.0)  # 8.0 .. 9.0, refreshed shorter at 8.5 to 8.75
    timer.on_frame(pfc({3: SECOND // 4}), 8.5)
    assert timer.until == 8.75
    timer.settle(20.0)
    assert timer.paused_s == 3.5
    assert timer.received == {"xoff": 6, "xon": 1, "pause": 0}


def test_a_pfc_refresh_after_an_802_3x_pause_continues_the_account():
    timer = PauseTimer(3, RATE)
    timer.on_frame(pause(SECOND), 0.0)
    timer.on_frame(pfc({3: SECOND}), 0.5)
    assert timer.until == 1.5
    timer.settle(2.0)
    assert timer.paused_s == 1.5
    assert timer.received == {"xoff": 2, "xon": 0, "pause": 1}


def test_a_tagged_802_3x_pause_uses_its_own_pause_time():
    frame = bytes(Ether(src=MAC, dst=roce.PFC_DST) / Dot1Q(vlan=0, prio=0, type=0x8808)
                  / MACControlPause(pause_time=10))
    assert roce.is_pause(frame)
    timer = PauseTimer(3, RATE)
    assert timer.on_frame(frame, 0.0)
    assert timer.until == 10 / 1024
