"""The topology format against containerlab's own schema (v0.79.0, vendored in
tests/data/schemas): the keys labs/topology.py accepts are the schema's, and every shipped
topology is valid for containerlab as it is."""
from __future__ import annotations

import pytest
import yaml

from rocelab.labs import topology
from tests.conftest import TOPOLOGIES
from tests.schemas import clab_file_problems, clab_problems, clab_schema

SHIPPED = sorted(TOPOLOGIES.glob("*/*.clab.yml"))


def test_accepted_keys_are_the_schemas():
    schema = clab_schema()
    assert topology.NODE_KEYS == set(schema["definitions"]["node-config"]["properties"])
    assert topology.TOP_KEYS == set(schema["properties"])
    assert topology.TOPOLOGY_KEYS == set(schema["properties"]["topology"]["properties"])


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_topologies_are_valid_for_containerlab(path):
    assert clab_file_problems(path) == []
    doc = yaml.safe_load(path.read_text())
    for name, spec in doc["topology"]["nodes"].items():
        if spec.get("kind") == "sonic-vs":  # where docker-sonic-vs's start.sh copies it from
            assert any(b.split(":")[1] == "/var/sonic/config_db.json" for b in spec["binds"])
            assert not any(b.split(":")[1] == "/etc/sonic/config_db.json" for b in spec["binds"])


@pytest.mark.parametrize("key, value", [
    ("hostname", "leaf-one"), ("privileged", True), ("tmpfs", {"/run": "rw,size=64m"}),
    ("security-opts", ["apparmor=unconfined"]), ("publish", ["tcp/80"]),
    ("wait-for", ["h2"]), ("SANs", ["h1.lab"]), ("extra-hosts", ["h2:10.1.1.12"])])
def test_loader_and_schema_agree_on_node_keys(lab_copy, key, value):
    """Keys containerlab v0.79.0 accepts load; keys it refuses (some accepted here before:
    publish, wait-for, SANs, extra-hosts) are refused with the key named."""
    path = lab_copy(edit=lambda doc: doc["topology"]["nodes"]["h1"].update({key: value}))
    valid = clab_file_problems(path) == []
    if valid:
        assert topology.load(path).nodes["h1"].name == "h1"
    else:
        with pytest.raises(topology.TopologyError, match=f"topology.nodes.h1.{key}: unknown key"):
            topology.load(path)
    assert valid == (key in ("hostname", "privileged", "tmpfs", "security-opts"))


def test_the_schema_check_can_fail():
    doc = yaml.safe_load(SHIPPED[0].read_text())
    doc["topology"]["nodes"]["h1"]["kind"] = "linuxx"
    doc["topology"]["links"][0]["mtu"] = "jumbo"
    problems = clab_problems(doc)
    assert any(p.startswith("topology.nodes.h1.kind: 'linuxx' is not one of") for p in problems)
    assert "topology.links.0.mtu: 'jumbo' is not of type 'number'" in problems


@pytest.mark.parametrize("target", ["/var/sonic/config_db.json:ro", "/etc/sonic/config_db.json"])
def test_a_switch_config_is_found_at_either_bind_target(lab_copy, target):
    """The shipped files bind where docker-sonic-vs's start.sh reads (/var/sonic); files that
    bind /etc/sonic, as rocelab's used to, still name the config for the netns runtime."""
    def edit(doc):
        doc["topology"]["nodes"]["leaf1"]["binds"] = [f"configs/leaf1/config_db.json:{target}"]
    path = lab_copy(edit=edit)
    leaf1 = topology.load(path).nodes["leaf1"]
    assert leaf1.config_path == (path.parent / "configs/leaf1/config_db.json").resolve()
    assert leaf1.config is not None and "Ethernet0" in leaf1.config.ports
