"""A front-panel port's runtime state: admin state, MTU, L2/L3 role, QoS tables, counters.

Built once from the configuration so that the per-packet path reads plain attributes
(role, native VLAN, VID -> VLAN map, routed interface) instead of consulting the config.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .counters import PortCounters

if TYPE_CHECKING:
    from .bridge import VlanBridge
    from .buffers import PgBuffer
    from .egress import EgressPort
    from .pause import PfcSender
    from .classify import PortClassifier
    from .interfaces import L3Interface

# A port's role. Strings so that they read well in counters and errors.
ROUTED = "routed"  # in INTERFACE: an L3 port of its own
SWITCHED = "switched"  # a VLAN_MEMBER of one or more VLANs
UNCONFIGURED = "unconfigured"  # neither: every frame is dropped (port_unconfigured)


class PortState:
    """One port of the switch, as the forwarding path sees it."""

    __slots__ = ("name", "admin_up", "link_up", "up", "mtu", "role", "native_vlan", "vlans",
                 "interface", "qos", "by_dscp", "by_prio", "queue_of", "counters", "egress",
                 "pgs", "pfc", "pfc_tx", "touched", "next_touched", "runtime")

    def __init__(self, name: str, admin_up: bool, mtu: int, qos: PortClassifier) -> None:
        self.name = name
        self.admin_up = admin_up  # PORT admin_status, or the ``port`` command
        self.link_up = True  # a wire with a live peer: false with no cable, or a cut one
        self.up = admin_up  # oper state, what forwarding reads: admin and link both up
        self.mtu = mtu  # largest L3 packet (Ethernet payload) the port carries
        self.role = UNCONFIGURED
        # VLAN that untagged and priority-tagged (VID 0) frames belong to, if any.
        self.native_vlan: VlanBridge | None = None
        # Every VLAN the port is a member of, by VID: tagged ingress is admitted by this.
        self.vlans: dict[int, VlanBridge] = {}
        self.interface: L3Interface | None = None  # the routed interface, for ROUTED ports
        self.qos = qos  # classification tables: ingress (tc, pg) and egress TC -> queue
        # the tables the per-packet path indexes, one attribute load away (see classify)
        self.by_dscp = qos.by_dscp
        self.by_prio = qos.by_prio
        self.queue_of = qos.queue_of
        self.counters = PortCounters()
        # the lossless pipeline, attached by the Switch once every port exists
        self.egress: EgressPort | None = None  # queues, scheduler, received pauses, WRED
        self.pgs: list[PgBuffer] = []  # ingress buffer of each PG
        self.pfc: list[PfcSender | None] = []  # per PG: the PFC it sends (lossless PGs)
        self.pfc_tx = [0] * 8  # PFC frames sent, per priority
        # among the ports the switch touched, and the one touched before it
        # (``Forwarding.take_touched``)
        self.touched = False
        self.next_touched: PortState | None = None
        # what the runtime driving the switch keeps of the port (the simulator's wake and
        # wire): the model never reads it; one attribute where a lookup by name per frame was
        self.runtime: object = None

    def __repr__(self) -> str:
        return f"<PortState {self.name} {self.role} {'up' if self.up else 'down'}>"
