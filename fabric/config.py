"""SONiC config_db.json -> a validated, typed switch configuration.

The emulated switch reads the tables SONiC uses, with SONiC's names and semantics, and
rejects what it does not understand: every error is one line,
``<file>: <TABLE>|<key>: <field>: <problem>``, so a config that loads here is one an
engineer can load on a SONiC switch.
"""
from __future__ import annotations

import difflib
import os
import string
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from ipaddress import (
    IPv4Address, IPv4Interface, IPv4Network, IPv6Address, IPv6Interface, IPv6Network,
    ip_address, ip_interface,
)
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import core_schema

from .tables import (NOT_EMULATED, UNEMULATED_LABEL, UnemulatedPolicy, not_emulated_reason,
                     refused_reason)
from .userinput import MAX_INT_DIGITS, MAX_KEY_SHOWN, JsonError, brief, shown_key
from .userinput import decode_json

TaggingMode = Literal["tagged", "untagged", "priority_tagged"]
IPInterface = IPv4Interface | IPv6Interface  # an interface address of either family
IPNetwork = IPv4Network | IPv6Network
IPAddress = IPv4Address | IPv6Address

# Where a switch takes the WRED/ECN decision on an egress queue: when the frame leaves it
# (``dequeue``: the DCQCN and HPCC reference simulators and the parameters published with
# them) or when it enters (``enqueue``: Broadcom-like). Not a config_db.json field (SONiC
# has none: it is the ASIC's behaviour), so a lab sets it with a topology label.
ECN_MARKING_POINTS = ("dequeue", "enqueue")
DEFAULT_ECN_MARKING = "dequeue"


class ConfigError(ValueError):
    """A config_db.json problem, phrased as ``file: TABLE|key: field: problem``.

    ``where`` holds ``TABLE|key|field`` (empty for whole-file problems), so tools that list
    findings (config.lint) can point at the entry without parsing the message.
    """

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where


@dataclass(frozen=True)
class Port:
    name: str  # Ethernet0, Ethernet4, ...
    speed_mbps: int
    mtu: int
    admin_up: bool = True
    alias: str = ""


@dataclass(frozen=True)
class Vlan:
    name: str  # Vlan100
    vid: int
    members: dict[str, TaggingMode] = field(default_factory=dict)  # port -> mode
    addresses: tuple[IPInterface, ...] = ()  # VLAN_INTERFACE (SVI) addresses


@dataclass(frozen=True)
class StaticRoute:
    prefix: IPNetwork  # its family is every next hop's family
    nexthops: tuple[IPAddress, ...] = ()
    ifnames: tuple[str, ...] = ()  # parallel to nexthops when given
    distance: int = 1
    blackhole: bool = False


@dataclass(frozen=True)
class BgpNeighbor:
    """BGP_NEIGHBOR: one session, as bgpcfgd renders it into FRR."""

    address: IPAddress  # either family; fabric.frrconfig renders the IPv4 sessions
    asn: int
    name: str = ""
    local_addr: IPAddress | None = None
    admin_up: bool = True
    holdtime: int | None = None  # seconds; FRR's default (180) when not given
    keepalive: int | None = None
    nhopself: bool = False
    rrclient: bool = False


@dataclass(frozen=True)
class BgpPeerRange:
    """BGP_PEER_RANGE: dynamic neighbours accepted from these prefixes."""

    name: str
    ip_ranges: tuple[IPNetwork, ...]
    peer_asn: int | None = None  # None: any external AS
    src_address: IPAddress | None = None


@dataclass(frozen=True)
class Bgp:
    """The switch's BGP speaker: DEVICE_METADATA bgp_asn (and bgp_router_id) and its peers."""

    asn: int
    router_id: IPv4Address | None = None  # None: Loopback0's IPv4 address, else FRR's choice
    neighbors: dict[IPAddress, BgpNeighbor] = field(default_factory=dict)
    peer_ranges: dict[str, BgpPeerRange] = field(default_factory=dict)


@dataclass(frozen=True)
class PortQos:
    """PORT_QOS_MAP for one port (or ``global``): map names and PFC settings."""

    dscp_to_tc_map: str | None = None
    dot1p_to_tc_map: str | None = None
    tc_to_pg_map: str | None = None
    tc_to_queue_map: str | None = None
    pfc_to_queue_map: str | None = None
    pfc_to_pg_map: str | None = None
    pfc_enable: frozenset[int] = frozenset()
    pfcwd_sw_enable: frozenset[int] = frozenset()
    scheduler: str | None = None


@dataclass(frozen=True)
class BufferPool:
    name: str
    type: Literal["ingress", "egress", "both"]
    mode: Literal["static", "dynamic"]
    size: int
    xoff: int = 0  # shared headroom pool size


@dataclass(frozen=True)
class BufferProfile:
    name: str
    pool: str
    size: int
    dynamic_th: int | None = None  # alpha = 2 ** dynamic_th of the free pool
    static_th: int | None = None
    xon: int | None = None
    xoff: int | None = None
    xon_offset: int | None = None


@dataclass(frozen=True)
class WredColor:
    enable: bool
    min_threshold: int
    max_threshold: int
    drop_probability: int  # percent


@dataclass(frozen=True)
class WredProfile:
    name: str
    ecn: str  # ecn_none, ecn_green, ecn_yellow, ecn_red, ecn_green_yellow, ..., ecn_all
    green: WredColor | None = None
    yellow: WredColor | None = None
    red: WredColor | None = None


@dataclass(frozen=True)
class Scheduler:
    name: str
    type: Literal["STRICT", "DWRR", "WRR"]
    weight: int | None = None
    priority: int | None = None
    cir: int | None = None
    pir: int | None = None


@dataclass(frozen=True)
class QueueConfig:
    scheduler: str | None = None
    wred_profile: str | None = None


