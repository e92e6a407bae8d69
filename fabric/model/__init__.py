"""The switch's pure data plane.

Everything here takes the time as an argument and never touches sockets, threads or the
clock (docs/design.md, principle 4), so it can be unit-tested with exact timings and reused by
a virtual-time runtime.

- ``frames``: header layouts, parse/build helpers, Internet checksum (full and RFC 1624).
- ``counters``: per-port counters and the drop-reason vocabulary.
- ``ports``: a port's runtime state (admin state, VLAN role, QoS tables, counters).
- ``classify``: ingress classification (DSCP or PCP -> TC -> PG, TC -> egress queue) from
  PORT_QOS_MAP, per port with ``global`` fallback, precomputed into lookup lists.
- ``bridge``: per-VLAN learning bridge (FDB with aging, egress tagging).
- ``interfaces``: L3 interfaces (routed ports, VLAN SVIs): addresses, sending a frame.
- ``ecmp``: the flow hashes that spread a route's equal-cost next hops (IPv4, IPv6).
- ``neighbors``: ARP/NDP neighbour entries, their states and timings.
- ``routes``: routes and the longest-prefix-match table.
- ``router_base``: what both routers share: table rebuild, route and neighbour caches, the
  neighbour timers, routing-protocol routes.
- ``router`` (IPv4: forwarding, ARP, ICMP) and ``router6`` (IPv6: forwarding, neighbour
  discovery, ICMPv6), each on ``router_base.RouterBase``.
- lossless stages, each tested on its own: ``buffers`` (ingress admission per PG,
  XOFF/XON, headroom), ``wred`` (ECN marking), ``scheduler`` (paced STRICT/DWRR), ``pause``
  (received and sent PFC), ``watchdog`` (PFC storms), and ``egress`` (one port's queues,
  scheduler, received pauses, WRED and watchdogs together).
- ``switch``: ``Switch``, which ties them together behind ``receive``/``dequeue``/``tick``:
  ports paced at speed / S (``time_scale``; None runs unpaced), PFC sent and honoured;
  its timers are ``switch_timers``, what it reports ``switch_report``.
"""
from .switch import Switch

__all__ = ["Switch"]
