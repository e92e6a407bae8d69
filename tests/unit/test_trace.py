"""The congestion time series: ``Switch.sample`` with exact values, the agent's ``Trace``
writer driven on a fake clock (no sockets), its limits and write errors, and the rules for
where a trace may be written (``open_trace_file``)."""
from __future__ import annotations

import json
import os

import pytest

from rocelab.checks.plots import load_trace
from rocelab.fabric.trace import MIN_MAX_BYTES, Trace, TracePathError, open_trace_file
from rocelab.fabric.model.frames import mac_bytes, pfc_frame
from tests.unit.test_lossless import (
    FRAME, H1, H1_PORT, H2_PORT, RATE, blast_until_pfc, learned, leaf1, udp_frame,
)

POOL_NAME = "ingress_lossless_pool"
IDLE_PORT = "Ethernet0"  # an uplink of leaf1 that the tests send nothing through


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
    trace = Trace(sw, "leaf1", open(path, "wb"), str(path), 0.001, [H1_PORT], now=10.0)
    for now in (10.0, 10.0005, 10.001, 10.0103):  # the last one is late: skip, no burst
        assert trace.poll(now)
    assert trace.next_at == 10.0113
    end = trace.close(10.02)
    assert (end.samples, end.reason, end.error) == (3, "stopped", None)
    assert end.bytes == path.stat().st_size and end.seconds == 0.02
    header, *samples = [json.loads(line) for line in path.read_text().splitlines()]
    assert header["node"] == "leaf1" and header["interval_ms"] == 1.0
    assert header["ports"] == [H1_PORT] and header["time_scale"] == sw.time_scale
    assert [s["t"] for s in samples] == [0.0, 0.001, 0.0103]
    assert list(samples[0]["ports"]) == [H1_PORT] and "pools" in samples[0]
    # nothing moved on the idle switch: the later lines carry only the time
    assert samples[1:] == [{"t": 0.001, "ports": {}}, {"t": 0.0103, "ports": {}}]


def test_a_simulated_switchs_trace_says_when_it_started_on_the_simulators_clock(tmp_path):
    """``virtual_s`` lines a simulated lab's traces up exactly (``plots.paused_rows``); a
    live agent's clock is its own, so its header has none."""
    sw = learned(leaf1())
    headers = []
    for virtual in (True, False):
        path = tmp_path / f"{virtual}.jsonl"
        Trace(sw, "leaf1", open(path, "wb"), str(path), 0.001, [H1_PORT], now=0.0125,
              virtual=virtual).close(0.02)
        headers.append(json.loads(path.read_text().splitlines()[0]))
    assert headers[0]["virtual_s"] == 0.0125 and "virtual_s" not in headers[1]


def test_a_trace_line_holds_what_changed_and_reads_back_whole(tmp_path):
    """Only the ports that moved are written (h2's ingress PG and h1's egress queue, not the
    idle uplink); ``load_trace`` gives every sample whole, equal to what ``Switch.sample``
    showed at that moment."""
    sw = learned(leaf1())
    path = tmp_path / "trace.jsonl"
    ports = [H1_PORT, H2_PORT, IDLE_PORT]
    trace = Trace(sw, "leaf1", open(path, "wb"), str(path), 0.001, ports, now=1.0)
    expected = [sw.sample(1.0, ports)]
    assert trace.poll(1.0)
    for _ in range(3):
        sw.receive(H2_PORT, udp_frame(26), 1.0005)
    expected.append(sw.sample(1.001, ports))
    assert trace.poll(1.001)
    trace.close(1.002)
    _, *lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert set(lines[0]["ports"]) == set(ports)
    assert set(lines[1]["ports"]) == {H1_PORT, H2_PORT} and "pools" not in lines[1]
    _, samples = load_trace(path)
    assert [{"ports": s["ports"], "pools": s["pools"]} for s in samples] == expected


def test_trace_ends_at_its_time_limit_with_the_reason():
    sw = learned(leaf1())
    with open(os.devnull, "wb") as out:
        trace = Trace(sw, "leaf1", out, "t.jsonl", 0.001, [H1_PORT], now=0.0, max_seconds=0.0025)
        assert trace.poll(0.0) and trace.poll(0.001) and trace.poll(0.002)
        assert not trace.poll(0.003)  # past 2.5 ms: ended, nothing more written
        assert not trace.poll(0.004)
    assert trace.ended.reason == "max_seconds" and trace.ended.samples == 3


