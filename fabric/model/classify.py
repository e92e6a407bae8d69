"""Ingress classification: the traffic class (TC) and priority group (PG) of a frame, and
the egress queue its TC selects. The first stage of the lossless pipeline.

The maps come from ``PORT_QOS_MAP``, resolved per port and per field: the port's own entry
(``PORT_QOS_MAP|Ethernet8``) wins, a field it leaves out is taken from
``PORT_QOS_MAP|global``, and a field neither names is unbound. Then, as a SAI switch does:

- an IPv4 or IPv6 frame (EtherType after any 802.1Q tag) on a port with a
  ``dscp_to_tc_map`` takes its TC from its DSCP (how RoCEv2 is classified);
- any other frame (RoCEv1 EtherType 0x8915, ARP, ..., or IP on a port without a DSCP map)
  takes its TC from the ``dot1p_to_tc_map`` and its PCP: the PCP of its 802.1Q or priority
  (VID 0) tag, 0 when it arrived untagged (how RoCEv1 is classified);
- no applicable map, or a value the bound map leaves out: TC 0 (SAI's port default TC);
- PG = ``tc_to_pg_map[TC]`` of the ingress port; the egress queue = ``tc_to_queue_map[TC]``
  of the egress port (queues belong to the port they drain into; SAI binds the map there).
  A TC the map leaves out, or no map, means PG 0 and queue 0: SAI's "default no map, i.e.
  all packets to queue 0" (saiport.h), not TC = queue.

Frames the switch originates (ARP, ICMP) are not classified: they carry ``CPU_CLASS``,
TC 7 with no ingress PG, and leave on queue 7 whatever the maps say, so control traffic
never queues behind (or is paused with) the data classes.

Per port everything is precomputed into lists (``PortClassifier``): the per-packet cost
is an index into a 64-entry DSCP list or a 16-entry PCP/DEI list, giving a shared
``(tc, pg)`` tuple, and one index into the egress port's 8-entry TC -> queue list.
``Switch._ingress`` inlines that lookup; ``PortClassifier.classify`` is the same rule
written out for tests, debugging and ``Switch.classify``.
"""
from __future__ import annotations

from typing import NamedTuple

from ..config import MAX_TC, Qos
from .counters import NUM_PGS, NUM_QUEUES  # noqa: F401  (re-exported)
from .frames import ETH_P_8021Q, ETH_P_IPV4, ETH_P_IPV6
from ..qos import bound

NUM_TCS = MAX_TC + 1  # traffic classes (SONiC's range); priority groups and queues are 0..7

Classification = tuple  # (tc, pg): what travels with a frame from ingress to egress

CPU_TC = 7
CPU_QUEUE = 7
CPU_CLASS: Classification = (CPU_TC, None)  # originated by the switch: no ingress PG


# The PORT_QOS_MAP fields classification uses -> the Qos attribute holding those maps.
_FIELDS = {
    "dscp_to_tc_map": "dscp_to_tc",
    "dot1p_to_tc_map": "dot1p_to_tc",
    "tc_to_pg_map": "tc_to_pg",
    "tc_to_queue_map": "tc_to_queue",
}


class BoundMap(NamedTuple):
    """One resolved PORT_QOS_MAP field: the map's name, where the binding came from
    (the port's own entry or ``global``) and its entries."""

    name: str
    source: str  # the port name, or "global"
    entries: dict[int, int]


class PortMaps(NamedTuple):
    """The four maps classification uses on one port (None: not bound)."""

    dscp_to_tc: BoundMap | None
    dot1p_to_tc: BoundMap | None
    tc_to_pg: BoundMap | None
    tc_to_queue: BoundMap | None

    def as_dict(self) -> dict:
        return {f: (None if m is None else {"name": m.name, "from": m.source})
                for f, m in zip(_FIELDS, self)}


def resolve_maps(qos: Qos, port: str) -> PortMaps:
    """``PORT_QOS_MAP|<port>``, each field missing there taken from ``PORT_QOS_MAP|global``."""
    maps = []
    for field, attr in _FIELDS.items():
        name, source = bound(qos, port, field)
        maps.append(None if name is None else BoundMap(name, source, getattr(qos, attr)[name]))
    return PortMaps(*maps)


