"""PFC/PAUSE timing (fabric.model.pause): pauses received on an egress port and the PFC an
ingress priority group sends while in XOFF. Time is injected, so timings are exact."""
from __future__ import annotations

import pytest

from rocelab.fabric.model.pause import MAX_QUANTA, PauseState, PfcSender, pause_seconds
from rocelab.fabric.model.scheduler import wire_rate_bps
from rocelab.nic.roce import parse_pfc
from rocelab.traffic.packets import pfc_frame

SPEEDS = [(100_000, 335.5e-6), (10_000, 3.355e-3)]  # 0xFFFF quanta at S = 1


@pytest.mark.parametrize("speed_mbps, full_pause_s", SPEEDS)
@pytest.mark.parametrize("scale", [1, 1000])
def test_quanta_last_512_bit_times_at_the_emulated_rate(speed_mbps, full_pause_s, scale):
    rate = wire_rate_bps(speed_mbps, scale)
    assert pause_seconds(MAX_QUANTA, rate) == pytest.approx(full_pause_s * scale, rel=1e-3)
    assert pause_seconds(1, rate) == 512 * scale / (speed_mbps * 1e6)


@pytest.mark.parametrize("speed_mbps, full_pause_s", SPEEDS)
@pytest.mark.parametrize("scale", [1, 1000])
def test_pfc_pauses_its_priority_until_the_quanta_expire(speed_mbps, full_pause_s, scale):
    pause = PauseState(wire_rate_bps(speed_mbps, scale))
    pause.on_pfc({3: MAX_QUANTA}, 2.0)
    end = 2.0 + pause_seconds(MAX_QUANTA, wire_rate_bps(speed_mbps, scale))
    assert pause.until(3) == end
    assert end - 2.0 == pytest.approx(full_pause_s * scale, rel=1e-3)
    assert pause.paused(3, 2.0) and pause.paused(3, end - 1e-9)
    assert not pause.paused(3, end)
    assert not any(pause.paused(p, 2.0) for p in (0, 1, 2, 4, 5, 6, 7))
    assert pause.next_expiry(2.0) == end and pause.next_expiry(end) is None


def test_a_new_frame_reloads_the_timer_longer_or_shorter():
    pause = PauseState(100e9)
    quantum = 512 / 100e9
    pause.on_pfc({3: 1000}, 0.0)
    pause.on_pfc({3: 1000}, 500 * quantum)  # refreshed before expiry: extended
    assert pause.until(3) == pytest.approx(1500 * quantum)
    pause.on_pfc({3: 10}, 600 * quantum)  # a shorter pause replaces the longer one
    assert pause.until(3) == pytest.approx(610 * quantum)


def test_quanta_zero_resumes_at_once():
    pause = PauseState(100e9)
    pause.on_pfc({3: MAX_QUANTA, 4: MAX_QUANTA}, 0.0)
    pause.on_pfc({3: 0}, 1e-6)
    assert not pause.paused(3, 1e-6) and pause.until(3) == 1e-6
    assert pause.paused(4, 1e-6)
    pause.on_pfc({3: 0}, 2e-6)  # resuming a running priority changes nothing
    assert pause.until(3) == 1e-6


def test_802_3x_pause_stops_every_priority_of_a_port_without_pfc_and_is_not_counted_as_pfc():
    pause = PauseState(10e9, pfc_enabled=())
    pause.on_pause(MAX_QUANTA, 0.0)
    assert all(pause.paused(p, 1e-3) for p in range(8))
    assert pause.pause_rx == 1 and pause.pfc_rx == [0] * 8
    assert pause.last_pfc_rx == [None] * 8
    pause.on_pause(0, 1e-3)
    assert not any(pause.paused(p, 1e-3) for p in range(8))


def test_a_pfc_port_ignores_802_3x_pause_but_counts_it():
    pause = PauseState(10e9, pfc_enabled=(3, 4))
    pause.on_pause(MAX_QUANTA, 0.0)
    assert not any(pause.paused(p, 0.0) for p in range(8)) and pause.pause_rx == 1


def test_pfc_for_a_priority_without_pfc_is_counted_and_ignored():
    pause = PauseState(100e9, pfc_enabled=(3, 4))
    pause.on_pfc({0: MAX_QUANTA, 3: MAX_QUANTA}, 0.0)
    assert pause.paused(3, 0.0) and not pause.paused(0, 0.0)
    assert pause.pfc_rx[0] == 1 and pause.last_pfc_rx[0] is None  # no storm to watch for


def test_class_enable_vector_zero_is_ignored():
    frame = bytes(pfc_frame("02:00:00:00:00:01", {}))
    assert parse_pfc(frame) == {}
    pause = PauseState(100e9)
    pause.on_pfc(parse_pfc(frame), 0.0)
    assert not any(pause.paused(p, 0.0) for p in range(8))
    assert pause.pfc_rx == [0] * 8 and pause.last_pfc_rx == [None] * 8


