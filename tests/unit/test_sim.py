"""The virtual-time runtime: engine ordering, wires, hosts' exec lines, the switch model
driven in simulated time, determinism, and what it refuses. No root: it is one process."""
from __future__ import annotations

import gc
import json
import random
import weakref

import pytest

from rocelab.labs.runtimes.sim import simulated

from rocelab.labs.runtimes.registry import runtime_for
from rocelab.labs import topology
from rocelab.labs.runtimes import sim
from rocelab.labs.errors import LabError
from rocelab.labs.sim.engine import (GC_YOUNG_THRESHOLD, HEAP_START, PS, ArrayHeap, Engine,
                                     Handler, TupleHeap, to_ps)
from rocelab.labs.sim.hostconfig import SimError, host_config
from rocelab.labs.sim.link import Wire, cable_delay_ps
from tests.conftest import TOPOLOGIES
from rocelab.traffic import patterns

DEFAULT = TOPOLOGIES / "roce-v2-leafspine" / "roce-v2-leafspine.clab.yml"


def test_events_run_in_time_order_and_ties_in_scheduling_order():
    engine, seen = Engine(), []
    for when, tag in ((30, "c"), (10, "a"), (30, "d"), (20, "b")):
        engine.at(when, seen.append, tag)
    engine.run(25)
    assert seen == ["a", "b"] and engine.now_ps == 25
    engine.run(100)
    assert seen == ["a", "b", "c", "d"]


def test_a_handler_halts_the_run_after_its_event_and_the_next_run_goes_on():
    engine, seen = Engine(), []

    def halting(tag: str) -> None:
        seen.append(tag)
        engine.halt()

    engine.halt()  # before a run: no effect on it
    engine.at(10, seen.append, "a")
    engine.at(20, halting, "b")
    engine.at(20, seen.append, "c")  # the same instant, after the halt
    assert engine.run(100) is True
    assert seen == ["a", "b"] and engine.now_ps == 20 and engine.pending == 1
    assert engine.run(100) is False
    assert seen == ["a", "b", "c"] and engine.now_ps == 100


def test_an_event_knows_its_sequence_number_and_a_superseded_one_can_tell():
    """``later`` numbers each event and ``firing`` gives the number while it is handled: a
    handler that re-arms keeps its latest and ignores the rest (the shells' wakes)."""
    engine, fired = Engine(), []

    class Wake(Handler):
        def fire(self, arg) -> None:
            fired.append((engine.now_ps, engine.firing() == self.armed))

    wake = Wake()
    first = engine.later(50, wake, None)
    wake.armed = engine.later(20, wake, None)  # earlier: the one at 50 is superseded
    assert wake.armed == first + 1
    engine.run(100)
    assert fired == [(20, True), (50, False)]


def test_the_heap_keeps_time_and_scheduling_order_as_it_grows_and_empties():
    """Past the heap's first room (it grows while events run), with ties and events a
    handler schedules for its own instant: the order is (time, order of scheduling)."""
    engine, seen, expected = Engine(), [], []
    rand = random.Random(5)

    def handler(tag: int) -> None:
        seen.append((engine.now_ps, tag))
        if tag < 4000 and rand.random() < 0.4:  # a follow-up, often at this very instant
            schedule(engine.now_ps + rand.choice((0, 0, 1, rand.randrange(500))))

    def schedule(when: int) -> None:
        expected.append((max(when, engine.now_ps), len(expected)))
        engine.at(when, handler, len(expected) - 1)

    for _ in range(3 * HEAP_START):
        schedule(rand.randrange(2000))
    assert engine.pending == 3 * HEAP_START
    engine.run(10**6)
    assert engine.pending == 0
    assert seen == sorted(expected)
    schedule(engine.now_ps + 7)  # the emptied heap takes events again
    engine.run(engine.now_ps + 7)
    assert seen[-1] == expected[-1]


