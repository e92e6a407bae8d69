"""fabric.config_load: the real topology configs load as expected, and every kind of mistake is
reported as one line naming the file, the TABLE|key and the field."""
from __future__ import annotations

import copy
import json
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from pathlib import Path
from typing import Any

import pytest

from rocelab.fabric.config import (BufferPool, BufferProfile, ConfigError, PfcWatchdog, Port,
                                   QueueConfig, Scheduler, StaticRoute, SwitchConfig,
                                   WredColor)
from rocelab.fabric.config_load import load, parse

INTERNAL_PORTS = (" (or a chassis line card's internal Ethernet-Rec<N>, Ethernet-IB<N>, "
                  "Ethernet-BP<N>)")

CONFIGS = Path(__file__).resolve().parents[2] / "topologies" / "roce-v2-leafspine" / "configs"
SWITCHES = ["leaf1", "leaf2", "spine1", "spine2"]
Config = dict[str, Any]


def real(switch: str) -> Config:
    return json.loads((CONFIGS / switch / "config_db.json").read_text())


@pytest.fixture(scope="module")
def leaf1() -> SwitchConfig:
    return load(CONFIGS / "leaf1" / "config_db.json")


# ---------------------------------------------------------------- the real configs


@pytest.mark.parametrize("switch", SWITCHES)
def test_real_configs_load(switch: str) -> None:
    path = CONFIGS / switch / "config_db.json"
    config = load(path)
    assert config.path == str(path)
    assert config.hostname == switch
    assert config.buffer_model == "traditional"
    assert config.qos.pfc_wd_poll_interval_ms == 200
    for port in config.ports.values():
        assert (port.speed_mbps, port.mtu, port.admin_up) == (100000, 9100, True)
        assert port.alias == f"eth{int(port.name[8:]) // 4 + 1}"
    # every port in the config has lossless PG 3, PFC on priority 3 and a 40 m cable
    for name in config.ports:
        assert config.qos.port_qos[name].pfc_enable == {3}
        assert config.qos.buffer_pg[(name, 3)] == "pg_lossless_100000_40m_profile"
        assert config.qos.cable_length_m[name] == 40


def test_leaf1_device_and_ports(leaf1: SwitchConfig) -> None:
    assert (leaf1.mac, leaf1.type, leaf1.hwsku) == ("02:52:4c:00:01:01", "LeafRouter", "Force10-S6000")
    assert list(leaf1.ports) == ["Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"]
    assert leaf1.ports["Ethernet0"] == Port("Ethernet0", 100000, 9100, True, "eth1",
                                            (25, 26, 27, 28))


def test_leaf1_l2_l3(leaf1: SwitchConfig) -> None:
    vlan = leaf1.vlans["Vlan100"]
    assert vlan.vid == 100
    assert vlan.members == {"Ethernet8": "untagged", "Ethernet12": "untagged"}
    assert vlan.addresses == (IPv4Interface("10.1.1.1/24"),)
    assert leaf1.interfaces == {
        "Ethernet0": (IPv4Interface("10.0.0.1/31"),),
        "Ethernet4": (IPv4Interface("10.0.0.3/31"),),
    }
    assert leaf1.loopbacks == {}
    assert leaf1.static_routes == (
        StaticRoute(IPv4Network("10.1.2.0/24"), (IPv4Address("10.0.0.0"), IPv4Address("10.0.0.2"))),
    )


def test_leaf1_qos_maps(leaf1: SwitchConfig) -> None:
    qos = leaf1.qos
    assert len(qos.dscp_to_tc["AZURE"]) == 64
    assert qos.dscp_to_tc["AZURE"][26] == 3
    assert qos.dot1p_to_tc["AZURE"] == {p: p for p in range(8)}
    assert qos.tc_to_pg["AZURE"][3] == 3 and qos.tc_to_pg["AZURE"][4] == 0
    assert qos.tc_to_queue["AZURE"] == qos.pfc_priority_to_queue["AZURE"] == {q: q for q in range(8)}
    port_qos = qos.port_qos["Ethernet0"]
    assert port_qos.dscp_to_tc_map == port_qos.pfc_to_queue_map == "AZURE"
    assert port_qos.pfc_to_pg_map is None
    assert port_qos.pfc_enable == port_qos.pfcwd_sw_enable == frozenset({3})


