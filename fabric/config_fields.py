"""config_db.json field schemas: value parsers and one pydantic model per SONiC entry type.

config_db.json writes numbers, booleans and lists as strings ("9100", "true", "3,4"); the
parsers here turn them into typed values and the models name every field an entry may have,
so an unknown field or a bad value is refused. A problem is raised as ``Invalid`` (problem,
field); ``fabric.config_load`` adds the file, table and key to make the one-line message.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from ipaddress import IPv4Address, ip_address, ip_interface
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import core_schema

from .config import IPAddress, IPInterface, IPNetwork, TaggingMode
from .userinput import MAX_INT_DIGITS, brief, shown_key


def one_line(message: str) -> str:
    """Keys come from the file; a stray newline in one must not split the message."""
    return message.replace("\n", "\\n")


class Invalid(ValueError):
    """One problem in one entry; ``config_load.parse`` adds the file, table and key.

    A ValueError, so the pydantic validators below can raise it too.
    """

    def __init__(self, problem: str, field: str | None = None):
        super().__init__(problem)
        self.problem = problem
        self.field = field

    def message(self, path: str, where: str) -> str:
        parts = [path, where, *([self.field] if self.field else []), self.problem]
        return one_line(": ".join(parts))


# ---- value types: config_db.json writes every number as a string ("9100")


def _integer(value: object) -> int:
    """A config_db integer: "9100" as SONiC writes it, or a plain JSON 9100."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.removeprefix("-").isdigit():
        digits = len(value.removeprefix("-"))
        if digits > MAX_INT_DIGITS:
            raise Invalid(f"an integer of {digits} digits is out of range")
        return int(value)
    raise Invalid(f"{brief(value)} is not an integer")


@dataclass(frozen=True)
class Between:
    """``Annotated[int, Between(lo, hi)]``: an integer in lo..hi (no upper bound if hi is None).

    Also callable on its own, for values that are not pydantic fields (map entries, key indices).
    """

    lo: int
    hi: int | None = None

    def __call__(self, value: object) -> int:
        number = _integer(value)
        if self.hi is None and number < self.lo:
            raise Invalid(f"must be at least {self.lo} (got {number})")
        if self.hi is not None and not self.lo <= number <= self.hi:
            raise Invalid(f"must be between {self.lo} and {self.hi} (got {number})")
        return number

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(self, handler(source))


def _flag(value: object) -> bool:
    """SONiC booleans are the strings "true"/"false"; pydantic's lax bool would take "yes", "1"..."""
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise Invalid(f'must be "true" or "false" (got {brief(value)})')


def _mac(value: str) -> str:
    """Every router interface sends from the system MAC, so it must be a unicast address."""
    octets = value.split(":")
    if len(octets) != 6 or not all(len(o) == 2 and set(o) <= set(string.hexdigits) for o in octets):
        raise Invalid(f"{brief(value)} is not a MAC address like 02:52:4c:00:01:01")
    if int(octets[0], 16) & 1:
        raise Invalid(f"{value} is a multicast address; the system MAC must be unicast")
    return value.lower()


def _comma_list(value: object) -> list[str]:
    """SONiC's list-in-a-string form: "10.0.0.0,10.0.0.2"; "" is the empty list."""
    if not isinstance(value, str):
        raise Invalid(f"must be a comma-separated string (got {brief(value)})")
    return [item.strip() for item in value.split(",")] if value else []


def _priorities(value: object) -> frozenset[int]:
    """pfc_enable / pfcwd_sw_enable: "3,4" (a lone JSON 3 is fine too)."""
    items = [value] if isinstance(value, int) else _comma_list(value)
    return frozenset(Between(0, 7)(item) for item in items)


def checked_ip_address(text: str) -> IPAddress:
    """A next hop of either family; the route's prefix decides which one it must be."""
    try:
        return ip_address(text)
    except ValueError:
        raise Invalid(f"{brief(text)} is not an IPv4 or IPv6 address") from None