def test_counters_count_every_frame_and_remember_the_last_pause():
    pause = PauseState(100e9)
    pause.on_pfc(parse_pfc(bytes(pfc_frame("02:00:00:00:00:01", {3: 100, 4: 0}))), 1.0)
    pause.on_pfc({3: 0}, 2.0)
    assert pause.pfc_rx == [0, 0, 0, 2, 1, 0, 0, 0]
    assert pause.last_pfc_rx[3] == 1.0  # a resume is not a pause
    assert pause.last_pfc_rx[4] is None


def test_time_paused_is_accounted_per_priority():
    rate = 100e9
    full = pause_seconds(MAX_QUANTA, rate)
    pause = PauseState(rate)
    pause.on_pfc({3: MAX_QUANTA}, 1.0)
    assert pause.paused_seconds(3, 1.0 + full / 2) == pytest.approx(full / 2)
    assert pause.paused_seconds(3, 5.0) == pytest.approx(full)  # expired: counts fully
    pause.on_pfc({3: MAX_QUANTA}, 6.0)
    pause.on_pfc({3: MAX_QUANTA}, 6.0 + full / 2)  # refresh: one continuous pause
    pause.on_pfc({3: 0}, 6.0 + full)  # XON cuts it
    assert pause.paused_seconds(3, 10.0) == pytest.approx(2 * full)
    assert pause.paused_seconds(4, 10.0) == 0.0


def test_an_ignored_priority_counts_pfc_but_is_never_paused():
    pause = PauseState(100e9)
    pause.on_pfc({3: MAX_QUANTA}, 0.0)
    pause.ignore(3, True, 1e-6)  # the watchdog's drop/forward: the pause ends now
    assert not pause.paused(3, 1e-6) and pause.until(3) == 1e-6
    pause.on_pfc({3: MAX_QUANTA}, 2e-6)
    assert not pause.paused(3, 2e-6)
    assert pause.pfc_rx[3] == 2 and pause.last_pfc_rx[3] == 2e-6
    pause.ignore(3, False, 3e-6)
    pause.on_pfc({3: MAX_QUANTA}, 4e-6)
    assert pause.paused(3, 4e-6)


# ---- PfcSender


def test_sender_pauses_at_xoff_refreshes_at_half_time_and_resumes_at_xon():
    rate = wire_rate_bps(100_000, 1)
    half = pause_seconds(MAX_QUANTA, rate) / 2
    sender = PfcSender([3], rate)
    assert sender.tick(0.0) == {}
    assert sender.set_xoff(1.0) == {3: MAX_QUANTA}
    assert sender.set_xoff(1.0 + half / 2) == {}  # already in XOFF
    assert sender.tick(1.0 + half - 1e-9) == {}
    assert sender.next_refresh == 1.0 + half
    assert sender.tick(1.0 + half) == {3: MAX_QUANTA}
    assert sender.tick(1.0 + half + 1e-9) == {}
    late = 1.0 + 2 * half + 5e-6  # a late tick: the next refresh counts from this frame
    assert sender.tick(late) == {3: MAX_QUANTA}
    assert sender.next_refresh == late + half
    assert sender.set_xon(late + 1e-6) == {3: 0}
    assert sender.tick(late + half) == {}
    assert sender.set_xon(late + half) == {}
    assert sender.next_refresh is None


@pytest.mark.parametrize("speed_mbps", [100_000, 10_000])
@pytest.mark.parametrize("scale", [1, 1000])
def test_the_upstream_stays_paused_through_a_long_xoff_and_resumes_at_xon(speed_mbps, scale):
    """The sender's frames, fed to the upstream port's PauseState, never let it lapse."""
    rate = wire_rate_bps(speed_mbps, scale)
    sender, upstream = PfcSender([3, 4], rate), PauseState(rate)
    upstream.on_pfc(sender.set_xoff(0.0), 0.0)
    sent = 1
    step = pause_seconds(MAX_QUANTA, rate) / 7  # the agent's timer resolution
    for k in range(1, 141):  # XOFF for 20 pause times
        now = k * step
        assert upstream.paused(3, now) and upstream.paused(4, now)
        frame = sender.tick(now)
        if frame:
            upstream.on_pfc(frame, now)
            sent += 1
    assert sent == 1 + 140 // 4  # a refresh every 4 timer steps: the first past half-time
    upstream.on_pfc(sender.set_xon(now), now)
    assert not upstream.paused(3, now) and not upstream.paused(4, now)
    assert upstream.paused_seconds(3, now + 1.0) == pytest.approx(now)


def test_sender_rejects_invalid_quanta():
    with pytest.raises(ValueError):
        PfcSender([3], 100e9, quanta=0)
    with pytest.raises(ValueError):
        PfcSender([3], 100e9, quanta=0x10000)
    assert PfcSender([3], 100e9, quanta=1000).set_xoff(0.0) == {3: 1000}