@dataclass(frozen=True)
class PfcWatchdog:
    action: Literal["drop", "forward", "alert"] = "drop"
    detection_time_ms: int = 200
    restoration_time_ms: int = 200


@dataclass(frozen=True)
class Qos:
    """Every QoS table, references already resolved and checked by the loader."""

    dscp_to_tc: dict[str, dict[int, int]] = field(default_factory=dict)
    dot1p_to_tc: dict[str, dict[int, int]] = field(default_factory=dict)
    tc_to_pg: dict[str, dict[int, int]] = field(default_factory=dict)
    tc_to_queue: dict[str, dict[int, int]] = field(default_factory=dict)
    pfc_priority_to_queue: dict[str, dict[int, int]] = field(default_factory=dict)
    pfc_priority_to_pg: dict[str, dict[int, int]] = field(default_factory=dict)
    port_qos: dict[str, PortQos] = field(default_factory=dict)  # port or "global"
    buffer_pools: dict[str, BufferPool] = field(default_factory=dict)
    buffer_profiles: dict[str, BufferProfile] = field(default_factory=dict)
    buffer_pg: dict[tuple[str, int], str] = field(default_factory=dict)  # (port, pg) -> profile
    buffer_queue: dict[tuple[str, int], str] = field(default_factory=dict)  # (port, q) -> profile
    cable_length_m: dict[str, int] = field(default_factory=dict)  # port -> metres
    wred_profiles: dict[str, WredProfile] = field(default_factory=dict)
    schedulers: dict[str, Scheduler] = field(default_factory=dict)
    queues: dict[tuple[str, int], QueueConfig] = field(default_factory=dict)  # (port, q)
    pfc_wd: dict[str, PfcWatchdog] = field(default_factory=dict)  # port -> settings
    pfc_wd_poll_interval_ms: int = 200


@dataclass(frozen=True)
class SwitchConfig:
    path: str
    hostname: str
    mac: str  # system MAC, lower-case aa:bb:cc:dd:ee:ff; every router interface uses it
    type: str = ""
    hwsku: str = ""
    buffer_model: str = "traditional"
    ports: dict[str, Port] = field(default_factory=dict)
    vlans: dict[str, Vlan] = field(default_factory=dict)
    interfaces: dict[str, tuple[IPInterface, ...]] = field(default_factory=dict)  # routed ports
    loopbacks: dict[str, tuple[IPInterface, ...]] = field(default_factory=dict)
    static_routes: tuple[StaticRoute, ...] = ()
    qos: Qos = field(default_factory=Qos)
    bgp: Bgp | None = None  # None: no BGP_NEIGHBOR or BGP_PEER_RANGE entry
    not_emulated: tuple[str, ...] = ()  # tables present with no data-plane meaning here
    skipped: tuple[str, ...] = ()  # refused tables present, run without (UNEMULATED_LABEL)


def port_name(iface: str) -> str:
    """Map a containerlab wire name to SONiC-VS's port name: eth1 -> Ethernet0, ethN -> 4*(N-1)."""
    if not iface.startswith("eth") or not iface[3:].isdigit() or int(iface[3:]) < 1:
        raise ValueError(f"{iface!r} is not a switch data port (expected eth1, eth2, ...)")
    return f"Ethernet{4 * (int(iface[3:]) - 1)}"


def iface_name(port: str) -> str:
    """Inverse of port_name: Ethernet8 -> eth3."""
    if not port.startswith("Ethernet") or not port[8:].isdigit() or int(port[8:]) % 4:
        raise ValueError(f"{port!r} is not an EthernetN port with N a multiple of 4")
    return f"eth{int(port[8:]) // 4 + 1}"


# --------------------------------------------------------------------------- loader
#
# parse() walks the tables in dependency order (PORT before anything naming a port, maps
# before PORT_QOS_MAP, ...), so every entry can check its references against what is
# already accepted. Entry parsers raise _Invalid(problem, field); parse() adds the file,
# table and key, which keeps every message on one line in one format.


def load(path: str | os.PathLike[str], unemulated: UnemulatedPolicy = "refuse") -> SwitchConfig:
    """Read and validate a config_db.json file (``unemulated``: see ``parse``)."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(f"{name}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{name}: invalid JSON: not UTF-8 text") from None
    try:
        data = decode_json(text, name)
    except JsonError as e:
        raise ConfigError(str(e), e.where) from None
    return parse(data, name, unemulated)


def parse(data: dict[str, Any], path: str,
          unemulated: UnemulatedPolicy = "refuse") -> SwitchConfig:
    """Validate config_db.json content; *path* only names the source in error messages.
    ``unemulated``: "skip" runs without tables whose data-plane meaning is not emulated
    (``fabric.tables.REFUSED``) instead of refusing the file; they are listed in ``skipped``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a JSON object of tables")
    _reject_unknown_tables(data, path, unemulated)
    draft = _Draft()
    for table, parse_entry in _TABLES.items():
        entries = data.get(table, {})
        if not isinstance(entries, dict):
            raise ConfigError(_one_line(f"{path}: {table}: must be a JSON object of entries"))
        for key, fields in entries.items():
            try:
                if not isinstance(fields, dict):
                    raise _Invalid(f"entry must be a JSON object, not {brief(fields)}")
                parse_entry(draft, key, fields)
            except _Invalid as invalid:
                shown = shown_key(key)
                where = "|".join([table, shown, *([invalid.field] if invalid.field else [])])
                raise ConfigError(invalid.message(path, f"{table}|{shown}"), where) from None
    config = draft.finish(path)
    return replace(config,
                   not_emulated=tuple(sorted(t for t in data if not_emulated_reason(t))),
                   skipped=tuple(sorted(t for t in data if t not in _TABLES
                                        and refused_reason(t))))




