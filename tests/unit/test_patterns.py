"""Traffic patterns: which flows each pattern makes, the specs the endpoints get, the
retransmit timeout, NIC overrides and how sender and receiver reports merge."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from rocelab.labs import topology
from rocelab.traffic import patterns
from rocelab.traffic.patterns import FlowSpec

LAB = topology.load("roce-v2-leafspine")
ADDRESSES = {"h1": "10.1.1.11", "h2": "10.1.1.12", "h3": "10.1.2.13", "h4": "10.1.2.14"}


def fake_lab(topo=LAB):
    return SimpleNamespace(name=topo.name, topology=topo, host_addresses=lambda: ADDRESSES,
                           node_time_scale=lambda node: topo.nodes[node].time_scale)


def test_a_host_runs_at_its_switch_ports_speed(tmp_path):
    import json
    from tests.conftest import copy_lab
    clab = copy_lab(tmp_path)
    config = clab.parent / "configs" / "leaf1" / "config_db.json"
    data = json.loads(config.read_text())
    data["PORT"]["Ethernet8"]["speed"] = "25000"  # leaf1's port to h1
    config.write_text(json.dumps(data))
    lab = fake_lab(topology.load(clab))
    assert patterns.host_speed_mbps(lab, "h1") == 25000
    assert patterns.host_speed_mbps(lab, "h2") == 100000


def test_incast_is_one_flow_per_sender_and_qp():
    flows = patterns.incast("h1", ["h2", "h3"], 4096, 3, qps=2)
    assert [f.name for f in flows] == ["h2->h1#0", "h2->h1#1", "h3->h1#0", "h3->h1#1"]
    assert all((f.dst, f.size, f.count) == ("h1", 4096, 3) for f in flows)
    with pytest.raises(patterns.PatternError, match="both the receiver and a sender"):
        patterns.incast("h1", ["h1", "h2"], 1, 1)
    with pytest.raises(patterns.PatternError, match="qps must be at least 1"):
        patterns.incast("h1", ["h2"], 1, 1, qps=0)


def test_alltoall_is_every_ordered_pair():
    flows = patterns.alltoall(["h1", "h2", "h3"], 100, 1)
    assert sorted(f.name for f in flows) == ["h1->h2", "h1->h3", "h2->h1", "h2->h3",
                                             "h3->h1", "h3->h2"]


def test_ring_allreduce_chunks_and_gates_each_hop_on_its_predecessor():
    flows = patterns.ring_allreduce(["h1", "h2", "h3", "h4"], 4 << 20)
    assert [(f.src, f.dst) for f in flows] == [("h1", "h2"), ("h2", "h3"), ("h3", "h4"),
                                               ("h4", "h1")]
    assert all(f.size == 1 << 20 and f.count == 6 for f in flows)  # 2(N-1) chunks of size/N
    assert [f.after for f in flows] == ["h4->h1", "h1->h2", "h2->h3", "h3->h4"]
    with pytest.raises(patterns.PatternError, match="at least two hosts"):
        patterns.ring_allreduce(["h1"], 10)


def test_the_timeout_outlasts_the_busiest_receivers_in_flight_data_twice():
    line = 100e9 / 3000
    flows = patterns.incast("h1", ["h2", "h3", "h4"], 1 << 20, 2, qps=4)
    rto = patterns.retransmit_timeout(flows, line, 4096)
    per_flow = min(patterns.WINDOW, 256 * 2)  # 1 MiB at MTU 4096: 256 packets a message
    drain = 12 * per_flow * (4096 + patterns.FRAME_OVERHEAD) * 8 / line
    assert rto == pytest.approx(2 * drain)
    assert patterns.retransmit_timeout([FlowSpec("h2", "h1", 100, 1)], line, 4096) == 0.5


def test_nic_overrides_lay_over_the_hosts_file_section_by_section():
    h2 = LAB.nodes["h2"]
    base = patterns.nic_settings(h2, None)
    assert base == h2.nic
    changed = patterns.nic_settings(h2, {"*": {"dcqcn": {"enabled": False}},
                                         "h2": {"roce": {"dscp": 0}}})
    assert not changed.dcqcn.enabled and changed.roce.dscp == 0
    assert changed.roce.mtu == base.roce.mtu and changed.cnp == base.cnp
    assert patterns.nic_settings(LAB.nodes["h3"], {"h2": {"roce": {"dscp": 0}}}).roce.dscp \
        == base.roce.dscp
    with pytest.raises(ValueError, match="dscp"):
        patterns.nic_settings(h2, {"*": {"roce": {"dscp": 64}}})


def test_specs_agree_on_both_ends_of_every_qp():
    flows = patterns.incast("h1", ["h2", "h3"], 8192, 2)
    specs = patterns.specs(fake_lab(), flows, rto_s=1.5, timeout_s=30)
    assert sorted(specs) == ["h1", "h2", "h3"]
    assert specs["h1"]["send"] == [] and len(specs["h1"]["receive"]) == 2
    for sender in ("h2", "h3"):
        (send,) = specs[sender]["send"]
        (recv,) = [r for r in specs["h1"]["receive"] if r["name"] == send["name"]]
        assert (send["qpn"], send["peer_qpn"]) == (recv["peer_qpn"], recv["qpn"])
        assert send["start_psn"] == recv["start_psn"] and send["sport"] == recv["sport"]
        assert send["peer_ip"] == "10.1.1.11" and recv["peer_ip"] == ADDRESSES[sender]
        assert send["rto_s"] == 1.5 and send["window"] == patterns.WINDOW
        assert recv["ack_delay_s"] == 1.5 / patterns.ACK_DELAYS_PER_TIMEOUT
    assert specs["h2"]["send"][0]["sport"] != specs["h3"]["send"][0]["sport"]  # ECMP entropy
    assert specs["h2"]["nic"]["roce"]["mtu"] == LAB.nodes["h2"].nic.roce.mtu
    assert specs["h2"]["time_scale"] == LAB.nodes["h2"].time_scale
    assert specs["h2"]["speed_mbps"] == 100000  # leaf1's PORT|Ethernet12 speed


def test_specs_refuse_unknown_hosts_and_self_flows_in_one_line():
    with pytest.raises(patterns.PatternError, match=r"no host 'h9' \(hosts: "):
        patterns.specs(fake_lab(), [FlowSpec("h9", "h1", 1, 1)], rto_s=1, timeout_s=1)
    with pytest.raises(patterns.PatternError, match="cannot send to itself"):
        patterns.specs(fake_lab(), [FlowSpec("h1", "h1", 1, 1)], rto_s=1, timeout_s=1)


def sender(name, done=2, failed=None):
    return {"name": name, "role": "sender", "messages_done": done, "messages": 2,
            "failed": failed, "bytes": 200, "goodput_bps": 1.0, "retransmitted": 0}


def receiver(name, messages=2):
    return {"name": name, "role": "receiver", "messages": messages, "bytes": 100 * messages}


def test_merge_marks_a_flow_complete_only_when_both_ends_agree():
    flows = patterns.incast("h1", ["h2", "h3"], 100, 2)
    done = {"h2": {"event": "done", "senders": [sender("h2->h1")], "receivers": [],
                   "paused_s": 0.5},
            "h3": {"event": "done", "senders": [sender("h3->h1", failed="retry limit")],
                   "receivers": []},
            "h1": {"event": "done", "senders": [],
                   "receivers": [receiver("h2->h1"), receiver("h3->h1", 1)]}}
    merged = patterns.merge("incast", "lab", flows, done, 3000.0, 0.5, 1.0)
    by_name = {f["name"]: f for f in merged["flows"]}
    assert by_name["h2->h1"]["complete"] and not by_name["h3->h1"]["complete"]
    assert not merged["complete"]
    assert by_name["h2->h1"]["delivered_bytes"] == 200 and "role" not in by_name["h2->h1"]
    assert merged["hosts"]["h2"] == {"paused_s": 0.5}
