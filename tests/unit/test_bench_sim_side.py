"""bench.sim_side and bench.htsim: the all-to-all case written as htsim's connection matrix
and arguments, htsim's printed output read (a sample recorded from a real htsim_roce run),
frame-hops counted as htsim counts them, and the ratios and errors the table shows."""
from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

from bench import sim_side
from bench.__main__ import main
from bench.htsim import adapter
from rocelab.labs import generate
from rocelab.labs.generate_spec import Spec
from rocelab.labs.runtimes.sim import simulated
from rocelab.traffic import patterns

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "htsim" / "roce_alltoall_8.txt"


def all_to_all(hosts: int, size: int = 65536, mtu: int = 4096) -> adapter.Case:
    flows = tuple((s, d) for s in range(hosts) for d in range(hosts) if s != d)
    return adapter.Case(hosts, 400_000, mtu, size, flows)


def test_the_connection_matrix_has_one_line_per_flow_with_ids_from_one():
    case = adapter.Case(8, 400_000, 4096, 65536, ((0, 1), (7, 2)))
    assert adapter.matrix(case) == ("Nodes 8\nConnections 2\n"
                                    "0->1 id 1 start 0 size 65536\n"
                                    "7->2 id 2 start 0 size 65536\n")


def test_htsim_shape_is_k_leaves_of_k_over_2_hosts_and_nothing_else():
    assert adapter.leaves_of(128) == 16 and adapter.leaves_of(512) == 32
    assert all_to_all(128).hosts_per_leaf == 8
    case = all_to_all(8)  # K = 4: racks of two
    assert [case.switches_on_path(0, d) for d in (1, 2, 7)] == [1, 3, 3]
    assert adapter.leaves_of(18) == 6  # racks of three
    for bad in (100, 7, 0):
        with pytest.raises(adapter.HtsimError, match="K\\*K/2"):
            adapter.leaves_of(bad)
    with pytest.raises(adapter.HtsimError, match="--hosts 128,12x: give host counts"):
        sim_side.hosts_option("128,12x")
    assert sim_side.hosts_option("128,512") == [128, 512]


def test_the_arguments_are_an_argv_with_the_case_and_enough_time():
    case = all_to_all(128)
    got = adapter.argv("/opt/htsim_roce", case, "/tmp/x/case.cm", "/tmp/x/log.dat")
    assert got == ["/opt/htsim_roce", "-nodes", "128", "-tiers", "2", "-linkspeed", "400000",
                   "-mtu", "4096", "-strat", "ecmp_host", "-paths", "8", "-q", "1000",
                   "-pfc_thresholds", "40", "60", "-end", got[got.index("-end") + 1],
                   "-tm", "/tmp/x/case.cm", "-o", "/tmp/x/log.dat"]
    # each host sends 127 x 64 KiB: 166 us at 400G, ten times that
    assert got[got.index("-end") + 1] == "1660"
    assert adapter.end_us(all_to_all(8)) == 1000  # never below htsim's own default
    assert adapter.end_us(all_to_all(512)) == 10 * round(511 * 65536 * 8 / 400_000)


def test_htsim_output_recorded_from_a_real_run_is_read():
    case = all_to_all(8)
    got = adapter.parse(SAMPLE.read_text().splitlines(), case)
    assert got["flows"] == got["flows_completed"] == 56 and got["complete"]
    assert got["retransmitted_bytes"] == 0
    assert got["simulated_s"] == pytest.approx(20.3904e-6)  # the last 'finished at' (us)
    assert got["data_packets"] == 56 * 16
    # 8 flows within a rack (1 switch), 48 across (3): 16 packets and 16 ACKs over each
    assert got["frame_hops"] == 2 * 16 * (8 * 1 + 48 * 3)


def test_what_htsim_went_back_over_adds_packets_over_the_mean_path():
    lines = [line if not line.startswith("New:") else "New: 0 Rtx: 8192"
             for line in SAMPLE.read_text().splitlines()]
    got = adapter.parse(lines, all_to_all(8))
    assert got["data_packets"] == 56 * 16 + 2
    assert got["frame_hops"] == round(2 * (16 * 152 + 2 * 152 / 56))


def test_output_that_stops_early_or_is_another_case_is_an_error():
    lines = SAMPLE.read_text().splitlines()
    with pytest.raises(adapter.HtsimError, match="New: N Rtx: M"):
        adapter.parse([line for line in lines if not line.startswith("New:")], all_to_all(8))
    with pytest.raises(adapter.HtsimError, match="56 connections, the case has 2"):
        adapter.parse(lines, adapter.Case(8, 400_000, 4096, 65536, ((0, 1), (1, 0))))
    unfinished = [line for line in lines if not line.startswith("Flow Roce_0_1 ")]
    got = adapter.parse(unfinished, all_to_all(8))
    assert got["flows_completed"] == 55 and not got["complete"]
    twice = lines + [next(line for line in lines if line.startswith("Flow Roce_0_1 "))]
    assert adapter.parse(twice, all_to_all(8))["flows_completed"] == 56


def test_a_binary_that_is_not_there_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(adapter.HtsimError, match="build.sh"):
        adapter.check_binary(tmp_path / "htsim_roce")
    assert main(["sim", "--htsim", str(tmp_path / "htsim_roce")]) == 2
    assert main(["sim", "--hosts", "100"]) == 2


