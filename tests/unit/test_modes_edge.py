"""The semi-lossless mode of the modes check (``checks/test_modes.py``): PFC from the ports
toward hosts only, judged by where PFC left, not by how many frames (its edge may pause
more than a fully lossless fabric does, where no uplink can)."""
from __future__ import annotations

import json

from rocelab.checks import incast as ic
from rocelab.checks.test_modes import DCQCN_OFF, edge_only_pfc, edge_ports, measure, victim_of
from rocelab.labs.runtimes.sim import simulated
from tests.conftest import copy_lab


def test_edge_ports_are_the_switch_ports_wired_to_hosts():
    lab = simulated("roce-v2-leafspine")
    assert edge_ports(lab.topology) == {"leaf1": {"Ethernet8", "Ethernet12"},
                                        "leaf2": {"Ethernet8", "Ethernet12"},
                                        "spine1": set(), "spine2": set()}


def test_semi_lossless_pauses_from_edge_ports_only_where_pfc_everywhere_pauses_the_fabric(
        tmp_path):
    """pfc-victim: the remote senders come into leaf1 by one link, which PFC pauses."""
    lab = simulated(str(copy_lab(tmp_path / "full", "pfc-victim")))
    incast = ic.incast_of(lab)
    victim = victim_of(lab, incast)
    full = measure(lab, incast, victim, tmp_path / "runs", "pfc-only", DCQCN_OFF)
    assert full["pfc_sent_in_fabric"] > 0  # the figure sees a pause between switches

    clab = copy_lab(tmp_path / "semi", "pfc-victim")
    for path in (clab.parent / "configs").glob("*/config_db.json"):
        config = json.loads(path.read_text())
        edge_only_pfc(lab)(config)
        path.write_text(json.dumps(config))
    semi_lab = simulated(str(clab))
    semi = measure(semi_lab, ic.incast_of(semi_lab), victim, tmp_path / "runs", "semi",
                   DCQCN_OFF)
    assert semi["pfc_sent"] > 0 and semi["pfc_sent_in_fabric"] == 0
