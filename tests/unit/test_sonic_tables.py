"""Real configs as SONiC renders them load (fabric.config_load): the PORT, DEVICE_METADATA and
PFC_WD fields its templates and utilities write, the per-port buffer profile lists, VoQ
system-port keys, pools of type ``both``. What has no data-plane meaning is accepted with its
reason (fabric.tables); a value that would change the data plane and is not emulated is
refused in one line naming the field. The configs are tests/platform_configs.py's, shaped
as SONiC renders them."""
from __future__ import annotations

import pytest

from rocelab.fabric import tables
from rocelab.fabric.config import ConfigError, PfcWatchdog, QueueConfig
from rocelab.fabric.config_fields import DeviceMetadata, PfcWdFields, PfcWdGlobalFields, PortFields
from rocelab.fabric.config_load import parse
from rocelab.fabric.model.classify import PortClassifier
from tests.platform_configs import (LOSSLESS, LOSSY_QUEUES, OTHER_CARDS, TRADITIONAL_PORTS,
                                    VOQ_ASIC, VOQ_HOST, VOQ_PORTS, traditional, voq_line_card)
from tests.unit.test_config import real

# the fields each model reads into the switch's configuration (or refuses whatever their
# value: macsec); every other field it takes is accepted, not emulated, and must say why in
# fabric.tables.NOT_EMULATED_FIELDS
EMULATED = {
    PortFields: {"speed", "mtu", "admin_status", "macsec"},
    DeviceMetadata: {"hostname", "mac", "buffer_model", "bgp_asn", "bgp_router_id",
                     "default_bgp_status"},
    PfcWdFields: {"action", "detection_time", "restoration_time"},
    PfcWdGlobalFields: {"POLL_INTERVAL"},
}
TABLE_OF = {PortFields: "PORT", DeviceMetadata: "DEVICE_METADATA", PfcWdFields: "PFC_WD",
            PfcWdGlobalFields: "PFC_WD"}


@pytest.mark.parametrize("model", list(EMULATED), ids=lambda m: m.__name__)
def test_every_field_taken_is_emulated_or_has_its_reason(model):
    names = {f.alias or name for name, f in model.model_fields.items()}
    reasons = tables.NOT_EMULATED_FIELDS[TABLE_OF[model]]
    assert names - EMULATED[model] <= set(reasons), names - EMULATED[model] - set(reasons)
    assert all(reasons.values())


P1, P2 = TRADITIONAL_PORTS
V1, V2 = VOQ_PORTS
ABSENT = "Ethernet200"  # a port neither config has


def test_a_traditional_config_loads_with_its_profile_lists():
    config = parse(traditional(), "trad/config_db.json")
    assert {port: config.ports[port].speed_mbps for port in TRADITIONAL_PORTS} == {
        port: speed for port, (speed, _, _) in TRADITIONAL_PORTS.items()}
    assert config.qos.port_ingress_profiles == dict.fromkeys(
        TRADITIONAL_PORTS, ("ingress_lossless_profile", "ingress_lossy_profile"))
    assert config.qos.port_egress_profiles[P1] == ("egress_lossless_profile",
                                                   "egress_lossy_profile")
    assert config.qos.pfc_wd[P1] == PfcWatchdog("drop", 400, 800)  # pfc_stat_history taken
    assert config.not_emulated == config.skipped == ()


def test_a_voq_line_card_loads_its_own_system_ports_as_its_queues():
    config = parse(voq_line_card(), "lc1/config_db.json")
    assert config.qos.queues[(V1, LOSSLESS[0])] == QueueConfig("lossless_dwrr", "ROCE_ECN")
    assert config.qos.queues[(V2, LOSSY_QUEUES[-1])] == QueueConfig("lossy_dwrr")
    assert config.qos.buffer_queue[(V2, LOSSLESS[-1])] == "egress_lossless_profile"
    assert config.qos.buffer_queue[(V1, LOSSY_QUEUES[-1])] == "egress_lossy_profile"
    # the other cards' entries (their lossless queues, without a scheduler) changed nothing
    queues = len(VOQ_PORTS) * len(LOSSLESS + LOSSY_QUEUES)
    assert len(config.qos.queues) == queues and len(config.qos.buffer_queue) == queues
    assert config.other_line_cards == tuple(f"{host}|{VOQ_ASIC}" for host in OTHER_CARDS)
    assert config.qos.buffer_pools["ingress_lossless_pool"].type == "both"
    assert config.not_emulated == ("SYSTEM_PORT",)


