"""QoS facts computed from a validated switch config: which map a port uses, where a DSCP or
PCP lands, and how much headroom SONiC would give a lossless PG.

Shared by the switch model (classification, buffers), the live checks (``checks.roce``) and
the static lint (``checks.lint``), so all read a config the same way. Pure: no I/O.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .config import PortQos, Qos, SwitchConfig

GLOBAL = "global"  # the PORT_QOS_MAP key every port falls back to, field by field

# IEEE 802.3 31B.3.7 peer response time in pause quanta (512 bit times), per port speed in
# Mb/s, as SONiC's buffer_headroom_*.lua tabulates it
PAUSE_QUANTA = {100: 1, 1000: 2, 10000: 67, 25000: 80, 40000: 118, 50000: 147,
                100000: 394, 200000: 453, 400000: 905, 800000: 905}
SPEED_OF_LIGHT_IN_CABLE = 198_000_000  # m/s, SONiC's constant


def bound(qos: Qos, port: str, field: str) -> tuple[str | None, str]:
    """(map name, the PORT_QOS_MAP key it came from) for ``field`` on ``port``:
    ``PORT_QOS_MAP|<port>``'s, else ``PORT_QOS_MAP|global``'s (None, "" if neither)."""
    for key in (port, GLOBAL):
        entry = qos.port_qos.get(key)
        name = getattr(entry, field, None) if entry is not None else None
        if name:
            return name, key
    return None, ""


def port_setting(qos: Qos, port: str, field: str) -> tuple[frozenset[int], str]:
    """(priorities, source key) of a priority-list field (``pfc_enable``,
    ``pfcwd_sw_enable``) on ``port``, with the same fallback to ``global`` as the maps."""
    for key in (port, GLOBAL):
        entry: PortQos | None = qos.port_qos.get(key)
        if entry is not None and getattr(entry, field):
            return getattr(entry, field), key
    return frozenset(), ""


def priorities_of_pg(qos: Qos, port: str, pg: int) -> list[int]:
    """The priorities ``pg`` of ``port`` sends PFC for: those its ``pfc_to_pg_map`` (the port's
    own or global's) sends to that PG; priority p -> PG p without a map."""
    name, _ = bound(qos, port, "pfc_to_pg_map")
    if name is None:
        return [pg]
    return [prio for prio, target in qos.pfc_priority_to_pg[name].items() if target == pg]


def qos_ports(config: SwitchConfig) -> list[str]:
    """The ports QoS applies to: every port with a PORT_QOS_MAP entry, or every port when
    there is a global one. Sorted by port number, as SONiC lists them."""
    ports = (config.ports if GLOBAL in config.qos.port_qos
             else [p for p in config.qos.port_qos if p in config.ports])
    return sorted(ports, key=_port_order)


def _port_order(port: str) -> tuple[int, str]:
    """Front-panel ports by number, then a chassis card's internal ports by name."""
    number = port.removeprefix("Ethernet")
    return (int(number), "") if number.isdigit() else (1 << 30, port)


def _through(config: SwitchConfig, port: str, field: str, tables: dict[str, dict[int, int]],
             key: int) -> tuple[int, str | None]:
    """(value, map name) of ``key`` through the map ``field`` binds on ``port``; 0 when no
    map is bound or the map leaves ``key`` out (SAI's default for every QoS map)."""
    name, _ = bound(config.qos, port, field)
    return (tables[name].get(key, 0) if name else 0), name


def tc_of_dscp(config: SwitchConfig, port: str, dscp: int) -> tuple[int, str | None]:
    """(TC, map name) for an IP packet with ``dscp`` arriving on ``port``."""
    return _through(config, port, "dscp_to_tc_map", config.qos.dscp_to_tc, dscp)


def tc_of_pcp(config: SwitchConfig, port: str, pcp: int) -> tuple[int, str | None]:
    """(TC, map name) for a frame with 802.1p priority ``pcp``."""
    return _through(config, port, "dot1p_to_tc_map", config.qos.dot1p_to_tc, pcp)


def pg_of_tc(config: SwitchConfig, port: str, tc: int) -> tuple[int, str | None]:
    """(ingress PG, map name) for ``tc`` on ``port``."""
    return _through(config, port, "tc_to_pg_map", config.qos.tc_to_pg, tc)


def queue_of_tc(config: SwitchConfig, port: str, tc: int) -> tuple[int, str | None]:
    """(egress queue, map name) for ``tc`` leaving by ``port``."""
    return _through(config, port, "tc_to_queue_map", config.qos.tc_to_queue, tc)


def pauses_sender(config: SwitchConfig, port: str, tc: int) -> bool:
    """Whether ``tc`` arriving on ``port`` can pause its sender: PFC on for the TC, and the
    PG it fills has a ``BUFFER_PG`` profile with an XOFF threshold."""
    enabled, _ = port_setting(config.qos, port, "pfc_enable")
    profile = config.qos.buffer_pg.get((port, pg_of_tc(config, port, tc)[0]))
    return tc in enabled and profile is not None \
        and config.qos.buffer_profiles[profile].xoff is not None


# --------------------------------------------------------------------------- headroom


@dataclass(frozen=True)
class HeadroomParams:
    """The ASIC and traffic constants of SONiC's headroom calculation.

    Defaults are SONiC-VS's ASIC_TABLE values (cell 128 B, pipeline latency 18 KB, MAC/PHY
    delay 0.8 KB; SONiC multiplies these KB figures by 1024). ``lossless_mtu`` is SONiC's
    LOSSLESS_TRAFFIC_PATTERN|mtu, the largest lossless packet: 4096, RoCE's largest path MTU
    (SONiC's own default, 1024, is smaller than a full RoCE frame). ``small_packet_pct`` is 0:
    RoCE bulk transfers are full-MTU frames, so cells are not wasted on small packets.
    """

    cell_size: int = 128
    pipeline_latency: float = 18 * 1024
    mac_phy_delay: float = 0.8 * 1024
    lossless_mtu: int = 4096
    small_packet_pct: int = 0


@dataclass(frozen=True)
class Headroom:
    """What a lossless PG needs: bytes after XOFF (xoff), above XON (xon), reserved (size)."""

    xon: int
    xoff: int
    size: int
    why: str  # the terms, for a finding


def _roundup_1024(value: float) -> int:
    return math.ceil(value / 1024) * 1024


def required_headroom(speed_mbps: int, cable_m: int, port_mtu: int,
                      params: HeadroomParams = HeadroomParams(),
                      shared_pool: bool = False) -> Headroom:
    """SONiC's dynamic headroom (buffer_headroom_*.lua): the bytes that still arrive after the
    PG sends XOFF, i.e. a frame already leaving the peer (port MTU), the round trip on the
    cable, MAC/PHY delay and the peer's response time, scaled by cell occupancy, plus the
    lossless frame in progress. Raises KeyError for a speed with no pause-quanta figure."""
    peer_response = PAUSE_QUANTA[speed_mbps] * 512 / 8
    bytes_on_cable = 2 * cable_m * speed_mbps * 1_000_000 / SPEED_OF_LIGHT_IN_CABLE / 8
    cell = params.cell_size
    factor = math.ceil(cell / 64 if cell > 128 else 2 * cell / (1 + cell))
    share = params.small_packet_pct
    occupancy = (100 - share + share * factor) / 100
    propagation = port_mtu + bytes_on_cable + params.mac_phy_delay + peer_response
    xoff = _roundup_1024(params.lossless_mtu + propagation * occupancy)
    xon = _roundup_1024(params.pipeline_latency)
    why = (f"lossless MTU {params.lossless_mtu} + (port MTU {port_mtu} + cable "
           f"{bytes_on_cable:.0f} + MAC/PHY {params.mac_phy_delay:.0f} + peer response "
           f"{peer_response:.0f}) x cell occupancy {occupancy:g}, rounded up to 1 KB")
    return Headroom(xon, xoff, xon if shared_pool else xon + xoff, why)