@pytest.mark.parametrize("heap_type", [TupleHeap, ArrayHeap])
def test_both_heaps_give_the_earliest_event_then_the_first_scheduled(heap_type):
    """Each build's heap (engine module docstring): pushes and pops interleaved as a run
    does them, past an ArrayHeap's first room, many events sharing a time; every pop is the
    least (time, sequence) of what the heap holds."""
    heap, rand, holds = heap_type(), random.Random(11), []
    now = 0

    class Seen(Handler):
        def __init__(self) -> None:
            self.fired: list[tuple[int, int]] = []

        def fire(self, arg: tuple[int, int]) -> None:
            self.fired.append(arg)

    seen = Seen()

    def pop() -> None:
        least = min(holds)
        assert heap.earliest() == least[0]
        heap.fire_next()
        assert seen.fired[-1] == least
        holds.remove(least)

    for seq in range(4 * HEAP_START):
        when = now + rand.choice((0, 0, 1, rand.randrange(300)))
        heap.push(when, seq, seen, (when, seq))
        holds.append((when, seq))
        if rand.random() < 0.3:
            now = min(holds)[0]
            pop()
    assert len(heap) == len(holds)
    while holds:
        pop()
    assert len(heap) == 0


@pytest.mark.parametrize("seconds", [float("inf"), float("nan"), 1e7, -1e7])
def test_a_time_off_the_clock_is_an_error_not_a_wrapped_integer(seconds):
    """Compiled, ``to_ps`` converts to a 64-bit integer: what does not fit is refused."""
    with pytest.raises(OverflowError, match="cannot be a time on the simulator's clock"):
        to_ps(seconds)


def test_the_collector_runs_rarely_while_events_run_and_as_before_after():
    engine, seen = Engine(), []
    before = gc.get_threshold()

    def fails() -> None:
        raise RuntimeError("a handler's bug")
    engine.at(1, lambda: seen.append((gc.get_threshold(), gc.get_freeze_count() > 0)))
    engine.at(2, fails)
    with pytest.raises(RuntimeError):
        engine.run(10)
    assert seen == [((max(before[0], GC_YOUNG_THRESHOLD), *before[1:]), True)]
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_cycle_made_before_a_run_is_collected_after_it():
    class Node:
        pass
    engine, gone = Engine(), []
    node = Node()
    node.self = node
    weakref.finalize(node, gone.append, True)
    del node
    engine.at(1, gc.collect)  # the frozen cycle outlives a full collection during the run
    engine.run(10)
    assert gone == []
    gc.collect()
    assert gone == [True]


def test_a_deadline_in_ps_is_never_before_the_float_it_came_from():
    for seconds in (6.823844600000001e-05, 1e-9 / 3, 0.1 + 0.2, 123.456789e-6):
        assert to_ps(seconds) / PS >= seconds
        assert to_ps(seconds) - seconds * PS < 2


def test_a_wire_serialises_at_its_rate_and_delivers_after_the_cable():
    engine, got = Engine(), []
    wire = Wire(engine, 100e9, cable_delay_ps(40, 1.0), lambda f: got.append((engine.now_ps, f)))
    wire.send(bytes(1000))  # 80 ns at 100G
    wire.send(bytes(500))  # waits for the first: starts at 80 ns
    engine.run(10**9)
    assert cable_delay_ps(40, 1.0) == 200_000  # 40 m x 5 ns
    assert [t for t, _ in got] == [80_000 + 200_000, 120_000 + 200_000]


def test_a_jittered_wire_delays_each_frame_by_its_mean_and_keeps_their_order():
    engine, got = Engine(), []
    delay = cable_delay_ps(2, 1.0)
    wire = Wire(engine, 100e9, delay, lambda f: got.append((engine.now_ps, f)),
                jitter_ps=100_000, rng=random.Random(1))
    for i in range(2000):  # one 80 ns frame every 10 us: none waits for another
        engine.at(i * 10**7, wire.send, i.to_bytes(2, "big") + bytes(998))
    engine.run(10**12)
    extra = [t - (i * 10**7 + 80_000 + delay) for i, (t, _) in enumerate(got)]
    assert min(extra) >= 0 and sum(extra) / len(extra) == pytest.approx(100_000, rel=0.1)
    # back to back, with a jitter of many frame times: late, never reordered
    engine, got = Engine(), []
    wire = Wire(engine, 100e9, delay, lambda f: got.append((engine.now_ps, f)),
                jitter_ps=10**6, rng=random.Random(2))
    for i in range(200):
        wire.send(i.to_bytes(2, "big") + bytes(998))
    engine.run(10**12)
    assert [int.from_bytes(f[:2], "big") for _, f in got] == list(range(200))
    with pytest.raises(ValueError, match="seeded rng"):
        Wire(engine, 100e9, delay, got.append, jitter_ps=1.0)


