"""fabric.portmap: which PORT entry each wire of a switch is, as SONiC-VS decides it (a bound
lanemap.ini's lanes, else the default hwsku's; then the alias; then the default layout).
tests/unit/test_portmap_lab.py follows the map through a lab whose ports have 400G names."""
from __future__ import annotations

import pytest

from rocelab.fabric.config import ConfigError
from rocelab.fabric.config_load import parse
from rocelab.fabric.portmap import (DEFAULT_LANES, PortMap, PortMapError, default_lanes,
                                  default_port, parse_lanemap, wiring)


# ------------------------------------------------------------------------ the rule itself


def test_the_default_layout_is_the_default_hwsku_port_config_in_wire_order():
    """sonic-device-data writes the VS lanemap.ini from port_config.ini, line N -> ethN: the
    Force10-S6000's first ports are Ethernet0 25-28, Ethernet4 29-32, ... Ethernet16 45-48."""
    assert default_lanes("eth1") == (25, 26, 27, 28)
    assert default_lanes("eth5") == (45, 46, 47, 48) and default_lanes("eth6") == (41, 42, 43, 44)
    assert default_lanes("eth33") is None
    assert len({lane for wire in DEFAULT_LANES for lane in wire}) == 128
    assert [default_port(f"eth{n}") for n in (1, 2, 33)] == ["Ethernet0", "Ethernet4",
                                                            "Ethernet128"]
    with pytest.raises(PortMapError, match="not a switch data port"):
        default_port("eth0")


def test_a_lanemap_reads_as_vslib_reads_it():
    text = "; comment\n# comment\neth1:1,2,3,4\n0:eth2:5,6,7,8\n1:eth3:9,10,11,12\n\neth4:13\n"
    assert parse_lanemap(text, "lanemap.ini") == {
        "eth1": (1, 2, 3, 4), "eth2": (5, 6, 7, 8), "eth4": (13,)}  # switch 1's line: not ours


@pytest.mark.parametrize("line, problem", [
    ("eth1", "expected ethX:lane,lane,..."),
    ("eth1:1,2,3", "expected 1, 2, 4 or 8 lane numbers"),
    ("eth1:1,x", "expected 1, 2, 4 or 8 lane numbers"),
    ("eth-1:1", "is not an interface name"),
    ("x:eth1:1", "is not a switch index"),
])
def test_a_bad_lanemap_line_is_one_line_naming_the_file_and_line(line, problem):
    with pytest.raises(PortMapError) as err:
        parse_lanemap(f"eth9:1\n{line}\n", "lm.ini")
    assert str(err.value).startswith("lm.ini: line 2: ") and problem in str(err.value)
    assert "\n" not in str(err.value)


def config_with(ports: dict[str, dict]) -> object:
    return parse({"DEVICE_METADATA": {"localhost": {"hostname": "sw", "mac": "02:00:00:00:00:01"}},
                  "PORT": {name: {"speed": "100000", **f} for name, f in ports.items()}},
                 "sw/config_db.json")


def test_lanes_first_then_alias_then_the_default_layout_by_name():
    config = config_with({"Ethernet0": {"lanes": "1,2,3,4,5,6,7,8", "alias": "eth2"},
                          "Ethernet8": {"lanes": "25,26,27,28", "alias": "etp2"}})
    assert wiring(config, ["eth1", "eth2", "eth3"], None) == {
        "eth1": "Ethernet8",  # the default lanemap gives eth1 lanes 25-28
        "eth2": "Ethernet0",  # no port has eth2's default lanes 29-32: its alias
        "eth3": None}
    lanemap = {"eth1": (1, 2, 3, 4, 5, 6, 7, 8)}
    assert wiring(config, ["eth1", "eth2"], lanemap) == {"eth1": "Ethernet0", "eth2": "Ethernet0"}
    plain = config_with({"Ethernet0": {}, "Ethernet4": {}})  # no lanes anywhere: by name
    assert wiring(plain, ["eth1", "eth2", "eth3"], None) == {
        "eth1": "Ethernet0", "eth2": "Ethernet4", "eth3": None}


def test_building_the_map_refuses_an_unmapped_or_shared_port_in_one_line():
    config = config_with({"Ethernet0": {"lanes": "1,2,3,4,5,6,7,8", "alias": "eth2"}})
    with pytest.raises(PortMapError) as err:
        PortMap.build(config, ["eth1"], None, node="leaf9")
    assert str(err.value) == ("leaf9:eth1 is wired but no PORT entry of sw/config_db.json has "
                              "its lanes 25,26,27,28 (from the default hwsku's lanemap) or "
                              "alias eth1")
    lanemap = {"eth1": tuple(range(1, 9)), "eth2": (9,)}
    with pytest.raises(PortMapError, match=r"^leaf9:eth1 and eth2 are wired to one PORT entry "
                                           r"of sw/config_db.json, Ethernet0$"):
        PortMap.build(config, ["eth1", "eth2"], lanemap, "lm.ini", node="leaf9")
    with pytest.raises(PortMapError, match=r"lanes \(lm.ini gives eth3 none\) or alias eth3"):
        PortMap.build(config, ["eth3"], lanemap, "lm.ini")


def test_the_map_round_trips_through_the_agents_command_line():
    ports = PortMap({"eth1": "Ethernet0", "eth2": "Ethernet8", "eth3": "Ethernet16",
                     "eth4": "Ethernet24"})
    assert str(ports) == "eth1=Ethernet0,eth2=Ethernet8,eth3=Ethernet16,eth4=Ethernet24"
    assert PortMap.parse(str(ports)) == ports
    assert ports.port("eth3") == "Ethernet16" and ports.iface("Ethernet24") == "eth4"
    with pytest.raises(PortMapError, match="not iface=PORT"):
        PortMap.parse("eth1=")
    with pytest.raises(PortMapError, match="Ethernet4 is on none of this switch's wires"):
        ports.iface("Ethernet4")


def test_port_lanes_must_be_lane_numbers():
    with pytest.raises(ConfigError, match=r"^sw/config_db.json: PORT\|Ethernet0: lanes: "):
        config_with({"Ethernet0": {"lanes": "25,x"}})
    assert config_with({"Ethernet0": {"lanes": "25, 26"}}).ports["Ethernet0"].lanes == (25, 26)
