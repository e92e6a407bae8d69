"""Egress scheduler (fabric.model.scheduler): strict priority, DWRR shares, PFC-paused queues
skipped, pacing at the emulated rate, lateness. Time is injected, so timings are exact."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from rocelab.fabric.config_load import load
from rocelab.fabric.model.pause import PauseState
from rocelab.fabric.model.scheduler import (SAI_DEFAULT, Discipline, Lateness, PortScheduler,
                                            disciplines, wire_rate_bps)

LEAF1 = (Path(__file__).resolve().parents[2]
         / "topologies" / "roce-v2-leafspine" / "configs" / "leaf1" / "config_db.json")
MAX_FRAME = 9100 + 18
RATE = 100e9
STRICT = Discipline(strict=True)


def dwrr(weight: int) -> Discipline:
    return Discipline(strict=False, weight=weight)


def port(queues: dict[int, Discipline], rate: float = RATE,
         pause: PauseState | None = None) -> PortScheduler:
    return PortScheduler(rate, [queues.get(q, SAI_DEFAULT) for q in range(8)], MAX_FRAME, pause)


def frame(size: int, tag: int = 0) -> bytes:
    return bytes([tag]) * size


def send_next(sched: PortScheduler) -> tuple[float, int, bytes]:
    """Dequeue at the moment the scheduler asks for: (start time, queue, frame)."""
    now = sched.next_send_time()
    assert now is not None
    sent = sched.dequeue(now)
    assert sent is not None
    return now, sent[2], sent[0]


def backlogged_shares(weights: dict[int, int], packets: int, seed: int = 1) -> dict[int, float]:
    """Byte shares of weighted queues kept backlogged with frames of mixed sizes."""
    rng = random.Random(seed)
    sched = port({q: dwrr(w) for q, w in weights.items()})
    for q in weights:
        for _ in range(4):
            sched.enqueue(q, frame(rng.randint(64, MAX_FRAME)), None, 0.0)
    sent = dict.fromkeys(weights, 0)
    for _ in range(packets):
        now, q, data = send_next(sched)
        sent[q] += len(data)
        sched.enqueue(q, frame(rng.randint(64, MAX_FRAME)), None, now)  # stays backlogged
    total = sum(sent.values())
    return {q: sent[q] / total for q in sent}


@pytest.mark.parametrize("weights", [
    {1: 14, 3: 15},
    {0: 1, 2: 3},
    {0: 14, 1: 14, 2: 14, 3: 15, 4: 15, 5: 14},  # SONiC's default: lossless 3/4 at 15
])
def test_dwrr_shares_follow_the_weights(weights):
    shares = backlogged_shares(weights, packets=20_000)
    total = sum(weights.values())
    for q, weight in weights.items():
        assert shares[q] == pytest.approx(weight / total, rel=0.05), (q, shares)


def test_dwrr_serves_an_equal_weight_queue_of_small_frames_by_bytes_not_packets():
    sched = port({0: dwrr(1), 1: dwrr(1)})
    for _ in range(5000):
        sched.enqueue(0, frame(64), None, 0.0)
    for _ in range(200):
        sched.enqueue(1, frame(1500), None, 0.0)
    sent = {0: 0, 1: 0}
    while sent[1] < 100 * 1500:
        _, q, data = send_next(sched)
        sent[q] += len(data)
    assert sent[0] == pytest.approx(sent[1], rel=0.1)


def test_strict_priority_starves_lower_queues_while_it_has_traffic():
    sched = port({6: STRICT, 3: dwrr(15), 0: dwrr(14)})
    for _ in range(50):
        sched.enqueue(3, frame(1000, 3), None, 0.0)
        sched.enqueue(0, frame(1000, 0), None, 0.0)
        sched.enqueue(6, frame(1000, 6), None, 0.0)
    order = [send_next(sched)[1] for _ in range(150)]
    assert order[:50] == [6] * 50
    assert set(order[50:]) == {0, 3}


def test_strict_queues_are_served_highest_index_first():
    sched = port({5: STRICT, 6: STRICT, 7: STRICT})
    for q in (5, 6, 7, 5, 6, 7):
        sched.enqueue(q, frame(100), None, 0.0)
    assert [send_next(sched)[1] for _ in range(6)] == [7, 7, 6, 6, 5, 5]


def test_a_strict_frame_arriving_later_overtakes_the_weighted_backlog():
    sched = port({6: STRICT, 3: dwrr(15)})
    for _ in range(10):
        sched.enqueue(3, frame(1000), None, 0.0)
    send_next(sched)
    sched.enqueue(6, frame(100), None, 1e-9)
    assert send_next(sched)[1] == 6


def test_paused_priorities_are_skipped_and_the_others_keep_flowing():
    pause = PauseState(RATE)
    sched = port({6: STRICT, 3: dwrr(15), 0: dwrr(14)}, pause=pause)
    for _ in range(20):
        for q in (0, 3, 6):
            sched.enqueue(q, frame(1500, q), None, 0.0)
    pause.on_pfc({3: 0xFFFF, 6: 0xFFFF}, 0.0)  # 335.5 us at 100G
    sent = []
    while (now := sched.next_send_time()) < pause.until(3):
        result = sched.dequeue(now)
        sent.append(result[2])
    assert sent == [0] * 20  # nothing from the paused queues, all of queue 0
    assert sched.next_send_time() == pause.until(3) == pytest.approx(65535 * 512 / RATE)
    assert sched.dequeue(pause.until(3) - 1e-9) is None
    now, q, _ = send_next(sched)
    assert (now, q) == (pause.until(6), 6)
    assert sched.lateness.max == 0.0


def test_resume_by_quanta_zero_lets_the_queue_send_at_once():
    pause = PauseState(RATE)
    sched = port({3: dwrr(15)}, pause=pause)
    sched.enqueue(3, frame(1500), None, 0.0)
    pause.on_pfc({3: 0xFFFF}, 0.0)
    assert sched.dequeue(1e-6) is None
    pause.on_pfc({3: 0}, 2e-6)
    assert sched.next_send_time() == 2e-6
    assert sched.dequeue(2e-6)[2] == 3


def test_a_queue_is_held_by_the_pauses_of_its_mapped_priorities():
    """pfc_to_queue_map: with priorities 3 and 4 both on queue 3, a pause of 4 holds queue 3
    and queue 4 keeps sending; the later of two pauses on one queue holds it."""
    pause = PauseState(RATE)
    mapping = [(p,) for p in range(8)]
    mapping[3], mapping[4] = (3, 4), ()
    sched = PortScheduler(RATE, [dwrr(1)] * 8, MAX_FRAME, pause, mapping)
    sched.enqueue(3, frame(1500, 3), None, 0.0)
    sched.enqueue(4, frame(1500, 4), None, 0.0)
    pause.on_pfc({4: 0xFFFF, 3: 100}, 0.0)
    assert sched.gate(3) == pause.until(4) and sched.gate(4) == 0.0
    assert send_next(sched)[1:] == (4, frame(1500, 4))
    assert send_next(sched)[0] == pause.until(4)


@pytest.mark.parametrize("speed_mbps", [100_000, 10_000])
@pytest.mark.parametrize("scale", [1, 1000])
def test_pacing_n_frames_take_exactly_n_frame_times(speed_mbps, scale):
    rate = wire_rate_bps(speed_mbps, scale)
    sched = port({0: dwrr(1)}, rate=rate)
    size, count = 1500, 1000
    for _ in range(count):
        sched.enqueue(0, frame(size), None, 0.0)
    starts: list[float] = []
    while (now := sched.next_send_time()) is not None:
        if starts:
            assert now == sched.free_at
            assert sched.dequeue(starts[-1]) is None  # the wire is still busy
        starts.append(now)
        assert sched.dequeue(now) is not None
    frame_time = size * 8 / rate
    assert sched.free_at == pytest.approx(count * frame_time, rel=1e-12)
    assert starts == pytest.approx([k * frame_time for k in range(count)], rel=1e-9, abs=1e-15)
    assert sched.lateness.count == count and sched.lateness.max == 0.0
    assert frame_time == pytest.approx(1500 * 8 * scale / (speed_mbps * 1e6))


def test_a_late_caller_catches_up_on_the_exact_timeline_and_lateness_shows_it():
    sched = port({0: dwrr(1)}, rate=1e9)
    for _ in range(10):
        sched.enqueue(0, frame(1250), None, 0.0)  # 10 us each at 1 Gb/s
    sent = [sched.dequeue(1e-3) for _ in range(11)]
    assert all(sent[:10]) and sent[10] is None
    assert sched.free_at == pytest.approx(100e-6)
    assert sched.lateness.max == pytest.approx(1e-3)
    assert sched.lateness.count == 10
    assert sched.lateness.percentile(0.99) <= sched.lateness.max


def test_a_frame_arriving_on_an_idle_wire_starts_when_it_arrives():
    sched = port({0: dwrr(1)}, rate=1e9)
    sched.enqueue(0, frame(1250), None, 0.0)
    send_next(sched)
    sched.enqueue(0, frame(1250), None, 5.0)
    assert sched.next_send_time() == 5.0
    assert sched.dequeue(5.000002) is not None
    assert sched.free_at == pytest.approx(5.0 + 10e-6)
    assert sched.lateness.max == pytest.approx(2e-6)


def test_start_now_only_on_an_idle_port_with_a_free_wire_and_an_open_gate():
    pause = PauseState(1e9)
    sched = port({0: dwrr(1), 3: dwrr(1)}, rate=1e9, pause=pause)
    assert sched.start_now(0, 1250, 1.0)  # 10 us of wire
    assert sched.free_at == pytest.approx(1.0 + 10e-6) and sched.lateness.count == 1
    assert not sched.start_now(0, 1250, 1.0 + 5e-6)  # wire busy: the caller queues it
    assert sched.start_now(0, 1250, 1.0 + 10e-6)
    pause.ends[3] = 2.0  # paused until then
    assert not sched.start_now(3, 1250, 1.5)  # paused
    sched.enqueue(3, frame(1250), None, 1.5)
    assert not sched.start_now(0, 1250, 1.5)  # open queue, free wire, but a frame waits
    assert sched.free_at == pytest.approx(1.0 + 20e-6) and sched.lateness.count == 2


def test_start_now_is_enqueue_then_dequeue_on_an_idle_port():
    """Random arrivals on strict and DWRR queues, some paused: a scheduler that starts
    frames at once when it may, and one that queues every frame and dequeues it right
    away in the same cases, send the same frames at the same times with the same
    lateness; and the first one's later choices (DWRR pointer and deficits) agree."""
    rng = random.Random(7)
    pause = PauseState(1e9)  # both ports see the same pauses
    queues = {7: STRICT, 6: STRICT, 3: dwrr(3), 4: dwrr(1), 0: dwrr(2)}
    cut = port(queues, rate=1e9, pause=pause)
    plain = port(queues, rate=1e9, pause=pause)
    sent: dict[str, list] = {"cut": [], "plain": []}
    cuts, now = 0, 0.0

    def release(sched: PortScheduler, log: list, until: float) -> None:
        while (at := sched.next_send_time()) is not None and at <= until:
            got = sched.dequeue(at)
            assert got is not None
            log.append((at, got[2], got[0]))

    for i in range(3000):
        now += rng.expovariate(1 / 8e-6)  # about one frame time apart: queues come and go
        if rng.random() < 0.03:
            pause.ends[rng.choice(list(queues))] = now + rng.uniform(0, 60e-6)
        release(cut, sent["cut"], now)
        release(plain, sent["plain"], now)
        q, data = rng.choice(list(queues)), i.to_bytes(4, "big") + bytes(rng.randint(60, 1500))
        plain.enqueue(q, data, None, now)
        if cut.start_now(q, len(data), now):
            cuts += 1
            sent["cut"].append((now, q, data))
            got = plain.dequeue(now)
            assert got is not None and got[0] is data
            sent["plain"].append((now, q, data))
        else:
            cut.enqueue(q, data, None, now)
    release(cut, sent["cut"], float("inf"))
    release(plain, sent["plain"], float("inf"))
    assert sent["cut"] == sent["plain"] and len(sent["cut"]) == 3000
    assert 300 < cuts < 2700  # both paths were taken often
    assert cut.lateness.as_dict() == plain.lateness.as_dict()


