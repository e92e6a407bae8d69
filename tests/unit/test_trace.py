"""The congestion time series: ``Switch.sample`` with exact values, and the agent's
``Trace`` writer driven on a fake clock (no sockets)."""
from __future__ import annotations

import json

from fabric.agent import Trace
from fabric.model.frames import mac_bytes, pfc_frame
from tests.unit.test_lossless import (
    FRAME, H1, H1_PORT, H2_PORT, RATE, blast_until_pfc, learned, leaf1, udp_frame,
)

POOL_NAME = "ingress_lossless_pool"


def test_sample_shows_queue_depth_pg_occupancy_and_the_pause_left():
    sw = learned(leaf1())
    sw.receive(H1_PORT, pfc_frame(mac_bytes(H1), {3: 1000}), 1.0)  # h1 pauses queue 3
    for _ in range(3):
        sw.receive(H2_PORT, udp_frame(26), 1.0)
    sample = sw.sample(1.001)
    assert sample["ports"][H1_PORT] == {
        "queue_bytes": [0, 0, 0, 3 * FRAME, 0, 0, 0, 0],
        "pg_bytes": [0] * 8,
        "xoff": [False] * 8,
        "pause_s": [0.0, 0.0, 0.0, round(1000 * 512 / RATE - 0.001, 9), 0.0, 0.0, 0.0, 0.0],
    }
    assert sample["ports"][H2_PORT]["pg_bytes"] == [0, 0, 0, 3 * FRAME, 0, 0, 0, 0]
    assert sample["pools"] == {POOL_NAME: {"used": 0, "headroom_used": 0}}  # all reserved
    assert sw.sample(1.0 + 1000 * 512 / RATE)["ports"][H1_PORT]["pause_s"] == [0.0] * 8
    assert list(sw.sample(1.0, [H2_PORT])["ports"]) == [H2_PORT]


def test_sample_shows_xoff_and_the_shared_pool_in_use():
    sw = learned(leaf1())
    n, _ = blast_until_pfc(sw)
    port = sw.sample(0.0)["ports"][H2_PORT]
    assert port["xoff"] == [False, False, False, True, False, False, False, False]
    assert port["pg_bytes"][3] == (n - 1) * FRAME  # the first frame cut through and left
    pg = sw.counters()["ports"][H2_PORT]["pgs"]["3"]
    assert sw.sample(0.0)["pools"][POOL_NAME] == {"used": pg["shared"],
                                                 "headroom_used": pg["headroom_used"]}


def test_trace_writes_a_header_then_one_line_per_interval(tmp_path):
    sw = learned(leaf1())
    path = tmp_path / "trace.jsonl"
    trace = Trace(sw, "leaf1", path, 0.001, [H1_PORT], now=10.0)
    for now in (10.0, 10.0005, 10.001, 10.0103):  # the last one is late: skip, no burst
        trace.poll(now)
    assert trace.next_at == 10.0113
    assert trace.close() == 3
    header, *samples = [json.loads(line) for line in path.read_text().splitlines()]
    assert header["node"] == "leaf1" and header["interval_ms"] == 1.0
    assert header["ports"] == [H1_PORT] and header["time_scale"] == sw.time_scale
    assert [s["t"] for s in samples] == [0.0, 0.001, 0.0103]
    assert list(samples[0]["ports"]) == [H1_PORT] and "pools" in samples[0]
