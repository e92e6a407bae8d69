"""Which config_db.json tables the emulated switch reads, accepts, or refuses.

A dump from a running SONiC switch carries many tables besides the ones that shape its data
plane. rocelab sorts every table it does not model into one of two lists:

- ``NOT_EMULATED``: no data-plane meaning here (management, telemetry, neighbour
  descriptions...). Accepted, and listed as not emulated by ``lab.status``, ``config.lint``
  and the check report, so nobody believes they are in force.
- ``REFUSED``: they change forwarding on a real switch and rocelab does not emulate that
  (link aggregation, ACLs, tunnels, VRFs...). A config naming one is refused in one line,
  unless the lab says to run without them (``UNEMULATED_LABEL``), which is then warned about
  everywhere the not-emulated tables are listed.

Fields get the same treatment inside the tables rocelab reads: ``NOT_EMULATED_FIELDS`` are
the fields SONiC's templates and utilities write that have no data-plane meaning here (a
port's description, its FEC...), accepted with the reason; a value that would change the
data plane and is not emulated (a TPID other than 0x8100, the PFC watchdog's big red switch
on) is refused by the field's schema (``fabric.config_fields``), naming the reason.

docs/lab-guide.md section 4.3 lists all of them, with these reasons.
"""
from __future__ import annotations

from typing import Literal

# The topology label (node, kind or topology.defaults) that runs a switch without the
# REFUSED tables its config names: "skip"; the default, "refuse", stops lab.up.
UNEMULATED_LABEL = "rocelab.unemulated-tables"
UnemulatedPolicy = Literal["refuse", "skip"]

_MANAGEMENT = "management plane"
NOT_EMULATED: dict[str, str] = {
    "TC_TO_DSCP_MAP": "a map only, bound by no port: SONiC's dual-ToR templates render it for "
                      "tunnel remapping; the PORT_QOS_MAP field that would remark a port's "
                      "egress DSCP with it is refused (egress remarking is not emulated)",
    "DEVICE_NEIGHBOR": "describes the neighbours (LLDP-style inventory)",
    "DEVICE_NEIGHBOR_METADATA": "describes the neighbours (LLDP-style inventory)",
    "LLDP": "link discovery",
    "TELEMETRY": "streaming telemetry",
    "GNMI": "streaming telemetry",
    "SYSLOG_SERVER": "logging",
    "SYSLOG_CONFIG": "logging",
    "LOGGER": "logging",
    "MGMT_INTERFACE": _MANAGEMENT,
    "MGMT_PORT": _MANAGEMENT,
    "MGMT_VRF_CONFIG": _MANAGEMENT,
    "NTP": "time service",
    "NTP_SERVER": "time service",
    "DNS_NAMESERVER": _MANAGEMENT,
    "AAA": "login authentication",
    "TACPLUS": "login authentication",
    "TACPLUS_SERVER": "login authentication",
    "RADIUS": "login authentication",
    "RADIUS_SERVER": "login authentication",
    "PASSW_HARDENING": "login authentication",
    "SSH_SERVER": _MANAGEMENT,
    "RESTAPI": _MANAGEMENT,
    "BANNER_MESSAGE": _MANAGEMENT,
    "SNMP": "monitoring",
    "SNMP_COMMUNITY": "monitoring",
    "SNMP_AGENT_ADDRESS_CONFIG": "monitoring",
    "SNMP_USER": "monitoring",
    "FEATURE": "which SONiC containers run",
    "CONTAINER_FEATURE": "which SONiC containers run",
    "SYSTEM_DEFAULTS": "SONiC service defaults",
    "CRM": "resource monitoring",
    "FLEX_COUNTER_TABLE": "counter polling",
    "KDUMP": "crash dumps",
    "AUTO_TECHSUPPORT": "support dumps",
    "AUTO_TECHSUPPORT_FEATURE": "support dumps",
    "VERSIONS": "config schema version",
    "CONSOLE_SWITCH": "console server",
    "CONSOLE_PORT": "console server",
    "KUBERNETES_MASTER": _MANAGEMENT,
    "SFLOW": "samples traffic, does not change forwarding",
    "SFLOW_SESSION": "samples traffic, does not change forwarding",
    "BGP_MONITORS": "BGP monitoring sessions (BMP-like), carry no routes to the fabric",
    "BGP_GLOBALS": "read by frrcfgd (unified routing mode); rocelab renders FRR as bgpcfgd "
                   "does, from DEVICE_METADATA and BGP_NEIGHBOR",
    "SYSTEM_PORT": "a VoQ chassis's system ports: this switch's own are its PORT entries, the "
                   "other line cards' are reached over a chassis fabric that is not emulated",
}