def test_empty_scheduler_has_nothing_to_send():
    sched = port({})
    assert sched.next_send_time() is None
    assert sched.dequeue(1.0) is None


def test_depth_and_flush():
    sched = port({3: dwrr(15)})
    for i in range(3):
        sched.enqueue(3, frame(100 + i), ("meta", i), 0.0)
    assert (sched.depth_bytes(3), sched.depth_packets(3)) == (303, 3)
    dropped = sched.flush(3)
    assert [meta for _, meta in dropped] == [("meta", 0), ("meta", 1), ("meta", 2)]
    assert (sched.depth_bytes(3), sched.depth_packets(3)) == (0, 0)
    assert sched.next_send_time() is None
    sched.enqueue(3, frame(64), "after", 1.0)
    assert sched.dequeue(1.0) == (frame(64), "after", 3)
    assert sched.depth_bytes(3) == 0


def test_disciplines_and_rate_from_sonic_config():
    config = load(LEAF1)
    assert disciplines(config.qos, "Ethernet8") == (
        [dwrr(14)] * 3 + [dwrr(15)] + [dwrr(14)] * 2 + [STRICT] + [SAI_DEFAULT])
    sched = PortScheduler.from_config(config.qos, config.ports["Ethernet8"], time_scale=1000)
    assert sched.rate_bps == 100e6
    sched.enqueue(7, frame(100, 7), None, 0.0)
    sched.enqueue(6, frame(100, 6), None, 0.0)
    sched.enqueue(3, frame(9118, 3), None, 0.0)  # the largest frame fits one visit
    assert [send_next(sched)[1] for _ in range(3)] == [6, 3, 7]  # round robin from queue 0


