"""labs.topology: the clab file is loaded, checked and refused with one-line errors."""
from __future__ import annotations

import json

import pytest

from rocelab.labs import topology
from rocelab.labs.topology import Endpoint, TopologyError
from tests.conftest import TOPOLOGIES


def test_default_lab_loads_with_its_switch_configs():
    topo = topology.load("roce-v2-leafspine")
    assert topo.name == "roce-v2-leafspine"
    assert sorted(n.name for n in topo.switches) == ["leaf1", "leaf2", "spine1", "spine2"]
    assert sorted(n.name for n in topo.hosts) == ["h1", "h2", "h3", "h4"]
    assert len(topo.links) == 8
    assert topo.interfaces("leaf1") == ["eth1", "eth2", "eth3", "eth4"]
    assert topo.peer("leaf1", "eth3") == Endpoint("h1", "eth1")
    leaf1 = topo.nodes["leaf1"]
    assert leaf1.config_path == TOPOLOGIES / "roce-v2-leafspine/configs/leaf1/config_db.json"
    assert leaf1.config.hostname == "leaf1"
    assert all(link.mtu == 9100 for link in topo.links)  # as the switches' PORT mtu
    assert topo.nodes["h1"].exec[0] == "ip addr add 10.1.1.11/24 dev eth1"


def test_resolves_name_folder_and_file():
    folder = TOPOLOGIES / "roce-v2-leafspine"
    file = folder / "roce-v2-leafspine.clab.yml"
    assert topology.resolve("roce-v2-leafspine") == file
    assert topology.resolve(folder) == file
    assert topology.resolve(file) == file
    with pytest.raises(TopologyError, match="no such lab"):
        topology.resolve("no-such-lab")


def test_merges_kinds_groups_and_defaults(lab_copy):
    def edit(doc):
        doc["topology"]["defaults"] = {"labels": {"tier": "default", "team": "x"}}
        doc["topology"]["groups"] = {"rack1": {"labels": {"tier": "rack"}}}
        doc["topology"]["nodes"]["h1"]["group"] = "rack1"
        doc["topology"]["nodes"]["h1"]["labels"] = {"team": "h1"}

    topo = topology.load(lab_copy(edit=edit))
    nic = {"rocelab.nic": "nic/default.yml"}  # from kinds.linux
    assert topo.nodes["h1"].labels == {"tier": "rack", "team": "h1", **nic}
    assert topo.nodes["h2"].labels == {"tier": "default", "team": "x", **nic}
    assert topo.nodes["h1"].image == "rocelab-host:latest"  # from kinds.linux


def test_expands_environment_like_containerlab(lab_copy, monkeypatch):
    path = lab_copy()
    text = path.read_text().replace("10.1.1.11/24", "${H1_ADDR:=10.1.1.99/24}")
    path.write_text(text)
    assert topology.load(path).nodes["h1"].exec[0] == "ip addr add 10.1.1.99/24 dev eth1"
    monkeypatch.setenv("H1_ADDR", "10.1.1.50/24")
    assert topology.load(path).nodes["h1"].exec[0] == "ip addr add 10.1.1.50/24 dev eth1"


def nodes(doc):
    return doc["topology"]["nodes"]


def links(doc):
    return doc["topology"]["links"]


def break_config(path, table, key, field, value):
    data = json.loads(path.read_text())
    data[table][key][field] = value
    path.write_text(json.dumps(data))


BAD_TOPOLOGIES = {
    "link to unknown node": (
        lambda d: links(d).append({"endpoints": ["h1:eth2", "leaf9:eth1"]}),
        "topology.links[8].endpoints[1]: unknown node 'leaf9'"),
    "interface used twice": (
        lambda d: links(d).append({"endpoints": ["h1:eth1", "leaf1:eth5"]}),
        "topology.links[8].endpoints[0]: h1:eth1 is already used by topology.links[4]"),
    "endpoint without colon": (
        lambda d: links(d).append({"endpoints": ["h1eth2", "leaf1:eth5"]}),
        "topology.links[8].endpoints[0]: 'h1eth2' is not of the form node:interface"),
    "three endpoints": (
        lambda d: links(d).append({"endpoints": ["h1:eth2", "h2:eth2", "h3:eth2"]}),
        "topology.links[8].endpoints: a link has exactly two endpoints"),
    "management interface": (
        lambda d: links(d).append({"endpoints": ["h1:eth0", "h2:eth2"]}),
        "topology.links[8].endpoints[0]: eth0 is the management interface"),
    "switch port not ethN": (
        lambda d: links(d).append({"endpoints": ["h1:eth2", "leaf1:Ethernet16"]}),
        "topology.links[8].endpoints[1]: 'Ethernet16': switch ports are named eth1"),
    "bad mtu": (
        lambda d: links(d)[0].update(mtu=20),
        "topology.links[0].mtu: 20 is not an MTU"),
    "unknown top-level key": (
        lambda d: d.update(rocelab={"scale": 1}),
        "(top level).rocelab: unknown key"),
    "unknown node key": (
        lambda d: nodes(d)["h1"].update(speed="100G"),
        "topology.nodes.h1.speed: unknown key"),
    "unsupported kind": (
        lambda d: nodes(d)["h1"].update(kind="srl"),
        "topology.nodes.h1.kind: unsupported kind 'srl'"),
    "bad lab name": (
        lambda d: d.update(name="bad name!"),
        "name: 'bad name!' is not a valid lab name"),
    "bad node name": (
        lambda d: nodes(d).update({"h/5": {"kind": "linux"}}),
        "topology.nodes.h/5: invalid node name"),
    "missing bind source": (
        lambda d: nodes(d)["leaf1"].update(binds=["configs/nope.json:/etc/sonic/config_db.json"]),
        "topology.nodes.leaf1.binds[0]: configs/nope.json: no such file"),
    "switch without config": (
        lambda d: nodes(d)["leaf1"].pop("binds"),
        "topology.nodes.leaf1: a sonic-vs switch needs its config_db.json"),
    "wired port missing from PORT": (
        lambda d: links(d).append({"endpoints": ["h1:eth2", "leaf1:eth5"]}),
        "topology.nodes.leaf1: leaf1:eth5 is wired but no PORT entry of "),
    "exec not a list": (
        lambda d: nodes(d)["h1"].update(exec="ip link"),
        "topology.nodes.h1.exec: expected a list of strings"),
}