def checked_ip_interface(text: str) -> IPInterface:
    """An address with its prefix length, as in ``INTERFACE|Ethernet0|10.0.0.1/31`` or
    ``INTERFACE|Ethernet0|fc00::1/126``."""
    if "/" not in text:
        raise Invalid(f"{brief(text)} needs a prefix length (a.b.c.d/len or x:y::z/len)")
    try:
        return ip_interface(text)
    except ValueError:
        raise Invalid(f"{brief(text)} is not an IPv4 or IPv6 address with a prefix length") \
            from None


def _router_id(text: str) -> IPv4Address:
    """bgp_router_id: 32 bits written as an IPv4 address, whatever the sessions' family."""
    try:
        return IPv4Address(text)
    except ValueError:
        raise Invalid(f"{brief(text)} is not an IPv4 address (a BGP router id is 32 bits, "
                       "written as one)") from None


def checked_ip_network(text: str) -> IPNetwork:
    """A route prefix; host bits set usually means a typo, so say which network was meant."""
    interface = checked_ip_interface(text)
    if interface.ip != interface.network.network_address:
        raise Invalid(f"{text} has host bits set (did you mean {interface.network}?)")
    return interface.network


MAX_ASN = 2**32 - 1  # 4-byte AS numbers (RFC 6793)
# 256 TiB: past any switch's buffer, and a sum of a few such counts stays within the 64-bit
# integers the compiled build keeps them in (compiled.py)
MAX_BYTES = 2**48
_Bytes = Annotated[int, Between(0, MAX_BYTES)]
_OptionalBytes = Annotated[int | None, Between(0, MAX_BYTES)]
_Flag = Annotated[bool, BeforeValidator(_flag)]
_OptionalFlag = Annotated[bool | None, BeforeValidator(_flag)]
_OnOff = Literal["on", "off"] | None
# BGP_NEIGHBOR's nhopself/rrclient: SONiC writes "0"/"1"
_Flag01 = Annotated[bool, BeforeValidator(lambda v: _flag({"0": "false", "1": "true"}.get(v, v)))]
_Priorities = Annotated[frozenset[int], BeforeValidator(_priorities)]
_Nexthops = Annotated[
    tuple[IPAddress, ...],
    BeforeValidator(lambda v: [checked_ip_address(a) for a in _comma_list(v)]),
]
_Names = Annotated[tuple[str, ...], BeforeValidator(_comma_list)]
_Lanes = Annotated[tuple[int, ...],
                   BeforeValidator(lambda v: [Between(0)(lane) for lane in _comma_list(v)])]
_EcnMode = Literal["ecn_none", "ecn_green", "ecn_yellow", "ecn_red", "ecn_green_yellow",
                  "ecn_green_red", "ecn_yellow_red", "ecn_all"]


# ---- one pydantic model per entry type: field names and types exactly as SONiC writes them


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Empty(_Entry):
    """INTERFACE-style entries: the key says it all; any field is one we do not model."""


def _refused_but(allowed: tuple[str, ...], why: str) -> AfterValidator:
    """A field accepted only at the values that leave the data plane as rocelab emulates it;
    any other valid value is refused, saying what it would change (``why``)."""

    def check(value: str | None) -> str | None:
        if value is not None and value not in allowed:
            only = f"; only {' or '.join(map(repr, allowed))} is accepted" if allowed else ""
            raise Invalid(f"{brief(value)} is not emulated ({why}){only}")
        return value

    return AfterValidator(check)