def test_leaf1_buffers(leaf1: SwitchConfig) -> None:
    qos = leaf1.qos
    assert qos.buffer_pools["ingress_lossless_pool"] == BufferPool(
        "ingress_lossless_pool", "ingress", "dynamic", 12766208, 1720320
    )
    assert qos.buffer_profiles["pg_lossless_100000_40m_profile"] == BufferProfile(
        "pg_lossless_100000_40m_profile", "ingress_lossless_pool", 18432,  # xon alone: the headroom is shared
        dynamic_th=0, xon=18432, xoff=48128, xon_offset=2496,
    )
    assert qos.buffer_profiles["egress_lossless_profile"].static_th == 12766208
    assert qos.buffer_pg[("Ethernet0", 3)] == "pg_lossless_100000_40m_profile"
    assert qos.buffer_pg[("Ethernet0", 0)] == "ingress_lossy_profile"
    assert len(qos.buffer_pg) == 8
    # "Ethernet0|0-2", "|3", "|4-6" expand to queues 0..6
    assert [qos.buffer_queue[("Ethernet0", q)] for q in range(7)] == (
        ["egress_lossy_profile"] * 3 + ["egress_lossless_profile"] + ["egress_lossy_profile"] * 3
    )
    assert ("Ethernet0", 7) not in qos.buffer_queue
    assert qos.cable_length_m == dict.fromkeys(leaf1.ports, 40)


def test_leaf1_scheduling_wred_watchdog(leaf1: SwitchConfig) -> None:
    qos = leaf1.qos
    assert qos.schedulers["scheduler.0"] == Scheduler("scheduler.0", "DWRR", weight=14)
    assert qos.schedulers["scheduler.2"] == Scheduler("scheduler.2", "STRICT")
    assert [qos.queues[("Ethernet8", q)].scheduler for q in range(7)] == (
        ["scheduler.0"] * 3 + ["scheduler.1"] + ["scheduler.0"] * 2 + ["scheduler.2"]
    )
    assert qos.queues[("Ethernet8", 3)] == QueueConfig("scheduler.1", "AZURE_LOSSLESS")
    assert qos.queues[("Ethernet8", 0)].wred_profile is None
    wred = qos.wred_profiles["AZURE_LOSSLESS"]
    assert wred.ecn == "ecn_all"
    assert wred.green == wred.yellow == wred.red == WredColor(True, 150000, 1500000, 100)
    assert qos.pfc_wd["Ethernet0"] == PfcWatchdog("drop", 200, 200)
    assert qos.pfc_wd_poll_interval_ms == 200


def test_spine_has_no_vlans_and_two_routes() -> None:
    spine = load(CONFIGS / "spine1" / "config_db.json")
    assert spine.vlans == {}
    assert [(str(r.prefix), [str(n) for n in r.nexthops]) for r in spine.static_routes] == [
        ("10.1.1.0/24", ["10.0.0.1"]),
        ("10.1.2.0/24", ["10.0.0.5"]),
    ]


# ---------------------------------------------------------------- accepted variants


def test_sonic_variants_are_accepted() -> None:
    """Plain JSON ints, "[TABLE|name]" references, extra L3 forms and ignored tables."""
    cfg = real("leaf1")
    cfg["PORT"]["Ethernet0"].update(speed=40000, mtu=1500, admin_status="down")
    cfg["DEVICE_METADATA"]["localhost"]["mac"] = "02:52:4C:00:01:0A"
    cfg["BUFFER_PG"]["Ethernet4|3"]["profile"] = "[BUFFER_PROFILE|pg_lossless_100000_40m_profile]"
    cfg["QUEUE"]["Ethernet4|6"]["scheduler"] = "[SCHEDULER|scheduler.2]"
    cfg["LOOPBACK_INTERFACE"] = {"Loopback0": {}, "Loopback0|10.255.0.1/32": {}}
    cfg["INTERFACE"] = {"Ethernet0|10.0.0.1/31": {}}  # an address without its bare key
    cfg["VLAN_MEMBER"]["Vlan100|Ethernet4"] = {"tagging_mode": "tagged"}
    cfg["STATIC_ROUTE"]["default|192.168.0.0/16"] = {"blackhole": "true"}
    cfg["STATIC_ROUTE"]["10.9.0.0/16"] = {"nexthop": "10.1.1.7", "ifname": "Vlan100", "distance": "20"}
    cfg["PORT_QOS_MAP"]["global"] = {"pfc_enable": ""}
    cfg["BGP_NEIGHBOR"] = {"10.0.0.0": {"asn": "65100", "name": "spine1"}}
    cfg["DEVICE_METADATA"]["localhost"]["bgp_asn"] = "65101"
    config = parse(cfg, "x/config_db.json")
    assert config.ports["Ethernet0"] == Port("Ethernet0", 40000, 1500, False, "eth1",
                                             (25, 26, 27, 28))
    assert config.mac == "02:52:4c:00:01:0a"
    assert config.qos.buffer_pg[("Ethernet4", 3)] == "pg_lossless_100000_40m_profile"
    assert config.qos.queues[("Ethernet4", 6)].scheduler == "scheduler.2"
    assert config.loopbacks == {"Loopback0": (IPv4Interface("10.255.0.1/32"),)}
    assert config.interfaces == {"Ethernet0": (IPv4Interface("10.0.0.1/31"),)}
    assert config.vlans["Vlan100"].members["Ethernet4"] == "tagged"
    routes = {str(r.prefix): r for r in config.static_routes}
    assert routes["192.168.0.0/16"] == StaticRoute(IPv4Network("192.168.0.0/16"), blackhole=True)
    assert routes["10.9.0.0/16"].ifnames == ("Vlan100",)
    assert routes["10.9.0.0/16"].distance == 20
    assert config.qos.port_qos["global"].pfc_enable == frozenset()


