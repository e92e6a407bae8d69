"""Operator views (labs/show.py) on a simulated lab's real counters: SONiC-shaped rows,
deltas since a clear, drop totals over every switch, mlx5-named NIC counters."""
from __future__ import annotations

import pytest

from rocelab.labs.runtimes.sim import simulated
from rocelab.labs import show
from rocelab.traffic import patterns


@pytest.fixture(scope="module")
def ran():
    """roce-v2-leafspine in virtual time, counters before and after a small incast."""
    lab = simulated("roce-v2-leafspine")
    names = [s.name for s in lab.topology.switches]
    before = {s: lab.agent(s).counters() for s in names}
    receiver = sorted(h.name for h in lab.topology.hosts)[0]
    senders = [h.name for h in lab.topology.hosts if h.name != receiver]
    result = patterns.run(lab, patterns.incast(receiver, senders, 1 << 20, 2, 2),
                          pattern="incast", timeout_s=60,
                          nic={"*": {"dcqcn": {"enabled": False}}})
    after = {s: lab.agent(s).counters() for s in names}
    return lab, before, after, result


def test_drop_totals_sum_every_switch():
    nodes = [{"drops": {"ttl_expired": 2, "no_route": 1}}, {"drops": {"ttl_expired": 3}},
             {}]
    assert show.drop_totals(nodes) == {"ttl_expired": 5, "no_route": 1}


def test_pfc_counters_one_rx_and_one_tx_row_per_port(ran):
    _, _, after, _ = ran
    rows = show.view("pfc-counters", after)
    ports = sum(len(c["ports"]) for c in after.values())
    assert len(rows) == 2 * ports
    sent = sum(sum(r[f"PFC{p}"] for p in range(8)) for r in rows if r["Dir"] == "Tx")
    assert sent == sum(sum(e["pfc_tx"]) for c in after.values() for e in c["ports"].values())


def test_clear_shows_deltas_since_the_snapshot(ran, tmp_path):
    _, before, after, _ = ran
    show.save_snapshots(tmp_path, after)
    snaps = show.load_snapshots(tmp_path, list(after))
    assert set(snaps) == set(after)
    assert not show.view("interfaces-counters", after, snaps, nonzero=True)
    since = show.view("interfaces-counters", after, {s: before[s] for s in before})
    total = sum(r["TX_OK"] for r in since)
    assert total == sum(e["tx_packets"] - before[s]["ports"][p]["tx_packets"]
                        for s, c in after.items() for p, e in c["ports"].items()) > 0


def test_interfaces_rx_ok_and_drops_add_up(ran):
    _, _, after, _ = ran
    for row, (switch, port, entry) in zip(
            show.view("interfaces-counters", after),
            ((s, p, e) for s, c in after.items() for p, e in c["ports"].items())):
        assert row["switch"] == switch and row["IFACE"].startswith(port)
        assert row["RX_OK"] + row["RX_DRP"] == entry["rx_packets"]


def test_watermarks_are_kept_by_a_snapshot_and_reset_by_their_clear(ran, tmp_path):
    lab, before, after, _ = ran
    plain = show.view("queue-watermark", after)
    assert show.view("queue-watermark", after, before) == plain  # a delta cannot undo a peak
    assert any(v for r in plain for k, v in r.items() if k.startswith("UC"))
    pg_peaks = show.view("pg-watermark", after)
    for view in ("queue-watermark", "pg-watermark"):
        assert show.clear(lab, view, tmp_path) == len(after)
    cleared = {s: lab.agent(s).counters() for s in after}
    # the incast is over: every queue and PG is empty now, so every peak starts at 0
    assert not any(v for r in show.view("queue-watermark", cleared)
                   for k, v in r.items() if k.startswith("UC"))
    assert show.view("pg-watermark", cleared) != pg_peaks
    assert not list(tmp_path.iterdir())  # reset in the switches, no snapshot taken


def test_pfcwd_stats_one_row_per_watched_queue(ran):
    _, _, after, _ = ran
    rows = show.view("pfcwd-stats", after)
    watched = sum(len(e["watchdog"]) for c in after.values() for e in c["ports"].values())
    assert len(rows) == watched and all(r["STATUS"] == "operational" for r in rows)


def test_unknown_view_is_one_clear_error(ran):
    with pytest.raises(ValueError, match="unknown view 'pfc'"):
        show.view("pfc", ran[2])


def test_nic_counters_carry_mlx5_names_and_the_endpoints_values(ran):
    lab, _, _, result = ran
    priority = lab.topology.hosts[0].nic.roce.priority
    rows = show.nic_counters(result, priority)
    names = {r["mlx5 counter"] for r in rows}
    assert {"np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets", "out_of_sequence",
            "packet_seq_err", "local_ack_timeout_err", f"rx_prio{priority}_pause"} <= names
    marked = sum(r["value"] for r in rows if r["mlx5 counter"] == "np_ecn_marked_roce_packets")
    assert marked == sum(f["receiver"]["ce_marked"] for f in result["flows"])