class DeviceMetadata(_Entry):
    """The fields bar hostname, mac, buffer_model and the BGP ones are accepted, not
    emulated: ``fabric.tables.NOT_EMULATED_FIELDS`` says why for each."""

    hostname: str = Field(min_length=1)
    mac: Annotated[str, AfterValidator(_mac)]
    hwsku: str = ""
    type: str = ""
    platform: str = ""
    buffer_model: Literal["traditional", "dynamic"] = "traditional"
    default_pfcwd_status: Literal["enable", "disable"] = "disable"
    bgp_asn: Annotated[int | None, Between(1, MAX_ASN)] = None
    bgp_router_id: Annotated[IPv4Address | None, BeforeValidator(_router_id)] = None
    default_bgp_status: Literal["up", "down"] = "up"
    deployment_id: str | None = None
    docker_routing_config_mode: str | None = None
    frr_mgmt_framework_config: str | None = None
    region: str | None = None
    cloudtype: str | None = None
    subtype: str | None = None
    synchronous_mode: str | None = None
    yang_config_validation: str | None = None
    timezone: str | None = None
    # a chassis or multi-ASIC switch (sonic-device_metadata.yang; minigraph.py writes them)
    switch_type: Literal["npu", "voq", "chassis-packet", "fabric", "dpu", "dummy-sup"] = "npu"
    switch_id: Annotated[int | None, Between(0, 65535)] = None
    max_cores: Annotated[int | None, Between(0, 255)] = None
    asic_name: str | None = None
    asic_id: str | None = None
    sub_role: str | None = None
    chassis_hostname: str | None = None
    cluster: str | None = None
    slice_type: str | None = None
    resource_type: str | None = None
    downstream_subrole: str | None = None
    rack_mgmt_map: str | None = None
    storage_device: _OptionalFlag = None
    peer_switch: str | None = None
    dhcp_server: Literal["enabled", "disabled"] | None = None
    suppress_fib_pending: Literal["enabled", "disabled"] | None = Field(
        None, alias="suppress-fib-pending")


class BgpNeighborFields(_Entry):
    asn: Annotated[int, Between(1, MAX_ASN)]
    name: str = ""
    local_addr: Annotated[IPAddress | None, BeforeValidator(checked_ip_address)] = None
    admin_status: Literal["up", "down"] | None = None  # None: DEVICE_METADATA default_bgp_status
    holdtime: Annotated[int | None, Between(0, 65535)] = None
    keepalive: Annotated[int | None, Between(0, 65535)] = None
    nhopself: _Flag01 = False
    rrclient: _Flag01 = False


class BgpPeerRangeFields(_Entry):
    ip_range: Annotated[
        tuple[IPNetwork, ...],
        BeforeValidator(lambda v: [checked_ip_network(p) for p in _comma_list(v)]),
    ]
    name: str = ""
    peer_asn: Annotated[int | None, Between(1, MAX_ASN)] = None
    src_address: Annotated[IPAddress | None, BeforeValidator(checked_ip_address)] = None


class PortFields(_Entry):
    """speed, mtu and admin_status are emulated; the rest are accepted, not emulated
    (``fabric.tables.NOT_EMULATED_FIELDS``), or refused where a value would change the data
    plane. Values as sonic-port.yang allows them."""

    speed: Annotated[int, Between(1)]  # Mb/s
    mtu: Annotated[int, Between(68, 9216)] = 9100
    admin_status: Literal["up", "down"] = "up"
    alias: str = ""
    lanes: _Lanes = ()
    index: _OptionalBytes = None
    fec: Literal["rs", "fc", "none", "auto"] | None = None
    autoneg: _OnOff = None
    description: str | None = None
    subport: Annotated[int | None, Between(0, 8)] = None
    link_training: _OnOff = None
    adv_speeds: str | None = None
    interface_type: str | None = None
    adv_interface_types: str | None = None
    fast_linkup: _OptionalFlag = None
    dom_polling: Literal["enabled", "disabled"] | None = None
    tx_power: str | None = None
    laser_freq: Annotated[int | None, Between(-(2**31), 2**31 - 1)] = None
    tpid: Annotated[Literal["0x8100", "0x9100", "0x9200", "0x88a8", "0x88A8"] | None,
                    _refused_but(("0x8100",), "VLAN tags of another EtherType")] = None
    pfc_asym: _OnOff = None
    mode: Literal["routed", "access", "trunk"] | None = None
    role: Literal["Ext", "Int", "Inb", "Rec", "Dpc"] | None = None
    asic_port_name: str | None = None
    core_id: str | None = None
    core_port_id: str | None = None
    num_voq: str | None = None
    dhcp_rate_limit: _OptionalBytes = None
    mux_cable: Annotated[Literal["true", "false"] | None,
                         _refused_but(("false",), "a dual-ToR mux cable")] = None
    macsec: Annotated[str | None, _refused_but((), "MACsec: frames would cross the wire "
                                               "in clear")] = None


