"""Counters and the drop-reason vocabulary.

Every frame handed to ``Switch.receive`` ends in exactly one disposition, counted on its
ingress port:

- ``forwarded``: bridged or routed out of at least one port (a flood counts once);
- ``to_cpu``: consumed by the switch's own stack (ARP or ICMP echo for its addresses),
  answered or learned from;
- ``held``: waiting for ARP to resolve its next hop (a gauge: it later moves to
  ``forwarded`` or to the drop ``arp_unresolved``);
- ``flow_control``: a PFC or PAUSE frame, consumed by the port's egress pause (which
  counts it per priority, ``pfc_rx``, or as ``pause_rx``): flow control doing its job is
  not a drop;
- a drop, counted under one of the reasons below.

So for every port ``rx_packets == forwarded + to_cpu + held + flow_control + sum(drops)``:
drops are never silent. Frames the switch originates (ARP requests/replies, ICMP) are counted in a
separate ``cpu`` block, including the ones that could not be delivered.

Per port, QoS counters (all eight always present, string keys for JSON):

- ``pgs["<pg>"]``: ``rx_packets``/``rx_bytes`` of the frames classified into that ingress
  priority group: every frame that got past the MAC (port up, a whole Ethernet/802.1Q
  header, not MAC control such as PFC or PAUSE), whatever became of it afterwards;
- ``queues["<q>"]``: ``tx_packets``/``tx_bytes`` per egress queue; they sum to the
  port's ``tx_packets``/``tx_bytes``. Originated frames use queue 7 (``classify``).
"""
from __future__ import annotations

NUM_PGS = 8
NUM_QUEUES = 8
PER_PG = (0,) * NUM_PGS  # a port's counts per PG, and per queue, at the start
PER_QUEUE = (0,) * NUM_QUEUES

# Dispositions that are not drops.
FORWARDED = "forwarded"
TO_CPU = "to_cpu"
HELD = "held"
FLOW_CONTROL = "flow_control"

# Drop reasons (one place, so counters, tests and docs use the same names).
PORT_UNCONFIGURED = "port_unconfigured"  # port neither routed nor a VLAN member
PORT_DOWN = "port_down"  # admin-down ingress, or the egress it needs is down
MALFORMED = "malformed"  # shorter than its headers (Ethernet, ARP)
MAC_CONTROL = "mac_control"  # 01:80:c2:00:00:0x or 0x8808 but not PFC/PAUSE: LLDP, STP...
VLAN_NOT_MEMBER = "vlan_not_member"  # VID not configured on the port (or tag on routed port)
SAME_PORT = "same_port"  # known unicast whose destination is on the ingress port
NO_EGRESS = "no_egress"  # flood with no other up member in the VLAN
NOT_ROUTER_MAC = "not_router_mac"  # routed port: neither router MAC nor broadcast ARP
NON_IP_TO_ROUTER = "non_ip_to_router"  # router MAC but not IPv4/ARP/IPv6 (RoCEv1, ...)
ARP_NOT_FOR_US = "arp_not_for_us"  # ARP on a routed port for someone else's address
IP_HEADER_ERROR = "ip_header_error"  # bad version, header or total length
TO_ROUTER_UNSUPPORTED = "to_router_unsupported"  # to our address, but not an echo request
TTL_EXPIRED = "ttl_expired"  # would be routed with TTL <= 1 (ICMP time exceeded sent)
NO_ROUTE = "no_route"
BLACKHOLE = "blackhole"
MTU_EXCEEDED = "mtu_exceeded"  # larger than the egress port's MTU (no fragmentation)
ARP_UNRESOLVED = "arp_unresolved"  # next hop did not answer 3 ARP requests
ARP_QUEUE_FULL = "arp_queue_full"  # 16 packets already waiting for that next hop
NDP_NOT_FOR_US = "ndp_not_for_us"  # IPv6 NS/NA/multicast to the router not about its addresses
NDP_UNRESOLVED = "ndp_unresolved"  # IPv6 next hop did not answer 3 neighbour solicitations
NDP_QUEUE_FULL = "ndp_queue_full"  # 16 IPv6 packets already waiting for that next hop

DROP_REASONS = (
    PORT_UNCONFIGURED, PORT_DOWN, MALFORMED, MAC_CONTROL, VLAN_NOT_MEMBER, SAME_PORT,
    NO_EGRESS, NOT_ROUTER_MAC, NON_IP_TO_ROUTER, ARP_NOT_FOR_US, IP_HEADER_ERROR,
    TO_ROUTER_UNSUPPORTED, TTL_EXPIRED, NO_ROUTE, BLACKHOLE, MTU_EXCEEDED, ARP_UNRESOLVED,
    ARP_QUEUE_FULL, NDP_NOT_FOR_US, NDP_UNRESOLVED, NDP_QUEUE_FULL,
)