def test_trace_ends_before_a_line_would_pass_its_size_limit(tmp_path):
    sw = learned(leaf1())
    path = tmp_path / "t.jsonl"
    trace = Trace(sw, "leaf1", open(path, "wb"), str(path), 0.001, [H1_PORT], now=0.0,
                  max_bytes=MIN_MAX_BYTES)
    now = 0.0
    while trace.poll(now):
        now += 0.001
    end = trace.ended
    assert end.reason == "max_bytes" and end.bytes <= MIN_MAX_BYTES
    lines = path.read_bytes().splitlines(keepends=True)
    assert path.stat().st_size == end.bytes and len(lines) == end.samples + 1
    assert all(line.endswith(b"\n") for line in lines)  # whole lines only
    assert end.bytes + len(lines[-1]) > MIN_MAX_BYTES  # one more sample would not have fit


def test_a_full_disk_ends_the_trace_with_the_error_instead_of_raising():
    """/dev/full fails every write with ENOSPC: unbuffered, the first sample already fails."""
    sw = learned(leaf1())
    trace = Trace(sw, "leaf1", open("/dev/full", "wb", buffering=0), "t.jsonl", 0.001,
                  [H1_PORT], now=0.0)
    assert not trace.poll(0.0)
    assert trace.ended.reason == "write_error" and "ENOSPC" in trace.ended.error
    assert trace.close(1.0) is trace.ended  # closing again changes nothing


def test_a_failed_flush_at_close_is_reported_too():
    sw = learned(leaf1())
    trace = Trace(sw, "leaf1", open("/dev/full", "wb"), "t.jsonl", 0.001, [H1_PORT], now=0.0)
    assert trace.poll(0.0)  # buffered: the failure comes with the flush
    end = trace.close(0.5)
    assert end.reason == "write_error" and "No space left" in end.error


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.fixture
def roots(tmp_path):
    """Two allowed folders, and one outside them."""
    results, state, outside = (tmp_path / n for n in ("results", "state", "outside"))
    for folder in (results, state, outside):
        folder.mkdir()
    return results, state, outside


def test_a_trace_may_be_written_under_an_allowed_folder_and_truncates(roots):
    results, state, _ = roots
    (results / "run").mkdir()
    target = results / "run" / "trace.jsonl"
    target.write_text("old contents")
    with open_trace_file(str(target), [results, state]) as out:
        out.write(b"new\n")
    assert target.read_bytes() == b"new\n"
    with open_trace_file(str(state / "fresh.jsonl"), [results, state]):
        pass
    assert (state / "fresh.jsonl").stat().st_mode & 0o777 == 0o644 & ~current_umask()


def test_a_root_reached_through_a_link_accepts_its_real_location(roots, tmp_path):
    results, _, _ = roots
    link = tmp_path / "results-link"
    link.symlink_to(results)
    with open_trace_file(str(results / "a.jsonl"), [link]):
        pass
    with open_trace_file(str(link / "b.jsonl"), [link]):
        pass
    assert sorted(p.name for p in results.iterdir()) == ["a.jsonl", "b.jsonl"]


@pytest.mark.parametrize("make_path, why", [
    (lambda r, s, o: str(o / "x.jsonl"), "outside the agent's trace folders"),
    (lambda r, s, o: "/etc/passwd", "outside the agent's trace folders"),
    (lambda r, s, o: f"{r}/../outside/x.jsonl", "contains '..'"),
    (lambda r, s, o: "relative/x.jsonl", "not absolute"),
    (lambda r, s, o: str(r), "outside"),  # the folder itself is not a file under it
    (lambda r, s, o: f"{r}/x\0.jsonl", "NUL"),
    (lambda r, s, o: f"{r}/" + "a" * 5000, "too long"),
    (lambda r, s, o: f"{r}/missing/x.jsonl", "No such file"),
])
def test_a_trace_path_outside_or_odd_is_refused(roots, make_path, why):
    results, state, outside = roots
    with pytest.raises(TracePathError, match=why):
        open_trace_file(make_path(results, state, outside), [results, state])
    assert list(outside.iterdir()) == []


def test_a_symbolic_link_is_not_followed_at_the_file_or_any_folder(roots):
    results, _, outside = roots
    victim = outside / "victim"
    victim.write_text("precious")
    (results / "file-link").symlink_to(victim)
    (results / "dir-link").symlink_to(outside)
    for path in (results / "file-link", results / "dir-link" / "victim"):
        with pytest.raises(TracePathError, match="symbolic link"):
            open_trace_file(str(path), [results])
    assert victim.read_text() == "precious"


def test_a_fifo_or_a_hard_link_is_refused_without_blocking_or_truncating(roots):
    results, _, outside = roots
    os.mkfifo(results / "fifo")  # no reader: a blocking open would hang the agent
    with pytest.raises(TracePathError, match="No such device|regular file"):
        open_trace_file(str(results / "fifo"), [results])
    victim = outside / "victim"
    victim.write_text("precious")
    os.link(victim, results / "hard")
    with pytest.raises(TracePathError, match="single link"):
        open_trace_file(str(results / "hard"), [results])
    assert victim.read_text() == "precious"
