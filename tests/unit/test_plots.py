"""checks.plots: trace loading, the series each figure picks, and that figures are PNGs."""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from rocelab.checks import plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PORTS = ["Ethernet0", "Ethernet8"]


def sample(t: float, queue3: int = 0, pg3: int = 0, pause3: float = 0.0) -> dict:
    def port(q: int, pg: int, pause: float) -> dict:
        return {"queue_bytes": [0, 0, 0, q, 0, 0, 0, 0], "pg_bytes": [0, 0, 0, pg, 0, 0, 0, 0],
                "xoff": [False] * 8, "pause_s": [0.0, 0.0, 0.0, pause, 0.0, 0.0, 0.0, 0.0]}
    return {"t": t, "ports": {"Ethernet0": port(queue3, pg3, pause3),
                              "Ethernet8": port(0, 0, 0.0)},
            "pools": {"ingress_lossless_pool": {"used": pg3, "headroom_used": 0}}}


def write_trace(path: Path, samples: list[dict], node: str = "leaf1", started: float = 1000.0,
                tail: str = "") -> Path:
    header = {"node": node, "time_scale": 3000.0, "interval_ms": 1.0, "ports": PORTS,
              "started": started}
    path.write_text("\n".join(json.dumps(x) for x in [header, *samples]) + "\n" + tail)
    return path