def test_real_port_fields_and_pfcwd_fields_are_accepted():
    cfg = real("leaf1")
    cfg["PORT"]["Ethernet0"].update(
        description="spine1:Ethernet0", tpid="0x8100", pfc_asym="on", fec="rs", autoneg="off",
        link_training="off", adv_speeds="100000", interface_type="CR4", subport="0",
        dom_polling="enabled", role="Ext", mode="routed", mux_cable="false",
        dhcp_rate_limit="300", fast_linkup="false", tx_power="-10.5", laser_freq="193100")
    cfg["PFC_WD"]["Ethernet0"]["pfc_stat_history"] = "enable"
    cfg["PFC_WD"]["GLOBAL"]["BIG_RED_SWITCH"] = "disable"
    cfg["DEVICE_METADATA"]["localhost"].update({"suppress-fib-pending": "disabled",
                                                "chassis_hostname": "chassis1",
                                                "storage_device": "true"})
    config = parse(cfg, "leaf1/config_db.json")
    assert config == parse(real("leaf1"), "leaf1/config_db.json")  # and nothing changed
    assert config.qos.pfc_wd["Ethernet0"] == PfcWatchdog("drop", 200, 200)


REFUSED = [
    ("PORT", "Ethernet0", "tpid", "0x88A8",
     "tpid: '0x88A8' is not emulated (VLAN tags of another EtherType); only '0x8100' is "
     "accepted"),
    ("PORT", "Ethernet0", "mux_cable", "true",
     "mux_cable: 'true' is not emulated (a dual-ToR mux cable); only 'false' is accepted"),
    ("PORT", "Ethernet0", "macsec", "macsec-profile",
     "macsec: 'macsec-profile' is not emulated (MACsec: frames would cross the wire in clear)"),
    ("PFC_WD", "GLOBAL", "BIG_RED_SWITCH", "enable",
     "BIG_RED_SWITCH: 'enable' is not emulated (every PFC watchdog queue would drop and ignore "
     "PFC); only 'disable' is accepted"),
    ("PORT", "Ethernet0", "pfc_asym", "yes", "pfc_asym: must be 'on' or 'off' (got 'yes')"),
    ("PFC_WD", "Ethernet0", "pfc_stat_history", "on",
     "pfc_stat_history: must be 'enable' or 'disable' (got 'on')"),
    ("DEVICE_METADATA", "localhost", "switch_type", "chassis",
     "switch_type: must be 'npu', 'voq', 'chassis-packet', 'fabric', 'dpu' or 'dummy-sup' "
     "(got 'chassis')"),
]


@pytest.mark.parametrize("table, key, field, value, expected", REFUSED,
                         ids=[f"{r[2]}={r[3]}" for r in REFUSED])
def test_values_that_would_change_the_data_plane_are_refused(table, key, field, value,
                                                             expected):
    cfg = real("leaf1")
    cfg[table][key][field] = value
    with pytest.raises(ConfigError) as error:
        parse(cfg, "leaf1/config_db.json")
    assert str(error.value) == f"leaf1/config_db.json: {table}|{key}: {expected}"


def _voq_error(edit) -> str:
    cfg = voq_line_card()
    edit(cfg)
    with pytest.raises(ConfigError) as error:
        parse(cfg, "lc1/config_db.json")
    return str(error.value).removeprefix("lc1/config_db.json: ")


def test_system_port_keys_need_a_voq_switch_that_knows_its_asic():
    def npu(cfg):
        cfg["DEVICE_METADATA"]["localhost"]["switch_type"] = "npu"

    def no_asic(cfg):
        del cfg["DEVICE_METADATA"]["localhost"]["asic_name"]

    def unknown_port(cfg):
        cfg["QUEUE"][f"{own}|{ABSENT}|3"] = {"scheduler": "lossless_dwrr"}

    def remote_bad_index(cfg):
        cfg["QUEUE"][f"{other}|{ABSENT}|9"] = {"scheduler": "lossless_dwrr"}

    own, other = f"{VOQ_HOST}|{VOQ_ASIC}", f"{OTHER_CARDS[0]}|{VOQ_ASIC}"
    first = next(iter(voq_line_card()["BUFFER_QUEUE"]))
    assert _voq_error(npu) == (f"BUFFER_QUEUE|{first}: a system-port key "
                               "<host>|<asic>|<port>|<queue> needs DEVICE_METADATA switch_type "
                               "voq")
    assert _voq_error(no_asic) == (f"BUFFER_QUEUE|{first}: DEVICE_METADATA|localhost has no "
                                   "asic_name: which system ports are this switch's own "
                                   "cannot be told")
    assert _voq_error(unknown_port) == (f"QUEUE|{own}|{ABSENT}|3: port {ABSENT} is not in "
                                        "PORT")
    assert _voq_error(remote_bad_index) == (f"QUEUE|{other}|{ABSENT}|9: must be between 0 and "
                                            "7 (got 9)")


def test_a_local_queue_given_twice_is_refused():
    def twice(cfg):
        cfg["QUEUE"][f"{V1}|{LOSSLESS[0]}"] = {"scheduler": "lossy_dwrr"}
    assert _voq_error(twice) == (f"QUEUE|{V1}|{LOSSLESS[0]}: {V1} index {LOSSLESS[0]} is "
                                 "already set by another entry")


