"""Where an incast congests (checks.incast.converge): the switch where the senders' paths
meet, not always the receiver's. A leaf with one uplink and no sender of its own passes the
incast on at the speed it arrives, so the spine above it queues and pauses."""
from __future__ import annotations

import json
from pathlib import Path

from rocelab.checks import incast as ic
from rocelab.labs import generate
from rocelab.labs.generate_spec import Spec
from rocelab.labs.runtimes.sim import simulated


def one_host_per_leaf(tmp_path: Path) -> Path:
    """Three leaves, one host and one uplink each, one spine."""
    return generate.write(Spec("u1host", hosts_per_leaf=1, leaves=3), tmp_path / "u1").path


def clab_of(folder: Path) -> str:
    return str(next(folder.glob("*.clab.yml")))


def test_a_leaf_with_one_uplink_passes_the_incast_to_the_spine(tmp_path):
    lab = simulated(clab_of(one_host_per_leaf(tmp_path)))
    incast = ic.incast_of(lab)
    topo = lab.topology
    assert (incast.receiver, incast.senders) == ("h1", ("h2", "h3"))
    assert incast.switch == "spine1"
    toward = topo.peer("spine1", topo.iface("spine1", incast.port))
    assert toward is not None and toward.node == "leaf1"
    assert sorted(peer for _, peer, _ in incast.upstream) == ["leaf2", "leaf3"]
    assert incast.inputs == 2


def test_a_faster_single_uplink_still_congests_the_receivers_leaf(tmp_path):
    """One wire in at 400G (two senders at 100G behind it) and one out at 100G queue at the
    leaf itself."""
    folder = one_host_per_leaf(tmp_path)
    topo = simulated(clab_of(folder)).topology
    uplink = next(mine.iface for k in topo.links for mine, peer in ((k.a, k.b), (k.b, k.a))
                  if mine.node == "leaf1" and peer.node == "spine1")
    leaf_port = topo.port("leaf1", uplink)
    spine = topo.peer("leaf1", uplink)
    for node, port in (("leaf1", leaf_port), (spine.node, topo.port(spine.node, spine.iface))):
        path = folder / "configs" / node / "config_db.json"
        config = json.loads(path.read_text())
        config["PORT"][port]["speed"] = "400000"
        path.write_text(json.dumps(config))
    incast = ic.incast_of(simulated(clab_of(folder)))
    assert incast.switch == "leaf1" and incast.input_ports == (leaf_port,)


def test_the_default_labs_incast_congests_the_receivers_leaf():
    lab = simulated("roce-v2-leafspine")
    incast = ic.incast_of(lab)
    link = next(k for k in lab.topology.links if incast.receiver in (k.a.node, k.b.node))
    leaf = link.b if link.a.node == incast.receiver else link.a
    assert (incast.switch, incast.port) == (leaf.node, lab.topology.port(leaf.node, leaf.iface))