# Fields of the tables rocelab reads that SONiC's templates and utilities write and that
# change nothing here (module docstring), by table; fabric.config_fields takes exactly these.
_PHY = "the PHY's business: a veth has no PHY and the port runs at its speed"
_CHIP = "where the port sits on a multi-ASIC or VoQ chip: one switch is emulated, whole"
_OPTICS = "the transceiver's settings: a veth has no optics"
NOT_EMULATED_FIELDS: dict[str, dict[str, str]] = {
    "PORT": {
        "alias": "the vendor's name for the port",
        "description": "a label for people",
        "index": "front-panel numbering",
        "lanes": "the SerDes lanes the port uses",
        "subport": "the port's place in a breakout",
        "fec": _PHY,
        "autoneg": _PHY,
        "link_training": _PHY,
        "adv_speeds": _PHY,
        "interface_type": _PHY,
        "adv_interface_types": _PHY,
        "fast_linkup": _PHY,
        "dom_polling": _OPTICS,
        "tx_power": _OPTICS,
        "laser_freq": _OPTICS,
        "tpid": "0x8100 (the only value accepted) is the 802.1Q tag the model reads anyway",
        "pfc_asym": "asymmetric PFC (on: honour PFC on every priority, send it for pfc_enable); "
                    "the model honours received PFC on every priority whichever is set",
        "mode": "the CLI's switchport mode: VLAN_MEMBER and INTERFACE decide what the port does",
        "role": "front-panel, internal, inband or recirculation port: every port forwards alike",
        "asic_port_name": _CHIP,
        "core_id": _CHIP,
        "core_port_id": _CHIP,
        "num_voq": _CHIP,
        "dhcp_rate_limit": "limits DHCP to the switch's CPU, which serves no DHCP here",
        "mux_cable": "false (the only value accepted): no dual-ToR mux cable on the port",
    },
    "DEVICE_METADATA": {
        "hwsku": "names the platform, whose buffer settings the config carries (and its "
                 "pg_profile_lookup.ini, when the topology binds it)",
        "platform": "names the platform, whose buffer settings the config carries",
        "type": "the device's role, read by SONiC's templates that render the config",
        "default_pfcwd_status": "whether pfcwd writes PFC_WD at boot; PFC_WD is read as given",
        "deployment_id": _MANAGEMENT,
        "docker_routing_config_mode": "how SONiC's FRR is configured; rocelab renders FRR "
                                      "itself (docs/lab-guide.md 4.7)",
        "frr_mgmt_framework_config": "how SONiC's FRR is configured; rocelab renders FRR itself",
        "region": _MANAGEMENT,
        "cloudtype": _MANAGEMENT,
        "subtype": "the device's role, read by SONiC's templates that render the config",
        "synchronous_mode": "how orchagent talks to the SAI",
        "yang_config_validation": "whether SONiC validates config changes",
        "timezone": _MANAGEMENT,
        "switch_type": "the chip's place in a chassis; a voq switch's QUEUE and BUFFER_QUEUE "
                       "keys are system ports, its own read as its ports' queues",
        "switch_id": "numbers the chips of a VoQ chassis",
        "max_cores": "sizes a VoQ chassis's system ports",
        "asic_name": "names this chip in a VoQ chassis's system-port keys",
        "asic_id": "the SAI's handle on the chip",
        "sub_role": "front-end or back-end chip of a multi-ASIC switch",
        "chassis_hostname": _MANAGEMENT,
        "cluster": _MANAGEMENT,
        "slice_type": _MANAGEMENT,
        "resource_type": _MANAGEMENT,
        "downstream_subrole": _MANAGEMENT,
        "rack_mgmt_map": _MANAGEMENT,
        "storage_device": "read by SONiC's templates that render the config",
        "peer_switch": "names the other ToR of a dual-ToR pair (MUX_CABLE is refused)",
        "dhcp_server": "the switch's own DHCP server",
        "suppress-fib-pending": "when BGP announces a route, not where packets go",
    },
    "PFC_WD": {
        "pfc_stat_history": "keeps a history of PFC counters for the CLI",
        "BIG_RED_SWITCH": "disable (the only value accepted) leaves every watchdog as PFC_WD "
                          "configures it",
    },
}