class _Dispositions:
    """What became of frames: forwarded (or originated), held for ARP, or dropped by reason.
    Shared by ports (received frames) and the CPU (frames the switch originates)."""

    __slots__ = ("forwarded", "to_cpu", "held", "flow_control", "drops")

    def __init__(self) -> None:
        self.forwarded = 0
        self.to_cpu = 0
        self.held = 0
        self.flow_control = 0
        self.drops: dict[str, int] = {}

    def count(self, disposition: str) -> None:
        """Record what became of one frame (a disposition or a drop reason)."""
        if disposition == FORWARDED:
            self.forwarded += 1
        elif disposition == TO_CPU:
            self.to_cpu += 1
        elif disposition == HELD:
            self.held += 1
        elif disposition == FLOW_CONTROL:
            self.flow_control += 1
        else:
            self.drop(disposition)

    def settle(self, disposition: str) -> None:
        """A held frame's final disposition (sent after ARP resolved, or dropped)."""
        self.held -= 1
        self.count(disposition)

    def drop(self, reason: str) -> None:
        self.drops[reason] = self.drops.get(reason, 0) + 1


class PortCounters(_Dispositions):
    """One port's counters; plain attributes because the hot path bumps them per packet.

    Per priority group (ingress) and per queue (egress) the counts are lists indexed by
    PG/queue number, and the port totals are sums, so each frame is counted once on the
    hot path: ``rx_*`` = the PGs + the frames turned away before classification
    (``unclassified``), ``tx_*`` = the queues (every transmitted frame is in one queue).

    Compiled, the four lists are C arrays (``counters.pxd``): a count past 256 no longer
    makes a new Python integer at every frame. Read from Python they come as a new list
    each time, so only compiled code (the forwarding path) may bump them.
    """

    __slots__ = ("unclassified_packets", "unclassified_bytes", "pg_rx_packets", "pg_rx_bytes",
                 "queue_tx_packets", "queue_tx_bytes")

    def __init__(self) -> None:
        super().__init__()
        # received frames turned away before classification: port down, runt, MAC control
        self.unclassified_packets = 0
        self.unclassified_bytes = 0
        # frames classified on ingress (all the others), by PG
        self.pg_rx_packets = list(PER_PG)
        self.pg_rx_bytes = list(PER_PG)
        # frames the model returned for this port (see Switch), by egress queue
        self.queue_tx_packets = list(PER_QUEUE)
        self.queue_tx_bytes = list(PER_QUEUE)

    @property
    def rx_packets(self) -> int:
        return sum(self.pg_rx_packets) + self.unclassified_packets

    @property
    def rx_bytes(self) -> int:
        return sum(self.pg_rx_bytes) + self.unclassified_bytes

    @property
    def tx_packets(self) -> int:
        return sum(self.queue_tx_packets)

    @property
    def tx_bytes(self) -> int:
        return sum(self.queue_tx_bytes)

    def unclassified(self, reason: str, size: int) -> str:
        """Count a received frame that the MAC stage turned away before classification
        (so it is in no PG); returns ``reason``, its disposition."""
        self.unclassified_packets += 1
        self.unclassified_bytes += size
        return reason

    def as_dict(self) -> dict:
        """JSON-ready; ``pgs`` and ``queues`` always list all eight, keyed "0".."7"."""
        return {
            "rx_packets": self.rx_packets, "rx_bytes": self.rx_bytes,
            "tx_packets": self.tx_packets, "tx_bytes": self.tx_bytes,
            "forwarded": self.forwarded, "to_cpu": self.to_cpu, "held": self.held,
            "flow_control": self.flow_control, "drops": dict(sorted(self.drops.items())),
            "pgs": {str(pg): {"rx_packets": self.pg_rx_packets[pg],
                              "rx_bytes": self.pg_rx_bytes[pg]} for pg in range(NUM_PGS)},
            "queues": {str(q): {"tx_packets": self.queue_tx_packets[q],
                                "tx_bytes": self.queue_tx_bytes[q]}
                       for q in range(NUM_QUEUES)},
        }


class CpuCounters(_Dispositions):
    """Frames the switch originates itself (ARP, ICMP) and what became of them: ``forwarded``
    counts those handed to a port (also in that port's tx); a flood counts once."""

    __slots__ = ()

    def as_dict(self) -> dict:
        return {"originated": self.forwarded, "held": self.held,
                "drops": dict(sorted(self.drops.items()))}


def drop_totals(*blocks: dict[str, int]) -> dict[str, int]:
    """Sum drop dicts reason by reason."""
    totals: dict[str, int] = {}
    for block in blocks:
        for reason, n in block.items():
            totals[reason] = totals.get(reason, 0) + n
    return dict(sorted(totals.items()))
