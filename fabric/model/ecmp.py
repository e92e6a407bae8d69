"""ECMP hashing: which of a route's equal-cost next hops a packet takes.

A flow's packets all hash alike, so they stay on one path (no reordering), while different
flows spread. Both families take zlib.crc32 of the addresses, the protocol (next header)
and, for UDP and TCP, the ports, as those bytes sit in the header; a switch's ECMP hash seed
is the crc32 start value (``salt``), so a simulation's seed can move flows between paths.
"""
from __future__ import annotations

import struct
import zlib

import cython

from . import frames

# the protocols whose ports go into the hash, C ints when compiled (a comparison with an
# imported name boxes the packet's field first)
IPPROTO_TCP = cython.declare(cython.int, frames.IPPROTO_TCP)
IPPROTO_UDP = cython.declare(cython.int, frames.IPPROTO_UDP)

# bytes((n,)) for every byte value, so the per-packet path appends one without building it
PROTO_BYTE = [bytes((i,)) for i in range(256)]
_FLOW_5TUPLE = struct.Struct("!IIBHH")
_FLOW_3TUPLE = struct.Struct("!IIB")


def flow_hash(src: int, dst: int, proto: int, sport: int | None = None,
              dport: int | None = None) -> int:
    """ECMP hash: zlib.crc32 of the packed 5-tuple (3-tuple when there are no ports).

    The packing (``!IIBHH``) is exactly the header bytes (addresses, protocol, ports in
    network order), so the per-packet path hashes slices of the frame and gets the same
    value. RoCEv2 varies the UDP source port per queue pair, which is what spreads it.
    """
    if sport is None or dport is None:
        return zlib.crc32(_FLOW_3TUPLE.pack(src, dst, proto))
    return zlib.crc32(_FLOW_5TUPLE.pack(src, dst, proto, sport, dport))


def ecmp_index(src: int, dst: int, proto: int, sport: int | None, dport: int | None,
               n: int) -> int:
    """Which of ``n`` equal-cost next hops (in configured order) a flow takes."""
    return flow_hash(src, dst, proto, sport, dport) % n


def packet_flow_hash(packet: bytes, offset: int = 0, salt: int = 0) -> int:
    """``flow_hash`` of the IPv4 packet at ``offset``: 5-tuple for TCP/UDP, 3-tuple for
    other protocols and for fragments (only a first fragment has ports; keeping every
    fragment of a datagram on one path avoids reordering). Compiled, zlib's C ``crc32``
    continues over the header's bytes where they sit, the protocol byte included: the
    key's slices and joins were objects made per routed frame."""
    ihl = (packet[offset] & 0x0F) << 2
    proto = packet[offset + 9]
    frag = packet[offset + 6] << 8 | packet[offset + 7]
    ports = (proto == IPPROTO_UDP or proto == IPPROTO_TCP) and not frag & 0x3FFF
    if not cython.compiled or offset < 0 or len(packet) < offset + 20:
        key = packet[offset + 12:offset + 20] + PROTO_BYTE[proto]
        if ports:
            key += packet[offset + ihl:offset + ihl + 4]
        return zlib.crc32(key, salt)
    at = cython.cast(cython.p_uchar, PyBytes_AS_STRING(packet)) + offset
    crc = zlib_crc32(salt, at + 12, 8)
    crc = zlib_crc32(crc, at + 9, 1)
    if ports:  # as much of the ports as the packet holds, as the slice takes
        crc = zlib_crc32(crc, at + ihl, max(0, min(4, len(packet) - offset - ihl)))
    return crc


def flow_hash6(packet: bytes, offset: int = 0, salt: int = 0,
               flow_label: bool = False) -> int:
    """The ECMP hash of the IPv6 packet at ``offset``: zlib.crc32 of the source and
    destination addresses, the next header and, for UDP/TCP, the two ports, as they sit in
    the header (plus the 20-bit flow label when ``flow_label``)."""
    nh = packet[offset + 6]
    key = packet[offset + 8:offset + 40] + PROTO_BYTE[nh]
    if nh == IPPROTO_UDP or nh == IPPROTO_TCP:
        key += packet[offset + 40:offset + 44]
    if flow_label:
        key += bytes((packet[offset + 1] & 0x0F,)) + packet[offset + 2:offset + 4]
    return zlib.crc32(key, salt)
