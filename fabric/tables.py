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

docs/lab-guide.md section 4.3 lists both, with these reasons.
"""
from __future__ import annotations

from typing import Literal

# The topology label (node, kind or topology.defaults) that runs a switch without the
# REFUSED tables its config names: "skip"; the default, "refuse", stops lab.up.
UNEMULATED_LABEL = "rocelab.unemulated-tables"
UnemulatedPolicy = Literal["refuse", "skip"]

_MANAGEMENT = "management plane"
NOT_EMULATED: dict[str, str] = {
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
    "TC_TO_DSCP_MAP": "DSCP remarking is not emulated",
    "BUFFER_PORT_INGRESS_PROFILE_LIST": "per-port buffer profile lists are not emulated",
    "BUFFER_PORT_EGRESS_PROFILE_LIST": "per-port buffer profile lists are not emulated",
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
