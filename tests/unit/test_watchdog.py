"""PFC watchdog (fabric.model.watchdog): detection and restoration timing, short storms,
and what each action asks of the data plane. Time is injected, so timings are exact."""
from __future__ import annotations

import math

import pytest

from rocelab.fabric.config import PfcWatchdog
from rocelab.fabric.model.pause import MAX_QUANTA, PauseState
from rocelab.fabric.model.scheduler import Discipline, PortScheduler
from rocelab.fabric.model.watchdog import RESTORE, STORM, QueueWatchdog, WatchdogEvent

PFC_EVERY = 0.01  # the storming peer sends a PFC frame every 10 ms


class Storm:
    """A backlogged queue that transmits (a frame every microsecond) except during
    [start, end), when PFC frames arriving every PFC_EVERY hold it."""

    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end

    def tx(self, t: float) -> int:
        if t < self.start:
            return math.floor(t * 1e6)
        if t < self.end:
            return math.floor(self.start * 1e6)
        return math.floor(self.start * 1e6) + 1 + math.floor((t - self.end) * 1e6)

    def last_pfc(self, t: float) -> float | None:
        if t < self.start:
            return None
        sent = math.floor((min(t, self.end) - self.start) / PFC_EVERY - 1e-9)
        return self.start + max(sent, 0) * PFC_EVERY

    def last_pfc_before_end(self) -> float:
        return self.last_pfc(self.end)


def run(storm: Storm, detection_ms=200, restoration_ms=200, poll_ms=200, action="drop",
        follow_due=True, horizon=4.0) -> list[WatchdogEvent]:
    """Poll like the agent: at ``due`` (or on the poll grid only) until ``horizon``."""
    wd = QueueWatchdog("Ethernet0", 3, PfcWatchdog(action, detection_ms, restoration_ms), poll_ms)
    k, now = 0, 0.0
    while now <= horizon:
        wd.poll(now, 4096, storm.tx(now), storm.last_pfc(now))
        k += 1
        now = wd.due if follow_due else k * poll_ms / 1000
    return wd.events


PHASES = [0.00005, 0.05, 0.1, 0.15, 0.19995]  # storm start relative to the 200 ms poll grid


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("detection_ms, poll_ms, follow_due", [
    (200, 200, False),  # SONiC's defaults: detection a multiple of the interval
    (200, 200, True),
    (300, 200, True),  # not a multiple: the deadline poll lands between grid polls
    (250, 100, True),
    (1000, 300, True),
])
def test_storm_is_detected_within_detection_time_plus_one_poll(phase, detection_ms, poll_ms,
                                                               follow_due):
    storm = Storm(1.0 + phase, 3.0)
    events = run(storm, detection_ms=detection_ms, poll_ms=poll_ms, follow_due=follow_due)
    assert [e.kind for e in events] == [STORM, RESTORE]
    detected = events[0].time - storm.start
    assert detection_ms / 1000 - 1e-9 <= detected <= (detection_ms + poll_ms) / 1000 + 1e-9


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("restoration_ms", [200, 450])
def test_restoration_comes_restoration_time_after_the_last_pfc(phase, restoration_ms):
    storm = Storm(1.0, 2.0 + phase)
    restored = run(storm, restoration_ms=restoration_ms)[1]
    assert restored.kind == RESTORE
    assert restored.time == pytest.approx(storm.last_pfc_before_end() + restoration_ms / 1000)


@pytest.mark.parametrize("phase", PHASES)
def test_restoration_on_the_poll_grid_waits_at_most_one_interval(phase):
    storm = Storm(1.0, 2.0 + phase)
    restored = run(storm, follow_due=False)[1]
    late = restored.time - (storm.last_pfc_before_end() + 0.2)
    assert -1e-9 <= late <= 0.2 + 1e-9


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("detection_ms, poll_ms", [(200, 200), (300, 200), (250, 100)])
def test_a_storm_shorter_than_the_detection_time_is_ignored(phase, detection_ms, poll_ms):
    storm = Storm(1.0 + phase, 1.0 + phase + detection_ms / 1000 - 0.001)
    assert run(storm, detection_ms=detection_ms, poll_ms=poll_ms) == []
    assert run(storm, detection_ms=detection_ms, poll_ms=poll_ms, follow_due=False) == []


def test_a_stuck_queue_without_pfc_is_not_a_storm():
    """Starved by a strict queue, or a dead link: bytes held, nothing sent, but no PFC."""
    wd = QueueWatchdog("Ethernet0", 3, PfcWatchdog(), 200)
    for k in range(20):
        assert wd.poll(k * 0.2, 4096, 7, None) == []
    assert not wd.stormed


def test_an_empty_paused_queue_is_not_a_storm():
    wd = QueueWatchdog("Ethernet0", 3, PfcWatchdog(), 200)
    for k in range(20):
        assert wd.poll(k * 0.2, 0, 7, k * 0.2) == []


@pytest.mark.parametrize("action, drops, ignores_pfc", [
    ("drop", True, True), ("forward", False, True), ("alert", False, False),
])
def test_actions_say_what_the_data_plane_does_while_stormed(action, drops, ignores_pfc):
    wd = QueueWatchdog("Ethernet8", 4, PfcWatchdog(action, 200, 200), 200)
    assert (wd.drops, wd.ignores_pfc) == (False, False)
    events = []
    for k in range(3):  # stuck from the first poll on: declared at 0.2 s
        events += wd.poll(k * 0.1, 4096, 5, k * 0.1)
    assert events == [WatchdogEvent(0.2, STORM, "Ethernet8", 4, action)]
    assert wd.stormed and (wd.drops, wd.ignores_pfc) == (drops, ignores_pfc)
    assert wd.poll(0.39, 0, 9, 0.2) == []  # PFC seen 190 ms ago: still stormed
    assert wd.due == pytest.approx(0.4)
    assert wd.poll(0.4, 0, 9, 0.2) == [WatchdogEvent(0.4, RESTORE, "Ethernet8", 4, action)]
    assert (wd.stormed, wd.drops, wd.ignores_pfc) == (False, False, False)
    assert [e.kind for e in wd.events] == [STORM, RESTORE]


@pytest.mark.parametrize("action", ["drop", "forward", "alert"])
def test_actions_applied_to_a_paused_port(action):
    """The wiring the switch does: on a storm, ignore PFC (drop/forward) and flush (drop)."""
    rate = 100e6  # 100G at S = 1000: 0xFFFF quanta = 335 ms
    pause = PauseState(rate)
    sched = PortScheduler(rate, [Discipline(False, 1)] * 8, 9118, pause)
    wd = QueueWatchdog("Ethernet0", 3, PfcWatchdog(action, 200, 200), 200)
    for _ in range(10):
        sched.enqueue(3, bytes(1000), None, 0.0)
    for k in range(3):  # the storm: a fresh PFC every 100 ms, declared at the third poll
        now = k * 0.1
        pause.on_pfc({3: MAX_QUANTA}, now)
        assert sched.dequeue(now) is None
        for _ in wd.poll(now, sched.depth_bytes(3), 0, pause.last_pfc_rx[3]):
            pause.ignore(3, wd.ignores_pfc, now)
            if wd.drops:
                sched.flush(3)
    assert wd.stormed
    pause.on_pfc({3: MAX_QUANTA}, 0.3)  # the storm goes on
    sent = sched.dequeue(0.3)
    if action == "drop":
        assert sent is None and sched.depth_bytes(3) == 0
    elif action == "forward":
        assert sent is not None and sched.depth_bytes(3) == 9000
    else:
        assert sent is None and sched.depth_bytes(3) == 10000