REFUSED: dict[str, str] = {
    "PORTCHANNEL": "link aggregation (LAG) is not emulated",
    "PORTCHANNEL_MEMBER": "link aggregation (LAG) is not emulated",
    "PORTCHANNEL_INTERFACE": "link aggregation (LAG) is not emulated",
    "ACL_TABLE": "ACLs are not emulated: traffic they would drop or redirect is forwarded",
    "ACL_RULE": "ACLs are not emulated: traffic they would drop or redirect is forwarded",
    "VXLAN_TUNNEL": "VXLAN is not emulated",
    "VXLAN_TUNNEL_MAP": "VXLAN is not emulated",
    "VXLAN_EVPN_NVO": "VXLAN is not emulated",
    "VRF": "only the default VRF is emulated",
    "VLAN_SUB_INTERFACE": "sub-interfaces are not emulated",
    "MIRROR_SESSION": "port mirroring is not emulated",
    "POLICER": "policers are not emulated",
    "NAT_GLOBAL": "NAT is not emulated",
    "STATIC_NAT": "NAT is not emulated",
    "MUX_CABLE": "dual-ToR mux cables are not emulated",
    "LOSSLESS_TRAFFIC_PATTERN": "the dynamic buffer model is not emulated",
    "DEFAULT_LOSSLESS_BUFFER_PARAMETER": "the dynamic buffer model is not emulated",
    "BGP_INTERNAL_NEIGHBOR": "multi-ASIC internal sessions are not emulated",
    "BGP_VOQ_CHASSIS_NEIGHBOR": "chassis sessions are not emulated",
}

# Families of tables named by prefix (SNMP_*, NAT_*...): the first match decides.
_NOT_EMULATED_PREFIXES = {"SNMP_": "monitoring", "TACPLUS_": "login authentication",
                          "RADIUS_": "login authentication", "DHCP_": "DHCP services"}
_REFUSED_PREFIXES = {"VXLAN_": "VXLAN is not emulated", "NAT_": "NAT is not emulated",
                     "PBH_": "policy-based hashing is not emulated",
                     "ACL_": "ACLs are not emulated"}


def not_emulated_reason(table: str) -> str | None:
    """Why ``table`` is accepted without effect, or None when it is not such a table."""
    if table in NOT_EMULATED:
        return NOT_EMULATED[table]
    return next((r for p, r in _NOT_EMULATED_PREFIXES.items() if table.startswith(p)), None)


def refused_reason(table: str) -> str | None:
    """Why ``table`` stops a lab (its data-plane meaning is not emulated), or None."""
    if table in REFUSED:
        return REFUSED[table]
    return next((r for p, r in _REFUSED_PREFIXES.items() if table.startswith(p)), None)


def policy(value: str | None) -> UnemulatedPolicy:
    """The label's value as a policy; ValueError names the allowed values."""
    if value is None or value == "refuse":
        return "refuse"
    if value == "skip":
        return "skip"
    raise ValueError(f"{value!r} must be \"refuse\" or \"skip\"")