class VlanFields(_Entry):
    vlanid: Annotated[int, Between(2, 4094)]
    members: list[str] = []  # VLAN_MEMBER is authoritative; only checked to name ports


class VlanMemberFields(_Entry):
    tagging_mode: TaggingMode


class StaticRouteFields(_Entry):
    nexthop: _Nexthops = ()
    ifname: _Names = ()
    distance: Annotated[int, Between(0, 255)] = 1
    blackhole: _Flag = False


class PortQosFields(_Entry):
    dscp_to_tc_map: str | None = None
    dot1p_to_tc_map: str | None = None
    tc_to_pg_map: str | None = None
    tc_to_queue_map: str | None = None
    pfc_to_queue_map: str | None = None
    pfc_to_pg_map: str | None = None
    pfc_enable: _Priorities = frozenset()
    pfcwd_sw_enable: _Priorities = frozenset()
    scheduler: str | None = None


class BufferPoolFields(_Entry):
    type: Literal["ingress", "egress", "both"]
    mode: Literal["static", "dynamic"]
    size: _Bytes
    xoff: _Bytes = 0


class BufferProfileFields(_Entry):
    pool: str
    size: _Bytes
    dynamic_th: Annotated[int | None, Between(-8, 7)] = None
    static_th: _OptionalBytes = None
    xon: _OptionalBytes = None
    xoff: _OptionalBytes = None
    xon_offset: _OptionalBytes = None


class BufferRefFields(_Entry):
    """BUFFER_PG and BUFFER_QUEUE entries."""

    profile: str


class ProfileListFields(_Entry):
    """BUFFER_PORT_INGRESS_PROFILE_LIST and BUFFER_PORT_EGRESS_PROFILE_LIST entries."""

    profile_list: _Names


class WredFields(_Entry):
    ecn: _EcnMode = "ecn_none"
    wred_green_enable: _Flag = False
    green_min_threshold: _OptionalBytes = None
    green_max_threshold: _OptionalBytes = None
    green_drop_probability: Annotated[int | None, Between(0, 100)] = None
    wred_yellow_enable: _Flag = False
    yellow_min_threshold: _OptionalBytes = None
    yellow_max_threshold: _OptionalBytes = None
    yellow_drop_probability: Annotated[int | None, Between(0, 100)] = None
    wred_red_enable: _Flag = False
    red_min_threshold: _OptionalBytes = None
    red_max_threshold: _OptionalBytes = None
    red_drop_probability: Annotated[int | None, Between(0, 100)] = None


class SchedulerFields(_Entry):
    type: Literal["STRICT", "DWRR", "WRR"]
    weight: Annotated[int | None, Between(1, 100)] = None
    priority: _OptionalBytes = None
    cir: _OptionalBytes = None  # bytes/s
    pir: _OptionalBytes = None
    meter_type: Literal["packets", "bytes"] | None = None


class QueueFields(_Entry):
    scheduler: str | None = None
    wred_profile: str | None = None


class PfcWdFields(_Entry):
    action: Literal["drop", "forward", "alert"] = "drop"
    detection_time: Annotated[int, Between(100, 5000)] = 200
    restoration_time: Annotated[int, Between(100, 60000)] = 200
    pfc_stat_history: Literal["enable", "disable"] | None = None  # written by pfcwd


class PfcWdGlobalFields(_Entry):
    POLL_INTERVAL: Annotated[int, Between(100, 1000)] = 200
    # `pfcwd big_red_switch enable|disable`: enable makes every watchdog queue drop and
    # ignore PFC at once (swss pfcwdsworch), which the watchdog model does not do
    BIG_RED_SWITCH: Annotated[Literal["enable", "disable"] | None, _refused_but(
        ("disable",), "every PFC watchdog queue would drop and ignore PFC")] = None


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
    return ".".join(shown_key(str(step)) for step in first["loc"]), one_line(problem)


def validate(model: type[_M], fields: dict[str, Any]) -> _M:
    """Validate with *model*, turning the first pydantic error into an Invalid."""
    try:
        return model.model_validate(fields)
    except ValidationError as e:
        where, problem = pydantic_problem(e)
        raise Invalid(problem, where or None) from None