def test_lateness_histogram_percentiles():
    late = Lateness()
    for _ in range(99):
        late.record(0.5e-6)
    late.record(3e-3)
    assert late.percentile(0.99) == 1e-6
    assert late.percentile(1.0) == 3e-3
    assert late.as_dict()["max_s"] == 3e-3
    assert late.as_dict()["mean_s"] == pytest.approx((99 * 0.5e-6 + 3e-3) / 100)


@pytest.mark.parametrize("value_s", [3e-6, 150e-6, 2.1e-3, 0.7])
def test_lateness_p99_is_a_tight_upper_bound(value_s):
    """Within one eighth of an octave: a verdict against one frame time must not fail on a
    histogram's rounding."""
    from rocelab.fabric.model.scheduler import Lateness
    late = Lateness()
    for _ in range(99):
        late.record(value_s)
    late.record(10 * value_s)  # the 1 % that p99 leaves out
    assert value_s <= late.percentile(0.99) <= value_s * 2 ** (1 / 8)


def test_a_long_queue_leaves_in_order_and_counts_its_frames_across_compactions():
    """A queue's frames sit in a list read from a head index, which drops the gone ones
    once enough are gone (``HEAD_COMPACT``, 256): order, depth and the frame count hold
    across that."""
    sched = port({3: dwrr(1)})
    total = 2000
    sent, queued = [], 0
    for i in range(total):
        sched.enqueue(3, frame(64 + i % 7, i % 256), i, 0.0)
        queued += 1
        if i % 3 == 2:  # two in, one out: the list grows past its compaction point
            sent.append(send_next(sched)[2])
            queued -= 1
        assert sched.depth_packets(3) == queued
    while sched.next_send_time() is not None:
        sent.append(send_next(sched)[2])
    assert sent == [frame(64 + i % 7, i % 256) for i in range(total)]
    assert sched.depth_packets(3) == 0 and sched.depth_bytes(3) == 0
    sched.enqueue(3, frame(100), "again", 0.0)  # an emptied queue starts over
    assert sched.depth_packets(3) == 1 and sched.flush(3) == [(frame(100), "again")]
