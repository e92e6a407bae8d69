"""WRED and ECN on an egress queue: pass, CE-mark or drop a frame from the queue's depth.

The curve is the one in docs/design.md, "WRED/ECN" (SAI/SONiC ``WRED_PROFILE``): the
probability is 0 below ``min_threshold``, rises linearly from 0 at the minimum towards
``drop_probability`` % as the depth approaches ``max_threshold``, and is 1 from the maximum
on (classic RED: an average at or above max_th is always acted on). Depths are bytes and
are never scaled by the lab's time scale (docs/design.md, "Time scale").

What happens to a selected frame follows SAI's two independent knobs, which SONiC sets from
``wred_<color>_enable`` (SAI_WRED_ATTR_<COLOR>_ENABLE: WRED drop) and ``ecn``
(SAI_WRED_ATTR_ECN_MARK_MODE):

- an ECN-capable frame (ECT(0), ECT(1) or already CE) is CE-marked instead of dropped when
  the ECN mode covers its colour ("ECT packets get CE instead of being dropped");
- any other frame (Not-ECT, or ECT under ``ecn_none``) is dropped when WRED is enabled for
  the colour, and passes when it is not (an ECN-only profile never drops);
- a colour the profile does not configure passes everything.

Colour: the emulated switch has no policers, so every frame is green; only the green
settings are read. The random draw is the caller's (``random.random()`` or a seeded RNG),
which keeps the model pure and the tests exact.
"""
from __future__ import annotations

from ..config import WredProfile
from .frames import ETH_P_8021Q, ETH_P_IPV4, ETH_P_IPV6, U16, checksum_adjust

# What mark_or_drop decides (strings, so they read well in counters and traces).
PASS = "pass"
MARK = "mark"
DROP = "drop"

# The two ECN bits of the IPv4 TOS / IPv6 traffic class (RFC 3168).
NOT_ECT, ECT1, ECT0, CE = 0, 1, 2, 3

# SONiC ``ecn`` values whose SAI mark mode covers green packets.
_GREEN_ECN_MODES = frozenset({"ecn_green", "ecn_green_yellow", "ecn_green_red", "ecn_all"})


class Wred:
    """One WRED_PROFILE, reduced to the green curve and what to do with a selected frame."""

    __slots__ = ("name", "min_bytes", "max_bytes", "max_probability", "marks", "drops")

    def __init__(self, profile: WredProfile) -> None:
        green = profile.green
        self.name = profile.name
        self.marks = green is not None and profile.ecn in _GREEN_ECN_MODES
        self.drops = green is not None and green.enable
        self.min_bytes = green.min_threshold if green else 0
        self.max_bytes = green.max_threshold if green else 0
        self.max_probability = green.drop_probability / 100 if green else 0.0

    def probability(self, depth_bytes: int) -> float:
        """The chance that a frame meeting a queue of ``depth_bytes`` is marked or dropped."""
        if depth_bytes < self.min_bytes:
            return 0.0
        if depth_bytes >= self.max_bytes:  # also covers min == max: a step at the threshold
            return 1.0
        span = self.max_bytes - self.min_bytes
        return self.max_probability * (depth_bytes - self.min_bytes) / span

    def mark_or_drop(self, depth_bytes: int, ect: bool, rand: float) -> str:
        """PASS, MARK or DROP for one frame; ``rand`` is uniform in [0, 1).

        ``ect``: the frame is ECN-capable (``ecn_field(frame) != NOT_ECT``). The frame is
        selected when ``rand < probability(depth_bytes)``.
        """
        if depth_bytes < self.min_bytes or not (self.marks or self.drops):
            return PASS
        if rand >= self.probability(depth_bytes):
            return PASS
        if ect and self.marks:
            return MARK
        return DROP if self.drops else PASS


def _ip_header(frame: bytes) -> tuple[int, int] | None:
    """(EtherType, offset) of a whole IPv4 or IPv6 header after at most one 802.1Q tag.

    A RoCEv1 GRH (EtherType 0x8915) is not an IP header to a switch ASIC: it is not
    ECN-capable here and is never marked.
    """
    if len(frame) < 14:
        return None
    ethertype, net = frame[12] << 8 | frame[13], 14
    if ethertype == ETH_P_8021Q and len(frame) >= 18:
        ethertype, net = frame[16] << 8 | frame[17], 18
    if ethertype == ETH_P_IPV4 and len(frame) >= net + 20 and frame[net] >> 4 == 4:
        return ethertype, net
    if ethertype == ETH_P_IPV6 and len(frame) >= net + 40 and frame[net] >> 4 == 6:
        return ethertype, net
    return None


def ecn_field(frame: bytes) -> int:
    """The ECN bits of an IPv4/IPv6 frame; NOT_ECT for any other frame."""
    header = _ip_header(frame)
    if header is None:
        return NOT_ECT
    ethertype, net = header
    if ethertype == ETH_P_IPV4:
        return frame[net + 1] & 3
    return frame[net + 1] >> 4 & 3


def mark_ce(frame: bytes) -> bytes:
    """``frame`` with its ECN bits set to CE (11).

    Returned unchanged when it is not ECN-capable (RFC 3168 section 5: a router never marks
    Not-ECT) or already CE. The IPv4 header checksum is adjusted for the one changed word
    (RFC 1624); the RoCEv2 ICRC masks the TOS/traffic class and the UDP/TCP checksums do
    not cover it, so nothing else changes.
    """
    header = _ip_header(frame)
    if header is None:
        return frame
    ethertype, net = header
    out = bytearray(frame)
    if ethertype == ETH_P_IPV4:
        tos = frame[net + 1]
        if tos & 3 in (NOT_ECT, CE):
            return frame
        out[net + 1] = tos | CE
        (checksum,) = U16.unpack_from(frame, net + 10)
        U16.pack_into(out, net + 10, checksum_adjust(
            checksum, frame[net] << 8 | tos, frame[net] << 8 | tos | CE))
    else:
        if frame[net + 1] >> 4 & 3 in (NOT_ECT, CE):
            return frame
        out[net + 1] |= CE << 4
    return bytes(out)