def test_host_exec_lines_the_simulator_models_and_one_it_refuses():
    config = host_config("h1", ("ip addr add 10.1.1.11/24 dev eth1",
                                "ip route replace default via 10.1.1.1",
                                "ip link set eth1 up"), ["eth1"])
    assert str(config.addresses[4]["eth1"]) == "10.1.1.11/24"
    assert str(config.gateways[4]) == "10.1.1.1"
    with pytest.raises(SimError, match=r"node h1: exec\[1\] 'sysctl -w x=1': not modelled"):
        host_config("h1", ("sysctl -w x=1",), ["eth1"])


def test_a_lab_the_simulator_cannot_model_is_one_line_naming_the_file(lab_copy):
    def edit(doc):
        doc["topology"]["nodes"]["h1"]["exec"].append("tc qdisc add dev eth1 root fq")
    clab = lab_copy(edit=edit)
    with pytest.raises(LabError) as e:
        simulated(str(clab))
    assert str(e.value).startswith(f"{clab}: node h1: exec[3]") and "\n" not in str(e.value)


def test_unknown_runtime_and_lab_up_of_the_sim_say_where_to_go():
    with pytest.raises(LabError, match="unknown runtime 'kvm'"):
        runtime_for("kvm")
    with pytest.raises(LabError, match="--runtime sim"):
        runtime_for("sim")


@pytest.fixture(scope="module")
def lab():
    return simulated(str(DEFAULT))


def test_pings_cross_the_simulated_fabric_with_the_live_hop_counts(lab):
    pings = {(p.src, p.dst): p for p in lab.ping_all()}
    assert len(pings) == 12 and all(p.ok for p in pings.values())
    assert pings["h1", "h2"].hops == 0 and pings["h1", "h3"].hops == 3  # bridged / L-S-L
    addrs = lab.host_addresses()
    hops = lab.trace("h1", addrs["h3"])
    assert hops[0] == lab.default_gateway("h1") and hops[-1] == addrs["h3"] and len(hops) == 4


def incast_result(seed: int, time_scale: float = 1.0, jitter_s: float = 0.0) -> dict:
    lab = sim.up(topology.load(str(DEFAULT)), time_scale, seed, jitter_s)
    flows = patterns.incast("h1", ["h2", "h3", "h4"], 256 * 1024, 1, 2)
    return patterns.run(lab, flows, pattern="incast", timeout_s=30,
                        nic={"*": {"dcqcn": {"enabled": False}}})


def test_same_lab_and_seed_give_byte_identical_results():
    first, again = incast_result(7), incast_result(7)
    assert first["complete"]
    assert json.dumps(first, sort_keys=True) == json.dumps(again, sort_keys=True)
    other = incast_result(8)  # another seed: other start jitter and ECMP salts
    assert json.dumps(other, sort_keys=True) != json.dumps(first, sort_keys=True)
    jittered = incast_result(7, jitter_s=20e-9)  # the seed draws each wire's jitter too
    assert json.dumps(jittered, sort_keys=True) == json.dumps(incast_result(7, jitter_s=20e-9),
                                                              sort_keys=True)
    assert json.dumps(jittered, sort_keys=True) != json.dumps(first, sort_keys=True)
    with pytest.raises(LabError, match=r"roce-v2-leafspine\.clab\.yml: timing jitter cannot "
                                       r"be negative"):
        simulated(str(DEFAULT), jitter_s=-1e-9)


def test_an_incast_at_real_line_rate_fills_the_bottleneck_without_loss():
    result = incast_result(0)
    flows = result["flows"]
    assert result["complete"] and not any(f["retransmitted"] for f in flows)
    total = sum(f["delivered_bytes"] for f in flows) * 8 / result["elapsed_s"]
    assert 80e9 < total <= 100e9  # one 100G port toward h1 carries all of it


def test_time_scale_stretches_times_and_keeps_bytes():
    fast, slow = incast_result(0, 1.0), incast_result(0, 1000.0)
    assert slow["elapsed_s"] == pytest.approx(fast["elapsed_s"] * 1000, rel=0.02)
    assert sum(f["delivered_bytes"] for f in slow["flows"]) == \
        sum(f["delivered_bytes"] for f in fast["flows"])