def _traditional_error(edit) -> str:
    cfg = traditional()
    edit(cfg)
    with pytest.raises(ConfigError) as error:
        parse(cfg, "trad/config_db.json")
    return str(error.value).removeprefix("trad/config_db.json: ")


def test_a_profile_list_takes_one_profile_per_pool_of_its_direction():
    def egress_in_ingress(cfg):
        cfg["BUFFER_PORT_INGRESS_PROFILE_LIST"][P1]["profile_list"] = \
            "ingress_lossless_profile,egress_lossy_profile"

    def two_in_one_pool(cfg):
        cfg["BUFFER_PORT_EGRESS_PROFILE_LIST"][P1]["profile_list"] = \
            "egress_lossy_profile,[BUFFER_PROFILE|q_lossy_profile]"

    def unknown(cfg):
        cfg["BUFFER_PORT_EGRESS_PROFILE_LIST"][P2]["profile_list"] = "egress_profile"

    def unknown_port(cfg):
        cfg["BUFFER_PORT_INGRESS_PROFILE_LIST"][ABSENT] = {"profile_list": ""}

    assert _traditional_error(egress_in_ingress) == (
        f"BUFFER_PORT_INGRESS_PROFILE_LIST|{P1}: profile_list: egress_lossy_profile is in "
        "egress_lossy_pool, an egress pool: an ingress list needs profiles of ingress (or "
        "both) pools")
    assert _traditional_error(two_in_one_pool) == (
        f"BUFFER_PORT_EGRESS_PROFILE_LIST|{P1}: profile_list: egress_lossy_profile and "
        "q_lossy_profile are both in egress_lossy_pool: a port takes one profile per pool")
    assert _traditional_error(unknown) == (
        f"BUFFER_PORT_EGRESS_PROFILE_LIST|{P2}: profile_list: 'egress_profile' is not in "
        "BUFFER_PROFILE")
    assert _traditional_error(unknown_port) == (
        f"BUFFER_PORT_INGRESS_PROFILE_LIST|{ABSENT}: port {ABSENT} is not in PORT")


def test_the_profile_lists_are_no_longer_refused_tables():
    assert tables.refused_reason("BUFFER_PORT_INGRESS_PROFILE_LIST") is None
    assert tables.refused_reason("BUFFER_PORT_EGRESS_PROFILE_LIST") is None
    assert tables.not_emulated_reason("SYSTEM_PORT")


def test_a_chassis_cards_internal_ports_are_ports_and_nothing_else_is():
    cfg = voq_line_card()
    cfg["PORT"]["Ethernet-Rec0"] = {"speed": "400000", "lanes": "249", "alias": "Rcy0"}
    cfg["PORT"]["Ethernet-IB0"] = {"speed": "400000", "lanes": "250", "alias": "Rcy1"}
    config = parse(cfg, "lc1/config_db.json")
    assert {"Ethernet-Rec0", "Ethernet-IB0"} <= set(config.ports)
    cfg["PORT"]["Ethernet-Foo0"] = {"speed": "400000"}
    with pytest.raises(ConfigError, match=r"PORT\|Ethernet-Foo0: port names must be Ethernet<N>"):
        parse(cfg, "lc1/config_db.json")


def test_traffic_classes_past_7_map_to_a_pg_and_a_queue():
    """Dual-ToR templates put DSCP 33 in TC 8: TCs run 0..15, PGs and queues 0..7."""
    cfg = real("leaf1")
    cfg["DSCP_TO_TC_MAP"]["AZURE"]["33"] = "8"
    cfg["TC_TO_PRIORITY_GROUP_MAP"]["AZURE"]["8"] = "0"
    cfg["TC_TO_QUEUE_MAP"]["AZURE"]["8"] = "1"
    config = parse(cfg, "leaf1/config_db.json")
    classifier = PortClassifier.from_config(config.qos, "Ethernet0")
    assert classifier.resolve(classifier.by_dscp[33])[:3:2] == (8, 1)
    cfg["TC_TO_QUEUE_MAP"]["AZURE"]["8"] = "8"
    with pytest.raises(ConfigError, match=r"TC_TO_QUEUE_MAP\|AZURE: 8: must be between 0 and 7"):
        parse(cfg, "leaf1/config_db.json")


def test_a_tc_to_dscp_map_no_port_binds_is_accepted_and_binding_one_is_refused():
    cfg = real("leaf1")
    cfg["TC_TO_DSCP_MAP"] = {"AZURE": {str(tc): str(tc) for tc in range(8)}}
    assert parse(cfg, "leaf1/config_db.json").not_emulated == ("TC_TO_DSCP_MAP",)
    port = next(iter(cfg["PORT_QOS_MAP"]))
    cfg["PORT_QOS_MAP"][port]["tc_to_dscp_map"] = "AZURE"
    with pytest.raises(ConfigError, match=r"tc_to_dscp_map: unknown field"):
        parse(cfg, "leaf1/config_db.json")
