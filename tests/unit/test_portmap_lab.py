"""Every user of a switch's port map, on roce-v2-leafspine with leaf1 renamed the way
400G-class SKUs name their ports (Ethernet0, Ethernet8, ... with 8 lanes each), its lanes in
no order the names follow, and a lanemap.ini bound where SONiC-VS reads it: the loader, the
agent's command line, the simulator, lint and the checks (fabric.portmap holds the rule)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rocelab.checks import lint
from rocelab.fabric.agent import main as agent_main
from rocelab.fabric.agent import port_map
from rocelab.fabric.config_load import load as load_config
from rocelab.fabric.portmap import LANEMAP_TARGET, PortMapError
from rocelab.fabric.qos import pg_of_tc, tc_of_dscp
from rocelab.labs import state as states
from rocelab.labs import topology
from rocelab.labs.runtimes.netns import agent_argv
from rocelab.labs.runtimes.sim import simulated
from rocelab.labs.state import LabState
from rocelab.labs.topology import TopologyError
from rocelab.traffic.probe import probe
from tests.conftest import ROOT, copy_lab

RENAMED = {"Ethernet0": "Ethernet0", "Ethernet4": "Ethernet8", "Ethernet8": "Ethernet16",
           "Ethernet12": "Ethernet24"}  # leaf1's ports as shipped -> as a 400G SKU names them
FIRST_LANE = {"Ethernet0": 17, "Ethernet8": 1, "Ethernet16": 25, "Ethernet24": 9}
WIRES = {"eth1": "Ethernet0", "eth2": "Ethernet8", "eth3": "Ethernet16", "eth4": "Ethernet24"}


def lanes(port: str) -> list[int]:
    return list(range(FIRST_LANE[port], FIRST_LANE[port] + 8))


def renamed_lab(dest: Path, *, lanemap: str | None = "",
                alias=lambda iface, port: f"etp{port[8:]}") -> Path:
    """roce-v2-leafspine with leaf1's ports renamed in every table that names them, 8 lanes
    each, aliased by ``alias(wire, port)``; ``lanemap`` (None: none bound; "": the one that
    puts each port on its old wire) bound at SONiC-VS's path."""
    def bind(doc):
        if lanemap is not None:
            doc["topology"]["nodes"]["leaf1"]["binds"].append(
                f"configs/leaf1/lanemap.ini:{LANEMAP_TARGET}:ro")

    path = copy_lab(dest, edit=bind)
    config = path.parent / "configs" / "leaf1" / "config_db.json"
    text = re.sub(r"\bEthernet(?:0|4|8|12)\b", lambda m: RENAMED[m.group(0)], config.read_text())
    db = json.loads(text)
    wire_of = {port: iface for iface, port in WIRES.items()}
    for name, entry in db["PORT"].items():
        entry.update(lanes=",".join(map(str, lanes(name))), alias=alias(wire_of[name], name))
    config.write_text(json.dumps(db, indent=4))
    if lanemap is not None:
        (config.parent / "lanemap.ini").write_text(lanemap or "".join(
            f"{iface}:{','.join(map(str, lanes(port)))}\n" for iface, port in WIRES.items()))
    return path


def test_a_bound_lanemap_maps_400g_names_on_load_and_on_the_agents_command_line(
        tmp_path, monkeypatch):
    monkeypatch.setenv(states.STATE_ENV, str(tmp_path / "state"))
    path = renamed_lab(tmp_path)
    config = path.parent / "configs" / "leaf1" / "config_db.json"
    db = json.loads(config.read_text())
    db["CABLE_LENGTH"]["AZURE"]["Ethernet16"] = "5m"  # h1's cable, on eth3
    config.write_text(json.dumps(db))
    topo = topology.load(path)
    leaf1 = topo.nodes["leaf1"]
    assert leaf1.lanemap_path == tmp_path / topo.name / "configs" / "leaf1" / "lanemap.ini"
    assert leaf1.ports.ports == WIRES
    assert topo.port("leaf1", "eth3") == "Ethernet16" and topo.iface("leaf1", "Ethernet8") == "eth2"
    assert topo.cable_m("h1", "eth1") == 5 and topo.cable_m("leaf1", "eth4") == 40
    assert str(topo.nodes["leaf2"].ports) == ("eth1=Ethernet0,eth2=Ethernet4,eth3=Ethernet8,"
                                              "eth4=Ethernet12")  # the default layout
    argv = agent_argv(leaf1, LabState.new(topo.name, str(topo.path)), tmp_path / "x.sock")
    assert argv[argv.index("--ports") + 1] == str(leaf1.ports)


def test_the_agent_maps_bare_wires_with_its_lanemap_and_refuses_a_port_not_in_port(
        tmp_path, capsys):
    path = renamed_lab(tmp_path)
    folder = path.parent / "configs" / "leaf1"
    config = load_config(folder / "config_db.json")
    assert port_map(config, "eth3,eth1=Ethernet0", folder / "lanemap.ini").ports == {
        "eth1": "Ethernet0", "eth3": "Ethernet16"}
    with pytest.raises(PortMapError, match="^eth3 is wired but no PORT entry"):
        port_map(config, "eth3", None)  # the default lanes: none of these 8-lane ports
    code = agent_main(["--config", str(folder / "config_db.json"), "--name", "leaf1",
                       "--control", str(tmp_path / "x.sock"), "--ports", "eth1=Ethernet4"])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        f"leaf1: --ports: Ethernet4 is not in PORT of {folder / 'config_db.json'}")


