"""Test configs of our own, shaped as SONiC renders config_db.json for real platforms, for
the tests of what rocelab accepts and emulates of such configs (fabric/tables.py,
fabric/buffermgrd.py, fabric/model/port_buffers.py).

The table and field names and the key shapes are SONiC's schema, which rocelab implements;
every value (host names, MACs, pool sizes, thresholds, maps, lookup rows) is chosen here:

- ``traditional()``: a traditional-model Spectrum-style config: per-port buffer profile
  lists, separate ingress and egress pools (and a zero pool), only the lossy
  ``BUFFER_PG|<port>|0``, the lossless PGs left to buffermgrd;
- ``voq_line_card()``: a line card of a VoQ chassis (DNX-style): one pool of type ``both``
  with a shared headroom pool, ``QUEUE`` and ``BUFFER_QUEUE`` keyed by system port
  (``<host>|<asic>|<port>|<queue>``) for this card and two others, ``SYSTEM_PORT``;
- three ``pg_profile_lookup.ini`` tables, each in the layout of one kind of platform.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

Config = dict[str, Any]

JUMBO = 9216  # the largest frame a port takes
LOSSLESS = (3, 4)  # the PFC priorities, PGs and queues of the lossless classes
LOSSY_QUEUES = (0, 1, 2, 5, 6)
MAP = "ROCE"  # the name of every QoS map (and of the CABLE_LENGTH entry)


# ---- pg_profile_lookup.ini

def _kb(n: int) -> int:
    return -(-n // 1024) * 1024


def xoff_bytes(speed_mbps: int, cable_m: int) -> int:
    """Headroom after XOFF: two jumbo frames in flight, the cable's round trip (5 ns/m each
    way) and 4 us for the peer to act on the pause, rounded up to 1 KB."""
    return _kb(2 * JUMBO + speed_mbps * cable_m // 800 + speed_mbps // 2)


@dataclass(frozen=True)
class Row:
    speed: int  # Mb/s
    cable: int  # metres
    size: int
    xon: int
    xoff: int
    threshold: int
    xon_offset: int | None = None

    def words(self) -> list[str]:
        return [str(self.speed), f"{self.cable}m", str(self.size), str(self.xon), str(self.xoff),
                str(self.threshold)] + ([] if self.xon_offset is None else [str(self.xon_offset)])


@dataclass(frozen=True)
class Lookup:
    """A pg_profile_lookup.ini: a comment line, the column header, one line per row."""

    title: str
    rows: tuple[Row, ...]

    def lines(self) -> list[str]:
        columns = ["speed", "cable", "size", "xon", "xoff", "threshold"]
        if any(r.xon_offset is not None for r in self.rows):
            columns.append("xon_offset")
        table = [columns] + [r.words() for r in self.rows]
        widths = [max(len(line[i]) for line in table if i < len(line))
                  for i in range(len(columns))]
        cells = [" ".join(w.rjust(n) for w, n in zip(line, widths)) for line in table]
        return [f"# {self.title}", "# " + cells[0]] + ["  " + c for c in cells[1:]]

    @property
    def text(self) -> str:
        return "\n".join(self.lines()) + "\n"

    def row(self, speed: int, cable: int) -> Row:
        return next(r for r in self.rows if (r.speed, r.cable) == (speed, cable))

    def line(self, speed: int, cable: int) -> int:
        """The 1-based line number of the row for ``speed`` and ``cable``."""
        return 3 + self.rows.index(self.row(speed, cable))

    def without(self, speed: int, cable: int) -> Lookup:
        return replace(self, rows=tuple(r for r in self.rows if r is not self.row(speed, cable)))


SPEEDS = (100000, 400000)
CABLES = (5, 40, 300)
XON = 20480

# No shared headroom pool: each PG reserves xon + xoff; the threshold is a dynamic_th.
SPECTRUM_LOOKUP = Lookup("lossless PG profiles, headroom reserved per PG", tuple(
    Row(s, c, XON + xoff_bytes(s, c), XON, xoff_bytes(s, c), 0)
    for s in SPEEDS for c in CABLES))

# A VoQ platform: nothing reserved per PG (the headroom is the pool's shared xoff), a
# negative dynamic_th and an xon_offset.
VOQ_LOOKUP = Lookup("lossless PG profiles, shared headroom, VoQ", tuple(
    Row(s, c, 0, 4096, xoff_bytes(s, c), -6 if s < 400000 else -5, xoff_bytes(s, c) // 2)
    for s in SPEEDS for c in (40, 300)))

# A shared headroom pool and a reserved part of xon alone, for the project's leaf1 (100G).
SHARED_HEADROOM_LOOKUP = Lookup("lossless PG profiles, shared headroom", tuple(
    Row(100000, c, XON, XON, xoff_bytes(100000, c), -3, 4096) for c in CABLES))


# ---- config_db.json helpers

def _identity() -> dict[str, str]:
    return {str(i): str(i) for i in range(8)}


def _qos_maps(dscp: dict[int, int]) -> Config:
    """DSCP -> TC (unlisted DSCPs to TC 0), TC -> PG (the lossless TCs to their own PG, the
    rest to PG 0), identity PFC priority -> queue and TC -> queue."""
    return {
        "DSCP_TO_TC_MAP": {MAP: {str(d): str(dscp.get(d, 0)) for d in range(64)}},
        "TC_TO_PRIORITY_GROUP_MAP": {MAP: {str(tc): str(tc if tc in LOSSLESS else 0)
                                           for tc in range(8)}},
        "MAP_PFC_PRIORITY_TO_QUEUE": {MAP: _identity()},
        "TC_TO_QUEUE_MAP": {MAP: _identity()},
    }


def _port_qos(ports) -> Config:
    enabled = ",".join(map(str, LOSSLESS))
    return {"global": {"dscp_to_tc_map": MAP}, **{
        port: {"dscp_to_tc_map": MAP, "tc_to_queue_map": MAP, "tc_to_pg_map": MAP,
               "pfc_to_queue_map": MAP, "pfc_enable": enabled, "pfcwd_sw_enable": enabled}
        for port in ports}}


def _runs(queues) -> list[str]:
    """(0, 1, 2, 5, 6) -> ["0-2", "5-6"], as BUFFER_QUEUE keys write ranges."""
    runs: list[list[int]] = []
    for q in queues:
        if runs and runs[-1][-1] == q - 1:
            runs[-1].append(q)
        else:
            runs.append([q])
    return [f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs]


def _metadata(hostname: str, mac: str, **fields: str) -> Config:
    return {"localhost": {
        "hostname": hostname, "mac": mac, "region": "lab-east", "cloudtype": "Private",
        "docker_routing_config_mode": "separated", "synchronous_mode": "enable",
        "yang_config_validation": "disable", "buffer_model": "traditional",
        "default_bgp_status": "up", "default_pfcwd_status": "enable", "timezone": "UTC",
        **fields}}


def _port(i: int, speed: int, lanes: int, **fields: str) -> Config:
    return {"lanes": ",".join(str(i * lanes + n) for n in range(lanes)), "index": str(i + 1),
            "alias": f"etp{i + 1}", "speed": str(speed), "mtu": "9100", "tpid": "0x8100",
            "pfc_asym": "off", "admin_status": "up", "fec": "rs", **fields}


def _pool(type_: str, size: int, mode: str = "dynamic", **fields: str) -> Config:
    return {"type": type_, "mode": mode, "size": str(size), **fields}


def _profile(pool: str, size: int = 0, **threshold: str) -> Config:
    return {"pool": pool, "size": str(size), **threshold}


# ---- a traditional-model Spectrum-style config

# port -> (speed, cable metres, lanes)
TRADITIONAL_PORTS = {"Ethernet0": (400000, 300, 8), "Ethernet8": (100000, 40, 4)}


def _traditional() -> Config:
    ports = list(TRADITIONAL_PORTS)
    mib = 1 << 20
    return {
        "DEVICE_METADATA": _metadata("trad-leaf1", "02:52:4c:00:0a:01", hwsku="RL-TRAD-2P",
                                     platform="x86_64-rocelab_trad-r0", type="LeafRouter"),
        "PORT": {port: _port(i, speed, lanes, description=f"trad-spine{i + 1}:Ethernet0")
                 for i, (port, (speed, _, lanes)) in enumerate(TRADITIONAL_PORTS.items())},
        **_qos_maps({26: 3, 34: 4, 46: 5, 48: 6}),
        "PORT_QOS_MAP": _port_qos(ports),
        "PFC_WD": {"GLOBAL": {"POLL_INTERVAL": "200"}, **{
            port: {"action": "drop", "detection_time": "400", "restoration_time": "800",
                   "pfc_stat_history": "enable"} for port in ports}},
        "CABLE_LENGTH": {MAP: {port: f"{cable}m"
                               for port, (_, cable, _) in TRADITIONAL_PORTS.items()}},
        "BUFFER_POOL": {
            "ingress_zero_pool": _pool("ingress", 0, "static"),
            "ingress_lossless_pool": _pool("ingress", 8 * mib),
            "ingress_lossy_pool": _pool("ingress", 8 * mib),
            "egress_lossless_pool": _pool("egress", 24 * mib),
            "egress_lossy_pool": _pool("egress", 8 * mib)},
        "BUFFER_PROFILE": {
            "ingress_lossy_pg_zero_profile": _profile("ingress_zero_pool", static_th="0"),
            **{f"{direction}_{kind}_zero_profile": _profile(f"{direction}_{kind}_pool",
                                                            dynamic_th="-8")
               for direction in ("ingress", "egress") for kind in ("lossless", "lossy")},
            "ingress_lossless_profile": _profile("ingress_lossless_pool", dynamic_th="6"),
            "ingress_lossy_profile": _profile("ingress_lossy_pool", dynamic_th="1"),
            "egress_lossless_profile": _profile("egress_lossless_pool", dynamic_th="7"),
            "egress_lossy_profile": _profile("egress_lossy_pool", 12288, dynamic_th="3"),
            "q_lossy_profile": _profile("egress_lossy_pool", dynamic_th="1")},
        "BUFFER_PORT_INGRESS_PROFILE_LIST": {
            port: {"profile_list": "ingress_lossless_profile,ingress_lossy_profile"}
            for port in ports},
        "BUFFER_PORT_EGRESS_PROFILE_LIST": {
            port: {"profile_list": "egress_lossless_profile,egress_lossy_profile"}
            for port in ports},
        "BUFFER_PG": {f"{port}|0": {"profile": "ingress_lossy_profile"} for port in ports},
        "BUFFER_QUEUE": {
            f"{port}|{run}": {"profile": profile}
            for port in ports
            for queues, profile in ((LOSSLESS, "egress_lossless_profile"),
                                    (LOSSY_QUEUES, "q_lossy_profile"))
            for run in _runs(queues)},
    }


# ---- a VoQ chassis line card, one `both` pool

VOQ_HOST, VOQ_ASIC = "lc1", "asic0"
OTHER_CARDS = ("lc2", "lc3")
# port -> (speed, cable metres)
VOQ_PORTS = {"Ethernet0": (400000, 300), "Ethernet8": (100000, 300)}
BOTH_POOL_SIZE = 2_000_000_000
BOTH_POOL_XOFF = 300_000_000


def _voq_line_card() -> Config:
    ports = list(VOQ_PORTS)
    hosts = (VOQ_HOST, *OTHER_CARDS)

    def system_port(host: str) -> str:
        return f"{host}|{VOQ_ASIC}"

    return {
        "DEVICE_METADATA": _metadata(
            VOQ_HOST, "02:52:4c:00:0c:01", hwsku="RL-VOQ-LC", platform="x86_64-rocelab_voq-r0",
            type="SpineRouter", switch_type="voq", switch_id="2", max_cores="4", sub_role="",
            asic_name=VOQ_ASIC),
        "PORT": {port: _port(i, speed, 4, role="Ext", asic_port_name=f"{VOQ_ASIC}-p{i}",
                             core_id="0", core_port_id=str(i + 1), num_voq="8",
                             description=f"rl-t1-{i + 1}:Ethernet0")
                 for i, (port, (speed, _)) in enumerate(VOQ_PORTS.items())},
        "SYSTEM_PORT": {
            f"{system_port(host)}|{port}": {
                "system_port_id": str(10 * h + i + 1), "switch_id": str(2 * (h + 1)),
                "core_index": "0", "core_port_index": str(i + 1), "speed": str(speed),
                "num_voq": "8"}
            for h, host in enumerate(hosts)
            for i, (port, (speed, _)) in enumerate(VOQ_PORTS.items())},
        **_qos_maps({24: 3, 26: 4, 48: 6}),
        "PORT_QOS_MAP": _port_qos(ports),
        "SCHEDULER": {"lossy_dwrr": {"type": "DWRR", "weight": "20"},
                      "lossless_dwrr": {"type": "DWRR", "weight": "60"}},
        "WRED_PROFILE": {"ROCE_ECN": {"ecn": "ecn_all", **{
            field: value for color in ("green", "yellow", "red")
            for field, value in ((f"wred_{color}_enable", "true"),
                                 (f"{color}_min_threshold", "1000000"),
                                 (f"{color}_max_threshold", "6000000"),
                                 (f"{color}_drop_probability", "10"))}}},
        "QUEUE": {
            # this card's queues: the lossless ones with ECN, every one with a scheduler
            **{f"{system_port(VOQ_HOST)}|{port}|{q}": {"scheduler": "lossless_dwrr",
                                                       "wred_profile": "ROCE_ECN"}
               for port in ports for q in LOSSLESS},
            **{f"{system_port(VOQ_HOST)}|{port}|{q}": {"scheduler": "lossy_dwrr"}
               for port in ports for q in LOSSY_QUEUES},
            # the other cards' lossless queues, as every card's config carries them
            **{f"{system_port(host)}|{port}|{q}": {"wred_profile": "ROCE_ECN"}
               for host in OTHER_CARDS for port in ports for q in LOSSLESS}},
        "CABLE_LENGTH": {MAP: {port: f"{cable}m" for port, (_, cable) in VOQ_PORTS.items()}},
        "BUFFER_POOL": {"ingress_lossless_pool": _pool("both", BOTH_POOL_SIZE,
                                                       xoff=str(BOTH_POOL_XOFF))},
        "BUFFER_PROFILE": {
            "ingress_lossy_profile": _profile("ingress_lossless_pool", xon_offset="0",
                                              dynamic_th="0"),
            "egress_lossless_profile": _profile("ingress_lossless_pool", dynamic_th="-1"),
            "egress_lossy_profile": _profile("ingress_lossless_pool", dynamic_th="-3")},
        "BUFFER_PG": {f"{port}|0": {"profile": "ingress_lossy_profile"} for port in ports},
        "BUFFER_QUEUE": {
            f"{system_port(host)}|{port}|{run}": {"profile": profile}
            for queues, profile in ((LOSSLESS, "egress_lossless_profile"),
                                    (LOSSY_QUEUES, "egress_lossy_profile"))
            for run in _runs(queues)
            for host in hosts for port in ports},
    }


_TRADITIONAL = _traditional()
_VOQ_LINE_CARD = _voq_line_card()


def traditional() -> Config:
    """trad-leaf1, traditional buffer model: TRADITIONAL_PORTS (400G on 300 m, 100G on
    40 m), profile lists, no lossless BUFFER_PG."""
    return copy.deepcopy(_TRADITIONAL)


def voq_line_card() -> Config:
    """Line card lc1 (asic0) of a VoQ chassis with lc2 and lc3: VOQ_PORTS, one pool of type
    ``both``."""
    return copy.deepcopy(_VOQ_LINE_CARD)