def _reject_unknown_tables(data: dict[str, Any], path: str, unemulated: UnemulatedPolicy) -> None:
    """A table we would silently skip is config the engineer believes is in force: tables
    with no data-plane meaning pass (listed as not emulated), tables whose meaning is not
    emulated are refused unless the lab runs without them, anything else is unknown."""
    for table in data:
        if table in _TABLES or not_emulated_reason(table):
            continue
        reason = refused_reason(table)
        if reason and unemulated == "skip":
            continue
        if reason:
            raise ConfigError(_one_line(
                f"{path}: {shown_key(table)}: not emulated ({reason}); the topology label "
                f"{UNEMULATED_LABEL}: skip runs the lab without it"), table)
        known = [*_TABLES, *NOT_EMULATED]
        close = difflib.get_close_matches(table[:MAX_KEY_SHOWN], known, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ConfigError(_one_line(
            f"{path}: {shown_key(table)}: unknown table ({hint}rocelab reads the tables listed in docs/lab-guide.md)"))


def _one_line(message: str) -> str:
    """Keys come from the file; a stray newline in one must not split the message."""
    return message.replace("\n", "\\n")


class _Invalid(ValueError):
    """One problem in one entry; parse() adds the file, table and key.

    A ValueError, so the pydantic validators below can raise it too.
    """

    def __init__(self, problem: str, field: str | None = None):
        super().__init__(problem)
        self.problem = problem
        self.field = field

    def message(self, path: str, where: str) -> str:
        parts = [path, where, *([self.field] if self.field else []), self.problem]
        return _one_line(": ".join(parts))


@contextmanager
def _in_field(name: str) -> Iterator[None]:
    """Attribute problems found by plain (non-pydantic) checks to field *name*."""
    try:
        yield
    except _Invalid as invalid:
        raise _Invalid(invalid.problem, invalid.field or name) from None


# ---- value types: config_db.json writes every number as a string ("9100")


def _integer(value: object) -> int:
    """A config_db integer: "9100" as SONiC writes it, or a plain JSON 9100."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.removeprefix("-").isdigit():
        digits = len(value.removeprefix("-"))
        if digits > MAX_INT_DIGITS:
            raise _Invalid(f"an integer of {digits} digits is out of range")
        return int(value)
    raise _Invalid(f"{brief(value)} is not an integer")


@dataclass(frozen=True)
class _Between:
    """``Annotated[int, _Between(lo, hi)]``: an integer in lo..hi (no upper bound if hi is None).

    Also callable on its own, for values that are not pydantic fields (map entries, key indices).
    """

    lo: int
    hi: int | None = None

    def __call__(self, value: object) -> int:
        number = _integer(value)
        if self.hi is None and number < self.lo:
            raise _Invalid(f"must be at least {self.lo} (got {number})")
        if self.hi is not None and not self.lo <= number <= self.hi:
            raise _Invalid(f"must be between {self.lo} and {self.hi} (got {number})")
        return number

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(self, handler(source))


def _flag(value: object) -> bool:
    """SONiC booleans are the strings "true"/"false"; pydantic's lax bool would take "yes", "1"..."""
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise _Invalid(f'must be "true" or "false" (got {brief(value)})')


def _mac(value: str) -> str:
    """Every router interface sends from the system MAC, so it must be a unicast address."""
    octets = value.split(":")
    if len(octets) != 6 or not all(len(o) == 2 and set(o) <= set(string.hexdigits) for o in octets):
        raise _Invalid(f"{brief(value)} is not a MAC address like 02:52:4c:00:01:01")
    if int(octets[0], 16) & 1:
        raise _Invalid(f"{value} is a multicast address; the system MAC must be unicast")
    return value.lower()


def _comma_list(value: object) -> list[str]:
    """SONiC's list-in-a-string form: "10.0.0.0,10.0.0.2"; "" is the empty list."""
    if not isinstance(value, str):
        raise _Invalid(f"must be a comma-separated string (got {brief(value)})")
    return [item.strip() for item in value.split(",")] if value else []


def _priorities(value: object) -> frozenset[int]:
    """pfc_enable / pfcwd_sw_enable: "3,4" (a lone JSON 3 is fine too)."""
    items = [value] if isinstance(value, int) else _comma_list(value)
    return frozenset(_Between(0, 7)(item) for item in items)


def _ip_address(text: str) -> IPAddress:
    """A next hop of either family; the route's prefix decides which one it must be."""
    try:
        return ip_address(text)
    except ValueError:
        raise _Invalid(f"{brief(text)} is not an IPv4 or IPv6 address") from None


def _ip_interface(text: str) -> IPInterface:
    """An address with its prefix length, as in ``INTERFACE|Ethernet0|10.0.0.1/31`` or
    ``INTERFACE|Ethernet0|fc00::1/126``."""
    if "/" not in text:
        raise _Invalid(f"{brief(text)} needs a prefix length (a.b.c.d/len or x:y::z/len)")
    try:
        return ip_interface(text)
    except ValueError:
        raise _Invalid(f"{brief(text)} is not an IPv4 or IPv6 address with a prefix length") \
            from None


def _router_id(text: str) -> IPv4Address:
    """bgp_router_id: 32 bits written as an IPv4 address, whatever the sessions' family."""
    try:
        return IPv4Address(text)
    except ValueError:
        raise _Invalid(f"{brief(text)} is not an IPv4 address (a BGP router id is 32 bits, "
                       "written as one)") from None


def _ip_network(text: str) -> IPNetwork:
    """A route prefix; host bits set usually means a typo, so say which network was meant."""
    interface = _ip_interface(text)
    if interface.ip != interface.network.network_address:
        raise _Invalid(f"{text} has host bits set (did you mean {interface.network}?)")
    return interface.network


MAX_ASN = 2**32 - 1  # 4-byte AS numbers (RFC 6793)
_Bytes = Annotated[int, _Between(0)]
_OptionalBytes = Annotated[int | None, _Between(0)]
_Flag = Annotated[bool, BeforeValidator(_flag)]
# BGP_NEIGHBOR's nhopself/rrclient: SONiC writes "0"/"1"
_Flag01 = Annotated[bool, BeforeValidator(lambda v: _flag({"0": "false", "1": "true"}.get(v, v)))]
_Priorities = Annotated[frozenset[int], BeforeValidator(_priorities)]
_Nexthops = Annotated[
    tuple[IPAddress, ...], BeforeValidator(lambda v: [_ip_address(a) for a in _comma_list(v)])
]
_Names = Annotated[tuple[str, ...], BeforeValidator(_comma_list)]
_EcnMode = Literal["ecn_none", "ecn_green", "ecn_yellow", "ecn_red", "ecn_green_yellow",
                  "ecn_green_red", "ecn_yellow_red", "ecn_all"]


# ---- one pydantic model per entry type: field names and types exactly as SONiC writes them


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Empty(_Entry):
    """INTERFACE-style entries: the key says it all; any field is one we do not model."""


class _DeviceMetadata(_Entry):
    hostname: str = Field(min_length=1)
    mac: Annotated[str, AfterValidator(_mac)]
    hwsku: str = ""
    type: str = ""
    platform: str = ""
    buffer_model: Literal["traditional", "dynamic"] = "traditional"
    default_pfcwd_status: Literal["enable", "disable"] = "disable"
    bgp_asn: Annotated[int | None, _Between(1, MAX_ASN)] = None
    bgp_router_id: Annotated[IPv4Address | None, BeforeValidator(_router_id)] = None
    default_bgp_status: Literal["up", "down"] = "up"
    # in every dump, no effect on the emulated data plane
    deployment_id: str | None = None
    docker_routing_config_mode: str | None = None
    frr_mgmt_framework_config: str | None = None
    region: str | None = None
    cloudtype: str | None = None
    subtype: str | None = None
    synchronous_mode: str | None = None
    yang_config_validation: str | None = None
    timezone: str | None = None


class _BgpNeighborFields(_Entry):
    asn: Annotated[int, _Between(1, MAX_ASN)]
    name: str = ""
    local_addr: Annotated[IPAddress | None, BeforeValidator(_ip_address)] = None
    admin_status: Literal["up", "down"] | None = None  # None: DEVICE_METADATA default_bgp_status
    holdtime: Annotated[int | None, _Between(0, 65535)] = None
    keepalive: Annotated[int | None, _Between(0, 65535)] = None
    nhopself: _Flag01 = False
    rrclient: _Flag01 = False


class _BgpPeerRangeFields(_Entry):
    ip_range: Annotated[tuple[IPNetwork, ...],
                        BeforeValidator(lambda v: [_ip_network(p) for p in _comma_list(v)])]
    name: str = ""
    peer_asn: Annotated[int | None, _Between(1, MAX_ASN)] = None
    src_address: Annotated[IPAddress | None, BeforeValidator(_ip_address)] = None


class _PortFields(_Entry):
    speed: Annotated[int, _Between(1)]  # Mb/s
    mtu: Annotated[int, _Between(68, 9216)] = 9100
    admin_status: Literal["up", "down"] = "up"
    alias: str = ""
    lanes: str = ""
    index: _OptionalBytes = None
    fec: str = ""
    autoneg: str = ""


class _VlanFields(_Entry):
    vlanid: Annotated[int, _Between(2, 4094)]
    members: list[str] = []  # VLAN_MEMBER is authoritative; only checked to name ports


class _VlanMemberFields(_Entry):
    tagging_mode: TaggingMode


class _StaticRouteFields(_Entry):
    nexthop: _Nexthops = ()
    ifname: _Names = ()
    distance: Annotated[int, _Between(0, 255)] = 1
    blackhole: _Flag = False


class _PortQosFields(_Entry):
    dscp_to_tc_map: str | None = None
    dot1p_to_tc_map: str | None = None
    tc_to_pg_map: str | None = None
    tc_to_queue_map: str | None = None
    pfc_to_queue_map: str | None = None
    pfc_to_pg_map: str | None = None
    pfc_enable: _Priorities = frozenset()
    pfcwd_sw_enable: _Priorities = frozenset()
    scheduler: str | None = None


class _BufferPoolFields(_Entry):
    type: Literal["ingress", "egress", "both"]
    mode: Literal["static", "dynamic"]
    size: _Bytes
    xoff: _Bytes = 0


class _BufferProfileFields(_Entry):
    pool: str
    size: _Bytes
    dynamic_th: Annotated[int | None, _Between(-8, 7)] = None
    static_th: _OptionalBytes = None
    xon: _OptionalBytes = None
    xoff: _OptionalBytes = None
    xon_offset: _OptionalBytes = None


class _BufferRefFields(_Entry):
    """BUFFER_PG and BUFFER_QUEUE entries."""

    profile: str


class _WredFields(_Entry):
    ecn: _EcnMode = "ecn_none"
    wred_green_enable: _Flag = False
    green_min_threshold: _OptionalBytes = None
    green_max_threshold: _OptionalBytes = None
    green_drop_probability: Annotated[int | None, _Between(0, 100)] = None
    wred_yellow_enable: _Flag = False
    yellow_min_threshold: _OptionalBytes = None
    yellow_max_threshold: _OptionalBytes = None
    yellow_drop_probability: Annotated[int | None, _Between(0, 100)] = None
    wred_red_enable: _Flag = False
    red_min_threshold: _OptionalBytes = None
    red_max_threshold: _OptionalBytes = None
    red_drop_probability: Annotated[int | None, _Between(0, 100)] = None


class _SchedulerFields(_Entry):
    type: Literal["STRICT", "DWRR", "WRR"]
    weight: Annotated[int | None, _Between(1, 100)] = None
    priority: _OptionalBytes = None
    cir: _OptionalBytes = None  # bytes/s
    pir: _OptionalBytes = None
    meter_type: Literal["packets", "bytes"] | None = None


class _QueueFields(_Entry):
    scheduler: str | None = None
    wred_profile: str | None = None


class _PfcWdFields(_Entry):
    action: Literal["drop", "forward", "alert"] = "drop"
    detection_time: Annotated[int, _Between(100, 5000)] = 200
    restoration_time: Annotated[int, _Between(100, 60000)] = 200


class _PfcWdGlobalFields(_Entry):
    POLL_INTERVAL: Annotated[int, _Between(100, 1000)] = 200


_M = TypeVar("_M", bound=BaseModel)

# pydantic error type -> our one-line problem; {input} and the error's ctx are available
_PYDANTIC_PROBLEMS = {
    "extra_forbidden": "unknown field",
    "missing": "required field is missing",
    "literal_error": "must be {expected} (got {input})",
    "string_type": "must be a string (got {input})",
    "string_too_short": "must not be empty",
    "list_type": "must be a list (got {input})",
    "model_type": "must be a mapping (got {input})",
    "bool_type": "must be true or false (got {input})",
    "int_type": "must be an integer (got {input})",
    "float_type": "must be a number (got {input})",
    "greater_than": "must be greater than {gt} (got {input})",
    "greater_than_equal": "must be at least {ge} (got {input})",
    "less_than_equal": "must be at most {le} (got {input})",
    "finite_number": "must be a finite number (got {input})",
}


def pydantic_problem(error: ValidationError) -> tuple[str, str]:
    """(dotted field path, problem) of the first error, phrased as rocelab's one-line messages.

    Public so that other rocelab files validated with pydantic (nic.settings) word their errors
    the same way; the path is "" for a problem with the whole entry.
    """
    first = error.errors()[0]
    ctx = first.get("ctx", {})
    if first["type"] == "value_error":
        problem = str(ctx["error"])
    else:
        template = _PYDANTIC_PROBLEMS.get(first["type"], first["msg"])
        problem = template.format(input=brief(first.get("input")), **ctx)
    return ".".join(shown_key(str(step)) for step in first["loc"]), _one_line(problem)


def _validate(model: type[_M], fields: dict[str, Any]) -> _M:
    """Validate with *model*, turning the first pydantic error into an _Invalid."""
    try:
        return model.model_validate(fields)
    except ValidationError as e:
        where, problem = pydantic_problem(e)
        raise _Invalid(problem, where or None) from None


# ---- what has been accepted so far


# QoS tables whose entries other tables refer to by name -> the Qos attribute holding them
_QOS_NAMED = {
    "DSCP_TO_TC_MAP": "dscp_to_tc",
    "DOT1P_TO_TC_MAP": "dot1p_to_tc",
    "TC_TO_PRIORITY_GROUP_MAP": "tc_to_pg",
    "TC_TO_QUEUE_MAP": "tc_to_queue",
    "MAP_PFC_PRIORITY_TO_QUEUE": "pfc_priority_to_queue",
    "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP": "pfc_priority_to_pg",
    "SCHEDULER": "schedulers",
    "WRED_PROFILE": "wred_profiles",
    "BUFFER_POOL": "buffer_pools",
    "BUFFER_PROFILE": "buffer_profiles",
}


@dataclass
class _Draft:
    """The entries accepted so far; later tables check their references against them."""

    meta: _DeviceMetadata | None = None
    ports: dict[str, Port] = field(default_factory=dict)
    interfaces: dict[str, tuple[IPInterface, ...]] = field(default_factory=dict)
    loopbacks: dict[str, tuple[IPInterface, ...]] = field(default_factory=dict)
    vlans: dict[str, Vlan] = field(default_factory=dict)
    routes: dict[IPNetwork, StaticRoute] = field(default_factory=dict)
    qos: Qos = field(default_factory=Qos)  # its dicts are filled in place
    neighbors: dict[IPAddress, BgpNeighbor] = field(default_factory=dict)
    peer_ranges: dict[str, BgpPeerRange] = field(default_factory=dict)

    def finish(self, path: str) -> SwitchConfig:
        if self.meta is None:
            raise ConfigError(
                f"{path}: DEVICE_METADATA: the localhost entry (hostname, mac) is required"
            )
        meta = self.meta
        return SwitchConfig(
            path=path, hostname=meta.hostname, mac=meta.mac, type=meta.type, hwsku=meta.hwsku,
            buffer_model=meta.buffer_model, ports=self.ports, vlans=self.vlans,
            interfaces=self.interfaces, loopbacks=self.loopbacks,
            static_routes=tuple(self.routes.values()), qos=self.qos, bgp=self.bgp(path),
        )

    def bgp(self, path: str) -> Bgp | None:
        """The BGP speaker, when any session is configured: it needs the switch's AS."""
        if not self.neighbors and not self.peer_ranges:
            return None
        if self.meta.bgp_asn is None:
            table = "BGP_NEIGHBOR" if self.neighbors else "BGP_PEER_RANGE"
            raise ConfigError(f"{path}: DEVICE_METADATA|localhost: bgp_asn: required field is "
                              f"missing ({table} configures BGP sessions, which need this "
                              "switch's AS number)", "DEVICE_METADATA|localhost|bgp_asn")
        router_id = self.meta.bgp_router_id
        if router_id is None:  # Loopback0's IPv4 address, as bgpcfgd takes it
            router_id = next((a.ip for a in self.loopbacks.get("Loopback0", ())
                              if a.version == 4), None)
        if router_id is None and all(a.version == 6 for _, a in self.l3_addresses()):
            # FRR would take one of the switch's IPv4 addresses; with none its BGP
            # identifier is 0.0.0.0, which every peer refuses: no session would come up
            raise ConfigError(f"{path}: DEVICE_METADATA|localhost: bgp_router_id: required "
                              "field is missing (this switch has no IPv4 address to take "
                              "its 32-bit BGP router id from)",
                              "DEVICE_METADATA|localhost|bgp_router_id")
        return Bgp(self.meta.bgp_asn, router_id, self.neighbors, self.peer_ranges)

    def l3_addresses(self) -> list[tuple[str, IPInterface]]:
        """(interface, address) of every routed port, SVI and loopback accepted so far."""
        return [(name, a) for table in (self.interfaces, self.loopbacks)
                for name, addrs in table.items() for a in addrs] + [
                (vlan.name, a) for vlan in self.vlans.values() for a in vlan.addresses]

    def need_port(self, name: str) -> str:
        if name not in self.ports:
            raise _Invalid(f"port {name} is not in PORT")
        return name

    def need_vlan(self, name: str) -> str:
        if name not in self.vlans:
            raise _Invalid(f"VLAN {name} is not in VLAN")
        return name

    def ref(self, field_name: str, value: str, table: str) -> str:
        """Resolve a reference to a *table* entry; SONiC also writes it "[TABLE|name]"."""
        name = value
        if value.startswith("[") and value.endswith("]"):
            ref_table, _, name = value[1:-1].partition("|")
            if ref_table != table:
                raise _Invalid(f"{brief(value)} must refer to {table}", field_name)
        if name not in getattr(self.qos, _QOS_NAMED[table]):
            raise _Invalid(f"{brief(name)} is not in {table}", field_name)
        return name

    def refs(self, entry: BaseModel, tables: dict[str, str]) -> dict[str, str]:
        """Resolve the optional reference fields of *entry* ({field: table}) that are given."""
        given = entry.model_dump(include=set(tables), exclude_none=True)
        return {name: self.ref(name, value, tables[name]) for name, value in given.items()}


# ---- key shapes


def _is_named(name: str, prefix: str) -> bool:
    """``Ethernet8``-style names: prefix plus a number written the canonical way."""
    number = name.removeprefix(prefix)
    return (
        name.startswith(prefix) and number.isascii() and number.isdigit()
        and len(number) <= MAX_INT_DIGITS and number == str(int(number))
    )


def _name_and_address(key: str) -> tuple[str, IPInterface | None]:
    """``Ethernet0`` (L3 on) or ``Ethernet0|10.0.0.1/31`` / ``Ethernet0|fc00::1/126`` (an
    address on it)."""
    name, separator, address = key.partition("|")
    return name, _ip_interface(address) if separator else None


def _port_indices(draft: _Draft, key: str) -> list[tuple[str, int]]:
    """``Ethernet0|3`` or ``Ethernet0|0-2`` -> [(port, index), ...] for PGs and queues 0..7."""
    port, separator, indices = key.partition("|")
    if not separator:
        raise _Invalid("key must be Ethernet<N>|<index> or Ethernet<N>|<first>-<last>")
    draft.need_port(port)
    first, dash, last = indices.partition("-")
    low = _Between(0, 7)(first)
    high = _Between(0, 7)(last) if dash else low
    if low > high:
        raise _Invalid(f"range {brief(indices)} is backwards ({low} > {high})")
    return [(port, index) for index in range(low, high + 1)]


def _assign(target: dict[tuple[str, int], Any], keys: list[tuple[str, int]], value: object) -> None:
    """Overlapping range keys would make the result depend on JSON key order: refuse them."""
    for port, index in keys:
        if (port, index) in target:
            raise _Invalid(f"{port} index {index} is already set by another entry")
        target[(port, index)] = value


def _with_address(
    addresses: dict[str, tuple[IPInterface, ...]], name: str, address: IPInterface | None
) -> None:
    addresses[name] = addresses.get(name, ()) + ((address,) if address else ())


# ---- one parser per table: (draft, key, fields) -> None


def _device_metadata(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    if key != "localhost":
        raise _Invalid("only the 'localhost' entry is understood")
    draft.meta = _validate(_DeviceMetadata, fields)


def _port(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    if not _is_named(key, "Ethernet"):
        raise _Invalid("port names must be Ethernet<N>")
    entry = _validate(_PortFields, fields)
    draft.ports[key] = Port(key, entry.speed, entry.mtu, entry.admin_status == "up", entry.alias)


def _interface(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    port, address = _name_and_address(key)
    draft.need_port(port)
    _validate(_Empty, fields)
    _with_address(draft.interfaces, port, address)


def _loopback_interface(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    name, address = _name_and_address(key)
    if not _is_named(name, "Loopback"):
        raise _Invalid("loopback names must be Loopback<N>")
    _validate(_Empty, fields)
    _with_address(draft.loopbacks, name, address)


def _vlan(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    if not _is_named(key, "Vlan"):
        raise _Invalid("VLAN names must be Vlan<N>")
    entry = _validate(_VlanFields, fields)
    if entry.vlanid != int(key.removeprefix("Vlan")):
        raise _Invalid(f"{entry.vlanid} does not match the VLAN name {key}", "vlanid")
    with _in_field("members"):
        for port in entry.members:
            draft.need_port(port)
    draft.vlans[key] = Vlan(key, entry.vlanid)


def _vlan_member(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    vlan, separator, port = key.partition("|")
    if not separator:
        raise _Invalid("key must be Vlan<N>|Ethernet<M>")
    draft.need_vlan(vlan)
    draft.need_port(port)
    if port in draft.interfaces:
        raise _Invalid(f"port {port} is routed (INTERFACE|{port}); it cannot be a VLAN member too")
    mode = _validate(_VlanMemberFields, fields).tagging_mode
    if mode != "tagged":  # untagged and priority_tagged both make this the port's native VLAN
        for other in draft.vlans.values():
            if other.members.get(port, "tagged") != "tagged":
                raise _Invalid(f"port {port} is already untagged in {other.name}", "tagging_mode")
    draft.vlans[vlan].members[port] = mode


def _vlan_interface(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    name, address = _name_and_address(key)
    vlan = draft.vlans[draft.need_vlan(name)]
    _validate(_Empty, fields)
    if address:
        draft.vlans[name] = replace(vlan, addresses=vlan.addresses + (address,))


def _static_route(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    vrf, _, prefix_text = key.rpartition("|")
    if vrf not in ("", "default"):
        raise _Invalid(f"VRF {brief(vrf)} is not supported (only the default VRF)")
    prefix = _ip_network(prefix_text)
    if prefix in draft.routes:
        raise _Invalid(f"route {prefix} is already given by another entry")
    entry = _validate(_StaticRouteFields, fields)
    for hop in entry.nexthop:
        if hop.version != prefix.version:
            raise _Invalid(f"{hop} is IPv{hop.version}, the prefix {prefix} IPv{prefix.version}",
                           "nexthop")
    if not entry.nexthop and not entry.blackhole:
        raise _Invalid('needs a nexthop (or blackhole "true")')
    if entry.nexthop and entry.blackhole:
        raise _Invalid("a blackhole route takes no nexthop", "blackhole")
    if entry.ifname and len(entry.ifname) != len(entry.nexthop):
        count = f"{len(entry.ifname)} names for {len(entry.nexthop)} nexthops"
        raise _Invalid(f"{count}; give one name per nexthop", "ifname")
    for name in entry.ifname:
        if name not in draft.ports and name not in draft.vlans:
            raise _Invalid(f"{name} is not in PORT or VLAN", "ifname")
    draft.routes[prefix] = StaticRoute(
        prefix, entry.nexthop, entry.ifname, entry.distance, entry.blackhole
    )


def _bgp_neighbor(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    """A session runs over a directly connected subnet: rocelab runs no IGP that could
    carry it to a loopback, so a neighbour outside every INTERFACE and VLAN_INTERFACE subnet
    would never come up."""
    vrf, _, address_text = key.rpartition("|")
    if vrf not in ("", "default"):
        raise _Invalid(f"VRF {brief(vrf)} is not supported (only the default VRF)")
    address = _ip_address(address_text)
    entry = _validate(_BgpNeighborFields, fields)
    ours = draft.l3_addresses()
    if any(a.ip == address for _, a in ours):
        raise _Invalid(f"{address} is this switch's own address")
    link = [(name, a) for name, a in ours
            if address in a.network and a.network.prefixlen < a.max_prefixlen
            and not name.startswith("Loopback")]
    if not link:
        raise _Invalid(f"{address} is in no subnet of INTERFACE or VLAN_INTERFACE: no interface "
                       "leads to this neighbour (sessions must be directly connected)")
    if entry.local_addr is not None and entry.local_addr not in {a.ip for _, a in link}:
        raise _Invalid(f"{entry.local_addr} is not this switch's address on the subnet of "
                       f"{address} ({', '.join(f'{n} {a}' for n, a in link)})", "local_addr")
    admin = entry.admin_status or (draft.meta.default_bgp_status if draft.meta else "up")
    draft.neighbors[address] = BgpNeighbor(
        address, entry.asn, entry.name, entry.local_addr, admin == "up", entry.holdtime,
        entry.keepalive, entry.nhopself, entry.rrclient)


def _bgp_peer_range(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    entry = _validate(_BgpPeerRangeFields, fields)
    if not entry.ip_range:
        raise _Invalid("needs at least one prefix", "ip_range")
    if entry.src_address is not None and entry.src_address not in {
            a.ip for _, a in draft.l3_addresses()}:
        raise _Invalid(f"{entry.src_address} is not an address of this switch", "src_address")
    draft.peer_ranges[key] = BgpPeerRange(entry.name or key, entry.ip_range, entry.peer_asn,
                                          entry.src_address)


def _qos_map(table: str, highest_key: int) -> Callable[[_Draft, str, dict[str, Any]], None]:
    """A parser for a ``{"<key 0..highest_key>": "<value 0..7>"}`` map table."""

    def parse_map(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
        mapping: dict[int, int] = {}
        for source, target in fields.items():
            with _in_field(source):
                mapping[_Between(0, highest_key)(source)] = _Between(0, 7)(target)
        getattr(draft.qos, _QOS_NAMED[table])[key] = mapping

    return parse_map


# PORT_QOS_MAP field -> the table its name refers to (the PortQos attributes have these names)
_PORT_QOS_REFS = {
    "dscp_to_tc_map": "DSCP_TO_TC_MAP",
    "dot1p_to_tc_map": "DOT1P_TO_TC_MAP",
    "tc_to_pg_map": "TC_TO_PRIORITY_GROUP_MAP",
    "tc_to_queue_map": "TC_TO_QUEUE_MAP",
    "pfc_to_queue_map": "MAP_PFC_PRIORITY_TO_QUEUE",
    "pfc_to_pg_map": "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP",
    "scheduler": "SCHEDULER",
}


def _port_qos_map(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    if key != "global":
        draft.need_port(key)
    entry = _validate(_PortQosFields, fields)
    draft.qos.port_qos[key] = PortQos(
        **draft.refs(entry, _PORT_QOS_REFS),
        pfc_enable=entry.pfc_enable,
        pfcwd_sw_enable=entry.pfcwd_sw_enable,
    )


def _buffer_pool(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    entry = _validate(_BufferPoolFields, fields)
    draft.qos.buffer_pools[key] = BufferPool(key, entry.type, entry.mode, entry.size, entry.xoff)


def _buffer_profile(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    entry = _validate(_BufferProfileFields, fields)
    pool = draft.ref("pool", entry.pool, "BUFFER_POOL")
    if (entry.dynamic_th is None) == (entry.static_th is None):
        raise _Invalid("needs exactly one of dynamic_th and static_th")
    draft.qos.buffer_profiles[key] = BufferProfile(
        key, pool, entry.size, entry.dynamic_th, entry.static_th, entry.xon, entry.xoff, entry.xon_offset
    )


def _buffer_pg(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    keys = _port_indices(draft, key)
    profile = draft.ref("profile", _validate(_BufferRefFields, fields).profile, "BUFFER_PROFILE")
    _assign(draft.qos.buffer_pg, keys, profile)


def _buffer_queue(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    """An egress queue's profile: its pool must be an egress one (or ``both``), the buffer
    the queue's egress admission draws on."""
    keys = _port_indices(draft, key)
    profile = draft.ref("profile", _validate(_BufferRefFields, fields).profile, "BUFFER_PROFILE")
    pool = draft.qos.buffer_pools[draft.qos.buffer_profiles[profile].pool]
    if pool.type == "ingress":
        raise _Invalid(f"{profile} is in {pool.name}, an ingress pool: an egress queue needs "
                       "a profile of an egress pool", "profile")
    _assign(draft.qos.buffer_queue, keys, profile)


def _cable_length(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    """``CABLE_LENGTH|AZURE``: {"Ethernet0": "40m"}; the key's name does not matter."""
    for port, length in fields.items():
        with _in_field(port):
            draft.need_port(port)
            if port in draft.qos.cable_length_m:
                raise _Invalid("cable length is already set by another CABLE_LENGTH entry")
            if not isinstance(length, str) or not length.endswith("m"):
                raise _Invalid(f"{brief(length)} is not a length in metres like '40m'")
            draft.qos.cable_length_m[port] = _Between(0)(length.removesuffix("m"))


def _wred_color(entry: _WredFields, color: str) -> WredColor | None:
    """A color is configured when anything about it is given; it then needs both thresholds."""
    enable = getattr(entry, f"wred_{color}_enable")
    low = getattr(entry, f"{color}_min_threshold")
    high = getattr(entry, f"{color}_max_threshold")
    probability = getattr(entry, f"{color}_drop_probability")
    if not enable and low is None and high is None and probability is None:
        return None
    for name, value in ((f"{color}_min_threshold", low), (f"{color}_max_threshold", high)):
        if value is None:
            raise _Invalid(f"required when {color} WRED is configured", name)
    if low > high:
        problem = f"must be at least {color}_min_threshold ({low}), got {high}"
        raise _Invalid(problem, f"{color}_max_threshold")
    # SAI's default drop probability is 100 %
    return WredColor(enable, low, high, 100 if probability is None else probability)


def _wred_profile(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    entry = _validate(_WredFields, fields)
    colors = {color: _wred_color(entry, color) for color in ("green", "yellow", "red")}
    draft.qos.wred_profiles[key] = WredProfile(key, entry.ecn, **colors)


def _scheduler(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    entry = _validate(_SchedulerFields, fields)
    if entry.type != "STRICT" and entry.weight is None:
        raise _Invalid(f"required for {entry.type} scheduling", "weight")
    draft.qos.schedulers[key] = Scheduler(
        key, entry.type, entry.weight, entry.priority, entry.cir, entry.pir
    )


def _queue(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    keys = _port_indices(draft, key)
    entry = _validate(_QueueFields, fields)
    refs = draft.refs(entry, {"scheduler": "SCHEDULER", "wred_profile": "WRED_PROFILE"})
    _assign(draft.qos.queues, keys, QueueConfig(**refs))


def _pfc_wd(draft: _Draft, key: str, fields: dict[str, Any]) -> None:
    if key == "GLOBAL":
        interval = _validate(_PfcWdGlobalFields, fields).POLL_INTERVAL
        draft.qos = replace(draft.qos, pfc_wd_poll_interval_ms=interval)
        return
    draft.need_port(key)
    entry = _validate(_PfcWdFields, fields)
    draft.qos.pfc_wd[key] = PfcWatchdog(entry.action, entry.detection_time, entry.restoration_time)


# The tables rocelab models, in dependency order: each comes after every table it refers to.
_TABLES: dict[str, Callable[[_Draft, str, dict[str, Any]], None]] = {
    "DEVICE_METADATA": _device_metadata,
    "PORT": _port,
    "INTERFACE": _interface,
    "LOOPBACK_INTERFACE": _loopback_interface,
    "VLAN": _vlan,
    "VLAN_MEMBER": _vlan_member,
    "VLAN_INTERFACE": _vlan_interface,
    "STATIC_ROUTE": _static_route,
    "BGP_NEIGHBOR": _bgp_neighbor,
    "BGP_PEER_RANGE": _bgp_peer_range,
    "DSCP_TO_TC_MAP": _qos_map("DSCP_TO_TC_MAP", 63),
    "DOT1P_TO_TC_MAP": _qos_map("DOT1P_TO_TC_MAP", 7),
    "TC_TO_PRIORITY_GROUP_MAP": _qos_map("TC_TO_PRIORITY_GROUP_MAP", 7),
    "TC_TO_QUEUE_MAP": _qos_map("TC_TO_QUEUE_MAP", 7),
    "MAP_PFC_PRIORITY_TO_QUEUE": _qos_map("MAP_PFC_PRIORITY_TO_QUEUE", 7),
    "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP": _qos_map("PFC_PRIORITY_TO_PRIORITY_GROUP_MAP", 7),
    "SCHEDULER": _scheduler,
    "WRED_PROFILE": _wred_profile,
    "PORT_QOS_MAP": _port_qos_map,
    "BUFFER_POOL": _buffer_pool,
    "BUFFER_PROFILE": _buffer_profile,
    "BUFFER_PG": _buffer_pg,
    "BUFFER_QUEUE": _buffer_queue,
    "CABLE_LENGTH": _cable_length,
    "QUEUE": _queue,
    "PFC_WD": _pfc_wd,
}