def test_defaults() -> None:
    cfg = real("spine1")
    del cfg["PORT"]["Ethernet0"]["mtu"], cfg["PORT"]["Ethernet0"]["admin_status"]
    cfg["PFC_WD"] = {"Ethernet0": {}}
    config = parse(cfg, "x/config_db.json")
    assert (config.ports["Ethernet0"].mtu, config.ports["Ethernet0"].admin_up) == (9100, True)
    assert config.qos.pfc_wd["Ethernet0"] == PfcWatchdog()
    assert config.qos.pfc_wd_poll_interval_ms == 200


# ---------------------------------------------------------------- one test per kind of error

Mutation = Callable[[Config], None]


def set_field(table: str, key: str, name: str, value: object) -> Mutation:
    def mutate(cfg: Config) -> None:
        cfg[table][key][name] = value
    return mutate


def delete_field(table: str, key: str, name: str) -> Mutation:
    def mutate(cfg: Config) -> None:
        del cfg[table][key][name]
    return mutate


def put_entry(table: str, key: str, fields: object) -> Mutation:
    def mutate(cfg: Config) -> None:
        cfg.setdefault(table, {})[key] = fields
    return mutate


def rename_key(table: str, old: str, new: str) -> Mutation:
    def mutate(cfg: Config) -> None:
        cfg[table][new] = cfg[table].pop(old)
    return mutate


def delete_table(table: str) -> Mutation:
    def mutate(cfg: Config) -> None:
        del cfg[table]
    return mutate


def combine(*mutations: Mutation) -> Mutation:
    def mutate(cfg: Config) -> None:
        for mutation in mutations:
            mutation(cfg)
    return mutate


