"""The classification check's by-role rule (checks/port_roles.py): a lossless class no
host's NIC marks is held to losslessness only on the port roles where some switch keeps it
lossless, so a per-port-role design passes and a switch that breaks the class where its
peers keep it still fails."""
from __future__ import annotations

import json

from rocelab.checks.port_roles import by_design, lossless_roles
from rocelab.labs.runtimes.sim import simulated

SIX = "6"  # a DSCP the shipped lab's hosts do not mark; mapped to lossless TC 4 below


def host_facing_only(clab, *, except_leaf: str | None = None):
    """DSCP 6 -> TC 4, lossless (pfc_enable 3,4, a lossless PG 4) on every leaf's
    host-facing ports; uplinks keep it lossy. ``except_leaf`` leaves its hosts' ports lossy."""
    for path in (clab.parent / "configs").glob("leaf*/config_db.json"):
        config = json.loads(path.read_text())
        config["DSCP_TO_TC_MAP"]["HOSTS"] = {**config["DSCP_TO_TC_MAP"]["AZURE"], SIX: "4"}
        config["TC_TO_PRIORITY_GROUP_MAP"]["AZURE"]["4"] = "4"
        if path.parent.name != except_leaf:
            for port in ("Ethernet8", "Ethernet12"):
                config["PORT_QOS_MAP"][port].update(dscp_to_tc_map="HOSTS", pfc_enable="3,4")
                profile = config["BUFFER_PG"][f"{port}|3"]["profile"]
                config["BUFFER_PG"][f"{port}|4"] = {"profile": profile}
        path.write_text(json.dumps(config))
    return simulated(str(clab))


def test_a_class_lossless_on_host_facing_ports_only_is_held_there_only(lab_copy):
    lab = host_facing_only(lab_copy())
    assert lossless_roles(lab, int(SIX)) == {"T0 toward hosts"}
    held = by_design(lab, int(SIX))
    assert held("leaf1", lab.topology.iface("leaf1", "Ethernet8"))
    assert not held("leaf1", lab.topology.iface("leaf1", "Ethernet0"))


def test_a_leaf_that_breaks_the_class_where_its_peers_keep_it_is_still_held(lab_copy):
    lab = host_facing_only(lab_copy(), except_leaf="leaf2")
    held = by_design(lab, int(SIX))
    assert held("leaf2", lab.topology.iface("leaf2", "Ethernet8"))  # leaf1's role keeps it