class PortClassifier:
    """One port's classification tables, built once from its resolved maps.

    - ``by_dscp``: 64 ``(tc, pg)`` tuples indexed by DSCP, or None when the port has no
      DSCP map (IP frames are then classified by PCP like any other);
    - ``by_prio``: 16 ``(tc, pg)`` tuples indexed by the tag's priority bits as the
      forwarding path carries them, ``PCP << 1 | DEI`` (0 when untagged);
    - ``queue_of``: 8 queues indexed by TC, for frames leaving through this port;
    - ``pg_of``: 8 PGs indexed by TC (what ``by_*`` were built from).

    Within a port equal ``(tc, pg)`` pairs are one shared tuple (no per-packet objects).
    """

    __slots__ = ("port", "maps", "pg_of", "by_dscp", "by_prio", "queue_of")

    def __init__(self, port: str, maps: PortMaps) -> None:
        self.port = port
        self.maps = maps
        pg_map = maps.tc_to_pg.entries if maps.tc_to_pg else {}
        self.pg_of: list[int] = [pg_map.get(tc, 0) for tc in range(NUM_TCS)]
        classes = [(tc, pg) for tc, pg in enumerate(self.pg_of)]
        dscp_map, dot1p_map = maps.dscp_to_tc, maps.dot1p_to_tc
        self.by_dscp: list[Classification] | None = None if dscp_map is None else [
            classes[dscp_map.entries.get(dscp, 0)] for dscp in range(64)]
        dot1p = dot1p_map.entries if dot1p_map is not None else {}
        self.by_prio: list[Classification] = [classes[dot1p.get(prio >> 1, 0)]
                                              for prio in range(16)]
        queue_map = maps.tc_to_queue.entries if maps.tc_to_queue else {}
        self.queue_of: list[int] = [queue_map.get(tc, 0) for tc in range(NUM_TCS)]

    @classmethod
    def from_config(cls, qos: Qos, port: str) -> PortClassifier:
        return cls(port, resolve_maps(qos, port))

    def classify(self, frame: bytes) -> Classification:
        """The ``(tc, pg)`` of a frame received on this port (the rule in the module
        docstring; ``Switch._ingress`` inlines the same lookups)."""
        size = len(frame)
        if size < 14:
            return self.by_prio[0]
        ethertype = frame[12] << 8 | frame[13]
        off, prio = 14, 0
        if ethertype == ETH_P_8021Q and size >= 18:
            prio = frame[14] >> 4
            ethertype = frame[16] << 8 | frame[17]
            off = 18
        by_dscp = self.by_dscp
        if by_dscp is not None and size > off + 1:
            if ethertype == ETH_P_IPV4:
                return by_dscp[frame[off + 1] >> 2]
            if ethertype == ETH_P_IPV6:
                return by_dscp[(frame[off] & 0x0F) << 2 | frame[off + 1] >> 6]
        return self.by_prio[prio]

    def queue(self, tc: int) -> int:
        """The queue of this port that a frame of ``tc`` leaves through."""
        return self.queue_of[tc]

    def resolve(self, cls: Classification) -> tuple[int, int | None, int]:
        """``(tc, pg, queue)`` for a frame of class ``cls`` leaving through this port."""
        if cls is CPU_CLASS:
            return CPU_TC, None, CPU_QUEUE
        return cls[0], cls[1], self.queue_of[cls[0]]

    def as_dict(self) -> dict:
        """The resolved bindings and the effective tables, JSON-ready (for debugging)."""
        return {
            "maps": self.maps.as_dict(),
            "dscp_to_tc": None if self.by_dscp is None else [c[0] for c in self.by_dscp],
            "dot1p_to_tc": [self.by_prio[pcp << 1][0] for pcp in range(8)],
            "tc_to_pg": list(self.pg_of),
            "tc_to_queue": list(self.queue_of),
        }