ERRORS: list[tuple[str, Mutation, str]] = [
    # DEVICE_METADATA
    ("bad mac", set_field("DEVICE_METADATA", "localhost", "mac", "02:52:4c:00:01"),
     "DEVICE_METADATA|localhost: mac: '02:52:4c:00:01' is not a MAC address like 02:52:4c:00:01:01"),
    ("multicast mac", set_field("DEVICE_METADATA", "localhost", "mac", "01:00:5e:00:00:01"),
     "DEVICE_METADATA|localhost: mac: 01:00:5e:00:00:01 is a multicast address; "
     "the system MAC must be unicast"),
    ("missing hostname", delete_field("DEVICE_METADATA", "localhost", "hostname"),
     "DEVICE_METADATA|localhost: hostname: required field is missing"),
    ("bad buffer_model", set_field("DEVICE_METADATA", "localhost", "buffer_model", "shared"),
     "DEVICE_METADATA|localhost: buffer_model: must be 'traditional' or 'dynamic' (got 'shared')"),
    ("no localhost", delete_table("DEVICE_METADATA"),
     "DEVICE_METADATA: the localhost entry (hostname, mac) is required"),
    # PORT
    ("malformed speed", set_field("PORT", "Ethernet0", "speed", "fast"),
     "PORT|Ethernet0: speed: 'fast' is not an integer"),
    ("missing speed", delete_field("PORT", "Ethernet0", "speed"),
     "PORT|Ethernet0: speed: required field is missing"),
    ("mtu out of range", set_field("PORT", "Ethernet0", "mtu", "9217"),
     "PORT|Ethernet0: mtu: must be between 68 and 9216 (got 9217)"),
    ("unknown field", set_field("PORT", "Ethernet0", "sped", "100000"),
     "PORT|Ethernet0: sped: unknown field"),
    ("admin_status", set_field("PORT", "Ethernet0", "admin_status", "on"),
     "PORT|Ethernet0: admin_status: must be 'up' or 'down' (got 'on')"),
    ("port name", rename_key("PORT", "Ethernet0", "eth1"),
     "PORT|eth1: port names must be Ethernet<N>" + INTERNAL_PORTS),
    ("entry not an object", put_entry("PORT", "Ethernet16", "100000"),
     "PORT|Ethernet16: entry must be a JSON object, not '100000'"),
    # tables
    ("unknown table", put_entry("FOO_TABLE", "x", {}),
     "FOO_TABLE: unknown table (rocelab reads the tables listed in docs/lab-guide.md)"),
    ("misspelt table", put_entry("VLAN_MEMBERS", "Vlan100|Ethernet8", {}),
     "VLAN_MEMBERS: unknown table (did you mean VLAN_MEMBER? rocelab reads the tables listed in docs/lab-guide.md)"),
    ("table not an object", lambda cfg: cfg.update(VLAN=[]),
     "VLAN: must be a JSON object of entries"),
    # INTERFACE / VLAN
    ("interface unknown port", put_entry("INTERFACE", "Ethernet16|10.0.0.9/31", {}),
     "INTERFACE|Ethernet16|10.0.0.9/31: port Ethernet16 is not in PORT"),
    ("bad ipv6 address", put_entry("INTERFACE", "Ethernet0|fc00::g/126", {}),
     "INTERFACE|Ethernet0|fc00::g/126: 'fc00::g/126' is not an IPv4 or IPv6 address with a "
     "prefix length"),
    ("address without length", put_entry("INTERFACE", "Ethernet0|10.0.0.1", {}),
     "INTERFACE|Ethernet0|10.0.0.1: '10.0.0.1' needs a prefix length (a.b.c.d/len or x:y::z/len)"),
    ("interface field", put_entry("INTERFACE", "Ethernet0", {"vrf_name": "Vrf1"}),
     "INTERFACE|Ethernet0: vrf_name: unknown field"),
    ("vlan member of unknown port", put_entry("VLAN_MEMBER", "Vlan100|Ethernet99", {"tagging_mode": "tagged"}),
     "VLAN_MEMBER|Vlan100|Ethernet99: port Ethernet99 is not in PORT"),
    ("vlan member of unknown vlan", put_entry("VLAN_MEMBER", "Vlan300|Ethernet8", {"tagging_mode": "tagged"}),
     "VLAN_MEMBER|Vlan300|Ethernet8: VLAN Vlan300 is not in VLAN"),
    ("vlanid mismatch", set_field("VLAN", "Vlan100", "vlanid", "200"),
     "VLAN|Vlan100: vlanid: 200 does not match the VLAN name Vlan100"),
    ("vlanid range", put_entry("VLAN", "Vlan1", {"vlanid": "1"}),
     "VLAN|Vlan1: vlanid: must be between 2 and 4094 (got 1)"),
    ("tagging mode", set_field("VLAN_MEMBER", "Vlan100|Ethernet8", "tagging_mode", "native"),
     "VLAN_MEMBER|Vlan100|Ethernet8: tagging_mode: must be 'tagged', 'untagged' or 'priority_tagged' "
     "(got 'native')"),
    ("untagged twice",
     combine(put_entry("VLAN", "Vlan300", {"vlanid": "300"}),
             put_entry("VLAN_MEMBER", "Vlan300|Ethernet8", {"tagging_mode": "priority_tagged"})),
     "VLAN_MEMBER|Vlan300|Ethernet8: tagging_mode: port Ethernet8 is already untagged in Vlan100"),
    ("routed vlan member", put_entry("VLAN_MEMBER", "Vlan100|Ethernet0", {"tagging_mode": "tagged"}),
     "VLAN_MEMBER|Vlan100|Ethernet0: port Ethernet0 is routed (INTERFACE|Ethernet0); "
     "it cannot be a VLAN member too"),
    ("svi of unknown vlan", put_entry("VLAN_INTERFACE", "Vlan300|10.3.0.1/24", {}),
     "VLAN_INTERFACE|Vlan300|10.3.0.1/24: VLAN Vlan300 is not in VLAN"),
    # STATIC_ROUTE
    ("host bits set", rename_key("STATIC_ROUTE", "10.1.2.0/24", "10.1.2.5/24"),
     "STATIC_ROUTE|10.1.2.5/24: 10.1.2.5/24 has host bits set (did you mean 10.1.2.0/24?)"),
    ("nexthop ifname mismatch", set_field("STATIC_ROUTE", "10.1.2.0/24", "ifname", "Ethernet0"),
     "STATIC_ROUTE|10.1.2.0/24: ifname: 1 names for 2 nexthops; give one name per nexthop"),
    ("ifname unknown", set_field("STATIC_ROUTE", "10.1.2.0/24", "ifname", "Ethernet0,Ethernet44"),
     "STATIC_ROUTE|10.1.2.0/24: ifname: Ethernet44 is not in PORT or VLAN"),
    ("bad nexthop", set_field("STATIC_ROUTE", "10.1.2.0/24", "nexthop", "10.0.0.0,10.0.0.256"),
     "STATIC_ROUTE|10.1.2.0/24: nexthop: '10.0.0.256' is not an IPv4 or IPv6 address"),
    ("ipv6 nexthop of an ipv4 prefix", set_field("STATIC_ROUTE", "10.1.2.0/24", "nexthop", "fc00::1"),
     "STATIC_ROUTE|10.1.2.0/24: nexthop: fc00::1 is IPv6, the prefix 10.1.2.0/24 IPv4"),
    ("ipv6 host bits set", put_entry("STATIC_ROUTE", "2001:db8:1::1/64", {"nexthop": "fc00::1"}),
     "STATIC_ROUTE|2001:db8:1::1/64: 2001:db8:1::1/64 has host bits set (did you mean "
     "2001:db8:1::/64?)"),
    ("other vrf", rename_key("STATIC_ROUTE", "10.1.2.0/24", "Vrf1|10.1.2.0/24"),
     "STATIC_ROUTE|Vrf1|10.1.2.0/24: VRF 'Vrf1' is not supported (only the default VRF)"),
    ("no nexthop", put_entry("STATIC_ROUTE", "10.9.0.0/16", {"ifname": "Ethernet0"}),
     'STATIC_ROUTE|10.9.0.0/16: needs a nexthop (or blackhole "true")'),
    ("bad blackhole", put_entry("STATIC_ROUTE", "10.9.0.0/16", {"blackhole": "yes"}),
     'STATIC_ROUTE|10.9.0.0/16: blackhole: must be "true" or "false" (got \'yes\')'),
    ("distance", set_field("STATIC_ROUTE", "10.1.2.0/24", "distance", "256"),
     "STATIC_ROUTE|10.1.2.0/24: distance: must be between 0 and 255 (got 256)"),
    ("duplicate route", put_entry("STATIC_ROUTE", "default|10.1.2.0/24", {"nexthop": "10.0.0.0"}),
     "STATIC_ROUTE|default|10.1.2.0/24: route 10.1.2.0/24 is already given by another entry"),
    # QoS maps and PORT_QOS_MAP
    ("dscp out of range", set_field("DSCP_TO_TC_MAP", "AZURE", "64", "1"),
     "DSCP_TO_TC_MAP|AZURE: 64: must be between 0 and 63 (got 64)"),
    ("tc out of range", set_field("TC_TO_QUEUE_MAP", "AZURE", "3", "8"),
     "TC_TO_QUEUE_MAP|AZURE: 3: must be between 0 and 7 (got 8)"),
    ("unknown map name", set_field("PORT_QOS_MAP", "Ethernet0", "dscp_to_tc_map", "NOPE"),
     "PORT_QOS_MAP|Ethernet0: dscp_to_tc_map: 'NOPE' is not in DSCP_TO_TC_MAP"),
    ("map of the wrong table", set_field("PORT_QOS_MAP", "Ethernet0", "tc_to_pg_map", "[TC_TO_QUEUE_MAP|AZURE]"),
     "PORT_QOS_MAP|Ethernet0: tc_to_pg_map: '[TC_TO_QUEUE_MAP|AZURE]' must refer to TC_TO_PRIORITY_GROUP_MAP"),
    ("bad pfc_enable", set_field("PORT_QOS_MAP", "Ethernet0", "pfc_enable", "3,9"),
     "PORT_QOS_MAP|Ethernet0: pfc_enable: must be between 0 and 7 (got 9)"),
    ("pfc_enable not a list", set_field("PORT_QOS_MAP", "Ethernet0", "pfcwd_sw_enable", "3;4"),
     "PORT_QOS_MAP|Ethernet0: pfcwd_sw_enable: '3;4' is not an integer"),
    ("port qos unknown port", put_entry("PORT_QOS_MAP", "Ethernet16", {}),
     "PORT_QOS_MAP|Ethernet16: port Ethernet16 is not in PORT"),
    # buffers
    ("unknown profile in BUFFER_PG", set_field("BUFFER_PG", "Ethernet0|3", "profile", "pg_lossless_25000_5m_profile"),
     "BUFFER_PG|Ethernet0|3: profile: 'pg_lossless_25000_5m_profile' is not in BUFFER_PROFILE"),
    ("bad range", rename_key("QUEUE", "Ethernet0|4-5", "Ethernet0|5-2"),
     "QUEUE|Ethernet0|5-2: range '5-2' is backwards (5 > 2)"),
    ("pg out of range", rename_key("BUFFER_PG", "Ethernet0|3", "Ethernet0|3-8"),
     "BUFFER_PG|Ethernet0|3-8: must be between 0 and 7 (got 8)"),
    ("overlapping ranges", put_entry("BUFFER_QUEUE", "Ethernet0|2-3", {"profile": "egress_lossy_profile"}),
     "BUFFER_QUEUE|Ethernet0|2-3: Ethernet0 index 2 is already set by another entry"),
    ("queue profile in an ingress pool",
     set_field("BUFFER_QUEUE", "Ethernet0|3", "profile", "ingress_lossy_profile"),
     "BUFFER_QUEUE|Ethernet0|3: profile: ingress_lossy_profile is in ingress_lossless_pool, "
     "an ingress pool: an egress queue needs a profile of an egress pool"),
    ("range key without index", rename_key("BUFFER_PG", "Ethernet0|3", "Ethernet0"),
     "BUFFER_PG|Ethernet0: key must be Ethernet<N>|<index> or Ethernet<N>|<first>-<last>"),
    ("unknown pool", set_field("BUFFER_PROFILE", "egress_lossy_profile", "pool", "lossy_pool"),
     "BUFFER_PROFILE|egress_lossy_profile: pool: 'lossy_pool' is not in BUFFER_POOL"),
    ("both thresholds", set_field("BUFFER_PROFILE", "egress_lossy_profile", "static_th", "1000"),
     "BUFFER_PROFILE|egress_lossy_profile: needs exactly one of dynamic_th and static_th"),
    ("dynamic_th range", set_field("BUFFER_PROFILE", "egress_lossy_profile", "dynamic_th", "8"),
     "BUFFER_PROFILE|egress_lossy_profile: dynamic_th: must be between -8 and 7 (got 8)"),
    ("headroom field", set_field("BUFFER_PROFILE", "egress_lossy_profile", "headroom_type", "dynamic"),
     "BUFFER_PROFILE|egress_lossy_profile: headroom_type: unknown field"),
    ("pool type", set_field("BUFFER_POOL", "egress_lossy_pool", "type", "egres"),
     "BUFFER_POOL|egress_lossy_pool: type: must be 'ingress', 'egress' or 'both' (got 'egres')"),
    ("negative size", set_field("BUFFER_POOL", "egress_lossy_pool", "size", "-1"),
     "BUFFER_POOL|egress_lossy_pool: size: must be between 0 and 281474976710656 (got -1)"),
    ("cable length unit", set_field("CABLE_LENGTH", "AZURE", "Ethernet0", "40"),
     "CABLE_LENGTH|AZURE: Ethernet0: '40' is not a length in metres like '40m'"),
    ("cable length port", set_field("CABLE_LENGTH", "AZURE", "Ethernet16", "5m"),
     "CABLE_LENGTH|AZURE: Ethernet16: port Ethernet16 is not in PORT"),
    # WRED, schedulers, queues
    ("wred min above max", set_field("WRED_PROFILE", "AZURE_LOSSLESS", "green_min_threshold", "2000000"),
     "WRED_PROFILE|AZURE_LOSSLESS: green_max_threshold: must be at least green_min_threshold (2000000), "
     "got 1500000"),
    ("wred missing threshold", delete_field("WRED_PROFILE", "AZURE_LOSSLESS", "red_max_threshold"),
     "WRED_PROFILE|AZURE_LOSSLESS: red_max_threshold: required when red WRED is configured"),
    ("wred probability", set_field("WRED_PROFILE", "AZURE_LOSSLESS", "yellow_drop_probability", "101"),
     "WRED_PROFILE|AZURE_LOSSLESS: yellow_drop_probability: must be between 0 and 100 (got 101)"),
    ("wred ecn", set_field("WRED_PROFILE", "AZURE_LOSSLESS", "ecn", "ecn_blue"),
     "WRED_PROFILE|AZURE_LOSSLESS: ecn: must be 'ecn_none', 'ecn_green', 'ecn_yellow', 'ecn_red', "
     "'ecn_green_yellow', 'ecn_green_red', 'ecn_yellow_red' or 'ecn_all' (got 'ecn_blue')"),
    ("dwrr without weight", delete_field("SCHEDULER", "scheduler.0", "weight"),
     "SCHEDULER|scheduler.0: weight: required for DWRR scheduling"),
    ("weight range", set_field("SCHEDULER", "scheduler.0", "weight", "0"),
     "SCHEDULER|scheduler.0: weight: must be between 1 and 100 (got 0)"),
    ("queue unknown scheduler", set_field("QUEUE", "Ethernet0|6", "scheduler", "scheduler.9"),
     "QUEUE|Ethernet0|6: scheduler: 'scheduler.9' is not in SCHEDULER"),
    ("queue unknown wred", set_field("QUEUE", "Ethernet0|3", "wred_profile", "[WRED_PROFILE|AZURE_LOSSY]"),
     "QUEUE|Ethernet0|3: wred_profile: 'AZURE_LOSSY' is not in WRED_PROFILE"),
    # PFC watchdog
    ("pfcwd action", set_field("PFC_WD", "Ethernet0", "action", "ignore"),
     "PFC_WD|Ethernet0: action: must be 'drop', 'forward' or 'alert' (got 'ignore')"),
    ("pfcwd detection time", set_field("PFC_WD", "Ethernet0", "detection_time", "50"),
     "PFC_WD|Ethernet0: detection_time: must be between 100 and 5000 (got 50)"),
    ("pfcwd poll interval", set_field("PFC_WD", "GLOBAL", "POLL_INTERVAL", "2000"),
     "PFC_WD|GLOBAL: POLL_INTERVAL: must be between 100 and 1000 (got 2000)"),
    ("pfcwd unknown port", put_entry("PFC_WD", "Ethernet16", {"action": "drop"}),
     "PFC_WD|Ethernet16: port Ethernet16 is not in PORT"),
    # a key from the file cannot break the message over two lines
    ("newline in key", rename_key("PORT", "Ethernet0", "Ethernet0\nx"),
     "PORT|Ethernet0\\nx: port names must be Ethernet<N>" + INTERNAL_PORTS),
]


@pytest.mark.parametrize("mutate, expected", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_error_is_one_line_naming_file_key_and_field(
    tmp_path: Path, mutate: Mutation, expected: str
) -> None:
    cfg = copy.deepcopy(real("leaf1"))
    mutate(cfg)
    path = tmp_path / "leaf1" / "config_db.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    with pytest.raises(ConfigError) as error:
        load(path)
    message = str(error.value)
    assert message == f"{path}: {expected}"
    assert "\n" not in message


def test_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "config_db.json"
    path.write_text('{\n    "PORT": {\n        "Ethernet0": {"speed": "100000",}\n    }\n}\n')
    with pytest.raises(ConfigError) as error:
        load(path)
    assert str(error.value) == (
        f"{path}: invalid JSON: line 3 column 41: Expecting property name enclosed in double quotes"
    )


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    with pytest.raises(ConfigError, match=r"nope\.json: cannot read: No such file or directory$"):
        load(path)


def test_top_level_must_be_an_object() -> None:
    with pytest.raises(ConfigError, match=r"^x\.json: the top level must be a JSON object of tables$"):
        parse([], "x.json")  # type: ignore[arg-type]