@pytest.mark.parametrize("case", sorted(BAD_TOPOLOGIES))
def test_bad_topology_gives_one_line_naming_file_and_key(case, lab_copy):
    edit, expected = BAD_TOPOLOGIES[case]
    path = lab_copy(edit=edit)
    with pytest.raises(TopologyError) as err:
        topology.load(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert expected in message


def test_malformed_switch_config_names_config_file_table_key_and_field(lab_copy):
    path = lab_copy()
    config = path.parent / "configs/leaf2/config_db.json"
    break_config(config, "PORT", "Ethernet4", "speed", "fast")
    with pytest.raises(TopologyError) as err:
        topology.load(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{config}: PORT|Ethernet4: speed: ")


def test_invalid_yaml_names_the_line(lab_copy):
    path = lab_copy()
    path.write_text("name: x\ntopology: [\n")
    with pytest.raises(TopologyError, match=r": line \d+: invalid YAML"):
        topology.load(path)


def test_time_scale_label_lab_wide_or_per_node_with_a_default(lab_copy):
    leaf1 = topology.load("roce-v2-leafspine").nodes["leaf1"]
    assert leaf1.time_scale == topology.DEFAULT_TIME_SCALE and leaf1.time_scale_auto

    def edit(doc):
        doc["topology"]["defaults"] = {"labels": {"rocelab.time-scale": "500"}}
        doc["topology"]["nodes"]["spine1"]["labels"] = {"rocelab.time-scale": 1e4}

    topo = topology.load(lab_copy(edit=edit))
    assert topo.nodes["leaf1"].time_scale == 500.0
    assert topo.nodes["spine1"].time_scale == 10000.0
    assert not any(n.time_scale_auto for n in topo.nodes.values())


def test_auto_time_scale_starts_from_one_floor_for_the_lab(lab_copy):
    """``auto`` (or no label): chosen at lab.up; until then every such node shares the
    largest floor, which a port too fast for the default raises; declared nodes keep theirs."""
    def edit(doc):
        doc["topology"]["defaults"] = {"labels": {"rocelab.time-scale": "auto"}}
        doc["topology"]["nodes"]["h1"]["labels"] = {"rocelab.time-scale": "9000"}

    topo = topology.load(lab_copy(edit=edit))
    assert {n.name for n in topo.nodes.values() if not n.time_scale_auto} == {"h1"}
    assert topo.nodes["h1"].time_scale == 9000.0
    assert {n.time_scale for n in topo.nodes.values() if n.time_scale_auto} == {3000.0}
    moved = topo.with_time_scale(4500.0)
    assert moved.nodes["leaf1"].time_scale == moved.nodes["h2"].time_scale == 4500.0
    assert moved.nodes["h1"].time_scale == 9000.0
    assert topology.auto_floor(100_000) == topology.DEFAULT_TIME_SCALE


@pytest.mark.parametrize("value", ["0", "-3", "fast", "inf"])
def test_bad_time_scale_names_the_label(value, lab_copy):
    def edit(doc):
        doc["topology"]["nodes"]["leaf1"]["labels"] = {"rocelab.time-scale": value}

    with pytest.raises(TopologyError, match=r"nodes\.leaf1\.labels\.rocelab\.time-scale"):
        topology.load(lab_copy(edit=edit))


def test_an_s_whose_pause_the_agent_cannot_refresh_is_refused(lab_copy):
    """0xFFFF quanta at 100G last 335.5 us x S: under 2 ms of wall time (S < ~6) the agent
    could not refresh them in time, so the lab does not come up."""
    def scale(value):
        def edit(doc):
            doc["topology"]["defaults"] = {"labels": {"rocelab.time-scale": value}}
        return edit

    assert topology.load(lab_copy(edit=scale("6"))).nodes["leaf1"].time_scale == 6.0
    with pytest.raises(TopologyError) as e:
        topology.load(lab_copy(edit=scale("5")))
    message = str(e.value)
    assert "labels.rocelab.time-scale: S = 5 makes a PFC pause on Ethernet" in message
    assert "(100000 Mb/s) shorter than 2 ms of wall time" in message
    assert message.endswith("use S >= 5.96")


def test_ecn_marking_label_defaults_to_dequeue(lab_copy):
    assert {n.ecn_marking for n in topology.load("roce-v2-leafspine").switches} == {"dequeue"}

    def edit(doc):
        doc["topology"]["defaults"] = {"labels": {"rocelab.ecn-marking": "enqueue"}}

    assert {n.ecn_marking for n in topology.load(lab_copy(edit=edit)).switches} == {"enqueue"}


def test_bad_ecn_marking_names_the_label(lab_copy):
    def edit(doc):
        doc["topology"]["nodes"]["leaf1"]["labels"] = {"rocelab.ecn-marking": "ingress"}

    with pytest.raises(TopologyError, match=r"nodes\.leaf1\.labels\.rocelab\.ecn-marking: "
                                            r"'ingress' is not one of dequeue, enqueue"):
        topology.load(lab_copy(edit=edit))
