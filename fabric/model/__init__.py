"""The switch's pure data plane.

Everything here takes the time as an argument and never touches sockets, threads or the
clock (DESIGN.md, principle 4), so it can be unit-tested with exact timings and reused by
a virtual-time runtime.

- ``frames``: header layouts, parse/build helpers, Internet checksum (full and RFC 1624).
- ``counters``: per-port counters and the drop-reason vocabulary.
- ``ports``: a port's runtime state (admin state, VLAN role, counters).
- ``bridge``: per-VLAN learning bridge (FDB with aging, egress tagging).
- ``router``: L3 interfaces, routing table with ECMP, ARP neighbours and their timers.
- ``switch``: ``Switch``, which ties them together behind ``receive``/``tick``.
"""
from fabric.model.switch import Switch

__all__ = ["Switch"]
