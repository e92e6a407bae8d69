"""checks.roce: what a forwarding probe keeps of the switches' counters around it."""
from __future__ import annotations

from rocelab.checks import roce


def port(rx: int, tx: int, pg3: int, q3: int) -> dict:
    return {"rx_packets": rx, "tx_packets": tx, "forwarded": rx, "drops": {},
            "pgs": {"0": {"rx_packets": 0, "lossless": False},
                    "3": {"rx_packets": pg3, "lossless": True, "threshold": 9000}},
            "queues": {"0": {"tx_packets": 0}, "3": {"tx_packets": q3, "depth_bytes": 0}},
            "fdb": ["not kept"]}


def test_a_probes_evidence_keeps_the_switches_ports_and_classes_it_moved():
    before = {"leaf1": {"drops": {}, "ports": {"Ethernet0": port(5, 5, 5, 5),
                                               "Ethernet4": port(0, 0, 0, 0)}},
              "leaf2": {"drops": {}, "ports": {"Ethernet0": port(1, 1, 1, 1)}}}
    after = {"leaf1": {"drops": {}, "ports": {"Ethernet0": port(6, 5, 6, 5),
                                              "Ethernet4": port(0, 1, 0, 1)}},
             "leaf2": {"drops": {}, "ports": {"Ethernet0": port(1, 1, 1, 1)}}}
    moved = roce.delta(before, after)
    assert moved == {"leaf1": {"ports": {"Ethernet0": {"rx_packets": 1, "pgs": {"3": 1}},
                                         "Ethernet4": {"tx_packets": 1, "queues": {"3": 1}}}}}
    kept = roce.trimmed(after, moved)
    assert list(kept) == ["leaf1"]  # leaf2 saw nothing
    assert kept["leaf1"]["ports"]["Ethernet0"] == {
        "rx_packets": 6, "tx_packets": 5, "forwarded": 6, "drops": {},
        "pgs": {"3": {"rx_packets": 6, "lossless": True, "threshold": 9000}}}
    assert kept["leaf1"]["ports"]["Ethernet4"]["queues"] == {
        "3": {"tx_packets": 1, "depth_bytes": 0}}
    assert "pgs" not in kept["leaf1"]["ports"]["Ethernet4"]