def is_png(path: Path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == PNG_MAGIC


def test_load_trace_drops_a_truncated_last_line(tmp_path):
    path = write_trace(tmp_path / "t.jsonl", [sample(0.0), sample(0.001, 10)],
                       tail='{"t": 0.002, "ports": {"Ether')
    header, samples = plots.load_trace(path)
    assert header["node"] == "leaf1"
    assert [s["t"] for s in samples] == [0.0, 0.001]


def test_load_trace_refuses_a_corrupt_line_in_the_middle(tmp_path):
    path = tmp_path / "t.jsonl"
    write_trace(path, [sample(0.0)])
    path.write_text(path.read_text() + "garbage\n" + json.dumps(sample(0.001)) + "\n")
    with pytest.raises(ValueError, match=":3:"):
        plots.load_trace(path)


def test_load_trace_refuses_an_empty_file(tmp_path):
    (tmp_path / "t.jsonl").write_text("")
    with pytest.raises(ValueError, match="empty trace"):
        plots.load_trace(tmp_path / "t.jsonl")


def test_load_trace_carries_unchanged_ports_and_pools_forward(tmp_path):
    """A line names only what changed (``fabric.trace.Trace``): the rest is the last state."""
    first, second = sample(0.0, queue3=100), sample(0.001, queue3=200)
    del second["ports"]["Ethernet8"], second["pools"]
    third = {"t": 0.002, "ports": {}}
    _, samples = plots.load_trace(write_trace(tmp_path / "t.jsonl", [first, second, third]))
    assert [s["ports"]["Ethernet0"]["queue_bytes"][3] for s in samples] == [100, 200, 200]
    assert all(s["ports"]["Ethernet8"] == first["ports"]["Ethernet8"] for s in samples)
    assert all(s["pools"] == first["pools"] for s in samples)


def test_paused_priorities_and_joined_spans():
    samples = [sample(0.0), sample(0.001, pause3=0.5), sample(0.002)]
    assert plots.paused_priorities(samples, "Ethernet0") == [3]
    assert plots.paused_priorities(samples, "Ethernet8") == []
    spans = [(0.0, 1.0), (1.05, 1.0), (3.0, 0.5)]
    assert plots.joined(spans, 0.1) == [(0.0, 2.05), (3.0, 0.5)]
    assert plots.joined(spans, 0.01) == spans


def test_nonzero_series_keeps_only_queues_that_were_ever_used():
    samples = [sample(0.0), sample(0.001, queue3=500), sample(0.002)]
    assert plots.nonzero_series(samples, "Ethernet0", "queue_bytes") == {3: [0, 500, 0]}
    assert plots.nonzero_series(samples, "Ethernet0", "pg_bytes") == {}
    assert plots.nonzero_series(samples, "Ethernet8", "queue_bytes") == {}


def test_pause_spans_join_consecutive_paused_samples():
    samples = [sample(0.000), sample(0.001, pause3=0.5), sample(0.002, pause3=0.5),
               sample(0.003), sample(0.004, pause3=0.0002), sample(0.005)]
    spans = plots.pause_spans(samples, "Ethernet0", 3)
    # the first pause was cut short by the next unpaused sample (XON); the second ran out
    assert spans == [pytest.approx((0.001, 0.002)), pytest.approx((0.004, 0.0002))]
    assert plots.pause_spans(samples, "Ethernet0", 0) == []
    assert plots.pause_spans(samples, "Ethernet8", 3) == []


def test_pause_still_running_at_the_end_lasts_its_remaining_time():
    samples = [sample(0.0), sample(0.001, pause3=0.01)]
    assert plots.pause_spans(samples, "Ethernet0", 3) == [pytest.approx((0.001, 0.01))]


def test_paused_rows_put_switches_on_one_clock():
    leaf = ({"node": "leaf1", "ports": PORTS, "started": 1000.0, "time_scale": 3000.0},
            [sample(0.0), sample(0.001, pause3=0.0005), sample(0.002)])
    spine = ({"node": "spine1", "ports": PORTS, "started": 1000.5, "time_scale": 3000.0},
             [sample(0.0, pause3=0.0005), sample(0.001)])
    rows, scales = plots.paused_rows(iter([leaf, spine]))
    assert scales == [3000.0]
    assert [label for label, _ in rows] == ["leaf1 Ethernet0 P3", "spine1 Ethernet0 P3"]
    assert rows[1][1] == [pytest.approx((0.5, 0.0005))]



def test_simulated_traces_line_up_on_the_simulators_clock_not_the_wall():
    """In virtual time the traces started at 1 ms and 3 ms of simulated time, whatever the
    wall clock said as each was started; one trace without that clock means wall time."""
    leaf = ({"node": "leaf1", "ports": PORTS, "started": 1000.9, "virtual_s": 0.001,
             "time_scale": 1.0}, [sample(0.0, pause3=0.0005), sample(0.001)])
    spine = ({"node": "spine1", "ports": PORTS, "started": 1000.5, "virtual_s": 0.003,
              "time_scale": 1.0}, [sample(0.0, pause3=0.0005), sample(0.001)])
    rows, _ = plots.paused_rows(iter([leaf, spine]))
    assert [spans for _, spans in rows] == [[pytest.approx((0.0, 0.0005))],
                                            [pytest.approx((0.002, 0.0005))]]
    del spine[0]["virtual_s"]
    rows, _ = plots.paused_rows(iter([leaf, spine]))
    assert [spans for _, spans in rows] == [[pytest.approx((0.4, 0.0005))],
                                            [pytest.approx((0.0, 0.0005))]]


def test_thresholds_go_to_the_subplot_they_belong_to():
    assert plots.threshold_axis("XOFF PG3") == "pg"
    assert plots.threshold_axis("xon") == "pg"
    assert plots.threshold_axis("ECN min") == "queue"


def test_goodput_label_shows_the_real_fabric_equivalent():
    flow = {"goodput_bps": 33.1e6, "time_scale": 3000.0}
    assert plots.goodput_label(flow) == "33.1 Mb/s emulated = 99.3 Gb/s at S=3000"
    assert plots.format_rate(950.0) == "950 b/s"


def test_queue_plot_writes_a_png(tmp_path):
    path = write_trace(tmp_path / "t.jsonl",
                       [sample(i / 1000, queue3=i * 100, pg3=i * 50) for i in range(50)],
                       tail='{"t"')
    out = plots.queue_plot(plots.load_trace(path), "Ethernet0", tmp_path / "out" / "q.png",
                           {"XOFF PG3": 2000, "ECN min": 3000})
    assert out == tmp_path / "out" / "q.png" and is_png(out)


def test_queue_plot_names_the_traced_ports_for_an_unknown_one(tmp_path):
    path = write_trace(tmp_path / "t.jsonl", [sample(0.0)])
    with pytest.raises(KeyError, match="Ethernet99 not traced.*Ethernet0, Ethernet8"):
        plots.queue_plot(plots.load_trace(path), "Ethernet99", tmp_path / "q.png")


def test_pause_timeline_writes_a_png_with_and_without_pauses(tmp_path):
    paused = plots.load_trace(write_trace(tmp_path / "a.jsonl",
                                          [sample(0.0, pause3=0.001), sample(0.001)]))
    idle = plots.load_trace(write_trace(tmp_path / "b.jsonl", [sample(0.0), sample(0.001)],
                                        node="spine1"))
    assert is_png(plots.pause_timeline([paused, idle], tmp_path / "p.png"))
    assert is_png(plots.pause_timeline([idle], tmp_path / "none.png"))


def flow(name: str, goodput: float, series: list[list[float]]) -> dict:
    return {"name": name, "src": name[:2], "dst": "h1", "bytes": 10 ** 6, "messages": 4,
            "elapsed_s": 1.0, "goodput_bps": goodput,
            "completion_s": {"p50": 0.1, "p99": 0.2, "max": 0.3}, "retransmitted": 2,
            "naks_received": 1, "timeouts": 0, "cnps_received": 7, "rate_series": series,
            "time_scale": 3000.0}


def test_flow_plot_writes_a_png(tmp_path):
    flows = [flow("h2->h1", 16e6, [[0.0, 33e6], [0.1, 20e6], [0.2, 16e6]]),
             flow("h3->h1", 15e6, [])]
    assert is_png(plots.flow_plot(flows, tmp_path / "f.png"))
    assert is_png(plots.flow_plot([], tmp_path / "none.png"))


def test_a_pause_timeline_of_many_paused_ports_draws_those_paused_longest():
    rows = [(f"leaf1 Ethernet{i} P3", [(0.0, 0.001 * (i % 7 + 1))])
            for i in range(plots.PAUSE_ROWS + 20)]
    kept, paused = plots.longest_paused(rows)
    assert paused == len(rows) and len(kept) == plots.PAUSE_ROWS
    shortest_kept = min(sum(w for _, w in spans) for _, spans in kept)
    assert all(sum(w for _, w in spans) <= shortest_kept for row in rows if row not in kept
               for _, spans in [row])
    assert kept == [row for row in rows if row in kept]  # in their order
    assert plots.longest_paused(rows[:3]) == (rows[:3], 3)


def test_a_plot_of_many_flows_draws_the_rates_of_a_spread_from_slowest_to_fastest(tmp_path):
    flows = [{"name": f"h{i}->h1#0", "goodput_bps": 1e6 * ((i * 37) % 100 + 1),
              "retransmitted": 0, "cnps_received": i, "time_scale": 1.0,
              "rate_series": [[0.0, 4e11], [1e-3, 2e11]]} for i in range(100)]
    drawn = plots.flows_drawn(flows)
    rates = [flows[i]["goodput_bps"] for i in drawn]
    assert len(drawn) == plots.FLOWS_NAMED == len(set(drawn))
    assert rates == sorted(rates)
    assert rates[0] == min(f["goodput_bps"] for f in flows)
    assert rates[-1] == max(f["goodput_bps"] for f in flows)
    assert plots.flows_drawn(flows[:5]) == [0, 1, 2, 3, 4]  # few: every one, in order
    assert is_png(plots.flow_plot(flows, tmp_path / "many.png"))


def test_run_figures_pickle_and_draw_what_they_say_from_the_files(tmp_path):
    """A scenario's figures travel to a worker process (``checks.drawing``) as file names:
    they pickle, ``outputs`` names the PNGs before drawing, ``draw`` writes those."""
    leaf = write_trace(tmp_path / "leaf1.jsonl", [sample(0.0), sample(0.001, 3000, 5000, 0.002)])
    spine = write_trace(tmp_path / "spine1.jsonl", [sample(0.0)], node="spine1")
    flows = [flow("h1->h4", 3e7, [[0.0, 3e7], [0.001, 2e7]])]
    figures = plots.RunFigures(
        (leaf, spine), tmp_path / "pauses.png",
        plots.QueueFigure(leaf, "Ethernet0", tmp_path / "queues.png", {"XOFF PG3": 4000},
                          ("Ethernet8",)), (flows, tmp_path / "flows.png"))
    copy = pickle.loads(pickle.dumps(figures))
    assert copy == figures
    names = ["queues.png", "pauses.png", "flows.png"]
    assert copy.outputs() == [tmp_path / n for n in names]
    assert copy.draw() == copy.outputs() and all(is_png(tmp_path / n) for n in names)
    alone = plots.RunFigures((spine,), tmp_path / "storm.png")
    assert alone.outputs() == [tmp_path / "storm.png"] == alone.draw()
