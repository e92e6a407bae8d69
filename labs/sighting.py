"""What a capture records: one frame as one node saw it on one wire. Live captures
(``labs.capture``) and the simulator's taps (``labs.runtimes.sim``) report alike, so the
checks read both the same way."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal

from ..nic.roce import RoceInfo, classify

Direction = Literal["in", "out"]


@dataclass(frozen=True)
class Sighting:
    """One frame as one node saw it on one wire: ``in`` = received, ``out`` = sent."""

    node: str
    iface: str
    direction: Direction
    time: float  # when the kernel saw it, on the time.monotonic() scale
    frame: bytes  # as on the wire (802.1Q tag inline), without FCS
    info: RoceInfo | None  # packets.classify: None when not RoCE
    pcp: int | None  # from the 802.1Q tag; None when untagged
    vid: int | None

    @classmethod
    def of(cls, node: str, iface: str, direction: Direction, when: float,
           frame: bytes) -> Sighting:
        pcp, vid = vlan_tag(frame)
        return cls(node, iface, direction, when, frame, classify(frame), pcp, vid)

    @property
    def port(self) -> str:
        return f"{self.node}:{self.iface}"


def vlan_tag(frame: bytes) -> tuple[int | None, int | None]:
    """(PCP, VID) of the frame's outer 802.1Q tag, (None, None) when untagged."""
    if len(frame) < 16 or frame[12:14] != b"\x81\x00":
        return None, None
    (tci,) = struct.unpack_from("!H", frame, 14)
    return tci >> 13, tci & 0x0FFF