def tiny(tmp_path: Path, hosts_per_leaf: int):
    written = generate.write(Spec("tiny", hosts_per_leaf, 2, 0, "400G"), tmp_path / "tiny")
    return next(written.path.glob("*.clab.yml"))


def test_a_frame_crossing_one_switch_counts_once(tmp_path):
    """h1 -> h2 on one leaf: 4 data packets of an MTU and the one ACK that acknowledges
    them all (the responder acknowledges the last packet of a message), each forwarded by
    leaf1 alone; the hosts' ARP before the flow is not counted."""
    lab = simulated(str(tiny(tmp_path, 2)))
    flows = patterns.alltoall(["h1", "h2"], 4 * 4096, 1, 1)[:1]
    job = patterns.start(lab, flows, pattern="alltoall", timeout_s=10,
                         nic={"*": {"dcqcn": {"enabled": False}}})
    before = sim_side.switch_frame_hops(lab)
    assert job.wait()["complete"]
    assert sim_side.switch_frame_hops(lab) - before == 4 + 1
    by_switch = {n: sum(p["forwarded"] for p in s.switch.counters()["ports"].values())
                 for n, s in lab.net.switches.items()}
    assert all(v == 0 for n, v in by_switch.items() if n != "leaf1")


def test_the_case_run_counts_every_switch_on_the_path(tmp_path):
    """htsim's 2-host shape (K = 2: two leaves of one host, one spine): both flows cross
    leaf, spine, leaf; 16 data packets and one ACK each."""
    written = generate.write(sim_side.spec(2), tmp_path / "k2")
    got = sim_side.run_case(next(written.path.glob("*.clab.yml")), 65536)
    assert got["complete"] and got["flows_completed"] == got["flows"] == 2
    assert got["frame_hops"] == 2 * 3 * (16 + 1)
    assert (got["data_packets"], got["acks"], got["cnps"], got["retransmitted"]) == (32, 2, 0, 0)
    assert (got["naks"], got["switch_drops"]) == (0, {})
    assert 0 < got["simulated_s"] < 1e-4


def side(wall: float, hops: int, complete: bool = True) -> dict:
    run = {"wall_s": wall, "cpu_s": wall, "peak_rss_mib": 100.0, "flows": 10,
           "flows_completed": 10 if complete else 7, "complete": complete,
           "simulated_s": 2e-4, "frame_hops": hops}
    return {**run, **sim_side.rates(run)}


def table_text(out: dict) -> str:
    table = Table()
    for col in ("measure", "value", "baseline", "ratio", "target"):
        table.add_column(col)
    sim_side.rows(table, out)
    console = Console(width=300, record=True)
    console.print(table)
    return console.export_text()


def test_the_ratios_and_the_target_come_from_both_sides_of_one_run():
    out = {"hosts": 128, "shape": "2 tiers: 128 hosts at 400G, 16 leaves, 8 spines; ...",
           "target_ratio": 2.0, "rocelab": side(30.0, 1000), "htsim": side(10.0, 2000)}
    got = sim_side.compare(out)
    assert got["ratio_wall"] == pytest.approx(3.0)
    assert got["ratio_per_frame_hop"] == pytest.approx(6.0)
    assert got["target_holds"] is False
    assert sim_side.compare({**out, "rocelab": side(15.0, 1000)})["target_holds"] is True
    text = table_text({"htsim": "/x/htsim_roce", "cases": [{**out, **got}]})
    assert "3.00x wall, 6.00x per frame-hop" in text and "<= 2x: DOES NOT HOLD" in text
    assert "build.sh" not in text


def test_a_flow_that_did_not_complete_is_an_error_not_a_figure():
    out = {"hosts": 128, "shape": "2 tiers: 128 hosts", "target_ratio": 2.0,
           "rocelab": side(30.0, 1000, complete=False), "htsim": side(10.0, 2000)}
    out.update(sim_side.compare(out))
    assert out["ratio_wall"] is None and out["target_holds"] is None
    text = table_text({"htsim": "/x/htsim_roce", "cases": [out]})
    assert "ERROR: 3 of 10 flows did not complete" in text
    assert "<= 2x: not measured" in text


def test_without_htsim_the_table_says_how_to_get_the_ratio():
    out = {"hosts": 128, "shape": "2 tiers: 128 hosts", "target_ratio": 2.0,
           "rocelab": side(30.0, 1000)}
    out.update(sim_side.compare(out))
    text = table_text({"htsim": None, "cases": [out]})
    assert "bench/htsim/build.sh SRC" in text and "--htsim" in text
    assert "htsim, same case" not in text


def fake_htsim(folder: Path, body: str) -> Path:
    """A stand-in for the binary: a script that prints what a real run printed."""
    path = folder / "htsim_roce"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_a_run_is_timed_and_read_and_a_failed_one_says_its_last_line(tmp_path):
    got = adapter.run(fake_htsim(tmp_path, f"cat '{SAMPLE}'"), all_to_all(8))
    assert got["complete"] and got["wall_s"] > 0 and got["peak_rss_mib"] > 0
    with pytest.raises(adapter.HtsimError, match="exited with 3: no such topology"):
        adapter.run(fake_htsim(tmp_path, "echo starting; echo no such topology; exit 3"),
                    all_to_all(8))
