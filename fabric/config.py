"""The typed configuration of one emulated switch: what a SONiC config_db.json means here.

The dataclasses the switch model, agent, FRR rendering, labs and checks read, the
``ConfigError`` every config problem is reported as, and the ECN marking points (which wire
is which port is ``fabric.portmap``'s to say). No parsing happens here:
``fabric.config_load`` reads and validates a config_db.json into a ``SwitchConfig``, so these
types stay importable without the loader and its pydantic schemas.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import (
    IPv4Address, IPv4Interface, IPv4Network, IPv6Address, IPv6Interface, IPv6Network,
)
from typing import Literal

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
MAX_TC = 15  # traffic classes 0..15, as SONiC's YANG allows; PGs and queues are 0..7


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
    lanes: tuple[int, ...] = ()  # the ASIC lanes: which wire the port is on (fabric.portmap)


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
    # BUFFER_PORT_INGRESS_PROFILE_LIST / _EGRESS_: port -> its profiles, one per pool
    port_ingress_profiles: dict[str, tuple[str, ...]] = field(default_factory=dict)
    port_egress_profiles: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class DerivedPgs:
    """Lossless PGs of one port that the config leaves out and SONiC's buffermgrd creates at
    boot in the traditional buffer model, from the platform's pg_profile_lookup.ini
    (``fabric.buffermgrd``): ``profile`` names what they got, or is None when buffermgrd
    could not make them and they stay lossy; ``why`` says which lookup row, or why none."""

    port: str
    pgs: tuple[int, ...]
    profile: str | None
    why: str

    @property
    def key(self) -> str:
        """The BUFFER_PG key buffermgrd writes: ``Ethernet0|3-4`` (or ``|3``)."""
        first, last = self.pgs[0], self.pgs[-1]
        return f"{self.port}|{first}" + (f"-{last}" if last != first else "")

    @property
    def note(self) -> str:
        """One line: ``BUFFER_PG|Ethernet0|3-4: <profile> from <row>``, or ``...: stays lossy:
        <why>``."""
        if self.profile is None:
            return f"BUFFER_PG|{self.key}: stays lossy: {self.why}"
        return f"BUFFER_PG|{self.key}: {self.profile} from {self.why}"


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
    pg_lookup: str = ""  # the pg_profile_lookup.ini buffermgrd read at boot ("": none)
    derived_pgs: tuple[DerivedPgs, ...] = ()  # what buffermgrd made (or could not) from it
    # VoQ chassis: the other line cards ("host|asic") whose system ports QUEUE and
    # BUFFER_QUEUE name; accepted, not emulated (the chassis fabric is not)
    other_line_cards: tuple[str, ...] = ()