def test_a_missing_mapping_stops_the_load_in_one_line(tmp_path):
    path = renamed_lab(tmp_path, lanemap=None)  # 8-lane ports, aliases etp*: nothing maps
    with pytest.raises(TopologyError) as err:
        topology.load(path)
    config = path.parent / "configs" / "leaf1" / "config_db.json"
    assert str(err.value) == (
        f"{path}: topology.nodes.leaf1: leaf1:eth1 is wired but no PORT entry of {config} has "
        "its lanes 25,26,27,28 (from the default hwsku's lanemap) or alias eth1")


def test_a_bad_bound_lanemap_stops_the_load_naming_its_line(tmp_path):
    path = renamed_lab(tmp_path, lanemap="eth1:1,2,3\n")
    with pytest.raises(TopologyError, match=r"topology.nodes.leaf1.binds: .*lanemap.ini: line 1: "
                                            r"eth1: expected 1, 2, 4 or 8 lane numbers"):
        topology.load(path)


def test_an_alias_alone_maps_a_wire(tmp_path):
    """No lanemap, lanes the default layout has on no wire: each PORT entry's alias."""
    topo = topology.load(renamed_lab(tmp_path, lanemap=None, alias=lambda iface, _: iface))
    assert topo.nodes["leaf1"].ports.ports == WIRES


def test_the_renamed_lab_forwards_in_the_simulator_on_the_mapped_ports(tmp_path):
    lab = simulated(str(renamed_lab(tmp_path)))
    before = lab.agent("leaf1").counters()["ports"]
    assert {port: entry["iface"] for port, entry in before.items()} == {
        port: iface for iface, port in WIRES.items()}
    assert all(p.ok for p in lab.ping_all())  # routed over leaf1's uplinks (Ethernet0, 8)
    dscp = lab.topology.nodes["h1"].nic.roce.dscp
    result = probe(lab, "h1", "h3", "v2", count=3, dscp=dscp)
    assert result.hosts_reached() >= {"h3"}
    assert ("leaf1", "eth3") in result.seen_on() and ("leaf1", "eth1") in result.seen_on() \
        or ("leaf1", "eth2") in result.seen_on()
    after = lab.agent("leaf1").counters()["ports"]
    config = lab.topology.nodes["leaf1"].config
    pg = pg_of_tc(config, "Ethernet16", tc_of_dscp(config, "Ethernet16", dscp)[0])[0]
    came = after["Ethernet16"]["pgs"][str(pg)]["rx_packets"] \
        - before["Ethernet16"]["pgs"][str(pg)]["rx_packets"]
    assert came == 3  # h1's RoCE came in on eth3, in the PG of the port the lanes put there


def test_lint_finds_no_false_error_on_the_renamed_lab_and_names_an_unmapped_wire(tmp_path):
    shipped = lint.lint(lint.load_lab(ROOT / "topologies" / "roce-v2-leafspine"))
    renamed = lint.lint(lint.load_lab(renamed_lab(tmp_path / "a")))
    assert lint.counts(renamed) == lint.counts(shipped)
    assert not [f for f in renamed if f.rule in ("wiring", "host-dscp")]

    broken = renamed_lab(tmp_path / "b", lanemap=None)
    found = [f for f in lint.lint(lint.load_lab(broken)) if f.rule == "wiring"]
    config = broken.parent / "configs" / "leaf1" / "config_db.json"
    assert [(f.severity, f.file, f.where) for f in found] == [
        ("error", str(config), f"PORT|eth{n}|lanes") for n in range(1, 5)]
    assert found[0].why.startswith(f"leaf1:eth1 is wired but no PORT entry of {config} has its "
                                   "lanes 25,26,27,28")


def test_lint_names_a_port_two_wires_map_to(tmp_path):
    twice = "".join(f"{iface}:{','.join(map(str, lanes('Ethernet0')))}\n" for iface in WIRES)
    found = [f for f in lint.lint(lint.load_lab(renamed_lab(tmp_path, lanemap=twice)))
             if f.rule == "wiring"]
    assert [(f.severity, f.where) for f in found] == [("error", "PORT|Ethernet0|lanes")]
    assert "leaf1:eth1 and leaf1:eth2 and leaf1:eth3 and leaf1:eth4 are wired to one PORT " \
           "entry" in found[0].why


def test_the_checks_see_the_renamed_ports(tmp_path):
    """The classification check, in virtual time, on the lab whose leaf1 has 400G names:
    it passes, and what it expected of leaf1 names the ports the lanes put on each wire."""
    path, results = renamed_lab(tmp_path), tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "rocelab.cli", "check", str(path), "--runtime", "sim",
         "-k", "dscp_lands", "--results", str(results)],
        capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"checks: [1-9]\d* passed, 0 failed", done.stdout), done.stdout
    hops = [hop for f in results.rglob("*-expected.json")
            for hop in json.loads(f.read_text())["per_hop"] if hop["switch"] == "leaf1"]
    assert {hop["in_port"] for hop in hops} == {"Ethernet0", "Ethernet8", "Ethernet16"}
    assert all(WIRES[hop["ingress"]] == hop["in_port"] and WIRES[hop["egress"]] == hop["out_port"]
               for hop in hops)
