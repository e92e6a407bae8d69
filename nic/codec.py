"""RoCEv2 frames for the endpoint's hot path, built and parsed with struct (no scapy).

A frame is Ethernet / IPv4 (DF, ID 0) or IPv6 (flow label 0) / UDP (checksum 0, as rxe
sends) / BTH / [RETH | AETH | CNP padding] / payload padded to 4 bytes / ICRC. The family
follows the addresses. The Ethernet, IP and UDP headers depend only on the flow, the class
and the length, so ``Headers`` keeps them per length.
``tests/unit/test_codec.py`` checks every kind byte for byte against ``traffic.packets``
(scapy), so the two cannot drift apart.
"""
from __future__ import annotations

import socket
import struct
from array import array
from dataclasses import dataclass
from zlib import crc32

import cython

from ..fabric.model import frames
from ..fabric.model.frames import bytes_at, checksum_adjust
from ..fabric.model.frames import internet_checksum as ipv4_checksum  # over an IPv4 header
from . import roce
from .roce import AETH_CREDITS_INVALID, bth_crc, v2_headers_crc
from .rc import RETH_OPCODES

ETH = struct.Struct("!6s6sH")
IPV4 = struct.Struct("!BBHHHBBH4s4s")
IPV6 = struct.Struct("!IHBB16s16s")  # version/traffic class/flow label, payload length, ...
UDP = struct.Struct("!HHHH")
BTH = struct.Struct("!BBHII")
RETH = struct.Struct("!QII")
AETH = struct.Struct("!I")
ETH_LEN, BTH_LEN = ETH.size, BTH.size
# the interpreted frame's packers, bound once
_pack_bth = BTH.pack
_pack_icrc = struct.Struct("<I").pack  # the ICRC goes on the wire little-endian
HEADERS_LEN = ETH.size + IPV4.size + UDP.size
BTH_AT = HEADERS_LEN
HEADERS6_LEN = ETH.size + IPV6.size + UDP.size
BTH6_AT = HEADERS6_LEN
# what a frame's length changes in its IPv4 headers (``_relength``): the IP total length
# (IP and UDP headers included), the IP header checksum and the UDP length
TOTAL_AT, CHECKSUM_AT = ETH.size + 2, ETH.size + 10
UDP_LENGTH_AT = ETH.size + IPV4.size + 4
IPV4_LEN, IP_UDP_LEN = IPV4.size, IPV4.size + UDP.size
# C ints when compiled: a frame's fields are compared with them per received frame
ETH_P_IPV4 = cython.declare(cython.int, frames.ETH_P_IPV4)
ETH_P_IPV6 = cython.declare(cython.int, frames.ETH_P_IPV6)
ROCE_V2_PORT = cython.declare(cython.int, roce.ROCE_V2_PORT)
ICRC_LEN = 4
# a data frame's bytes besides its payload: Ethernet, IPv4, UDP, BTH, RETH, ICRC
FRAME_OVERHEAD = ETH.size + IPV4.size + UDP.size + BTH.size + RETH.size + ICRC_LEN
CNP_PADDING = 16
ACK_OPCODE = 0x11
CNP_OPCODE = 0x81
NAK_PSN_SEQUENCE = 0x60  # AETH syndrome 0b011 + code 0
PKEY_DEFAULT = 0xFFFF
REMOTE_VADDR = 0x10000  # where a WRITE lands in the responder's (notional) memory region
RKEY = 0x1234


def mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


class Headers:
    """Ethernet/IP/UDP for one direction of one QP in one class (DSCP, ECN); IPv6 when the
    addresses are (the TTL is then the hop limit, the TOS the traffic class)."""

    def __init__(self, src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, *, dscp: int,
                 ecn: int, sport: int, ttl: int = 64) -> None:
        self.ipv6 = ":" in dst_ip
        family = socket.AF_INET6 if self.ipv6 else socket.AF_INET
        self.eth = ETH.pack(mac_bytes(dst_mac), mac_bytes(src_mac),
                            ETH_P_IPV6 if self.ipv6 else ETH_P_IPV4)
        self.src = socket.inet_pton(family, src_ip)
        self.dst = socket.inet_pton(family, dst_ip)
        self.tos = dscp << 2 | ecn
        self.sport = sport
        self.ttl = ttl
        self._by_length: dict[int, bytes] = {}
        self._crc_by_length: dict[int, int] = {}
        # the last length asked, and its headers and seed: a flow's frames are mostly full
        # ones, where a dictionary lookup per frame each was 3 % of a 128-host run
        self._head_length = self._seed_length = -1
        self._head = b""
        self._seed = 0

    def icrc_seed(self, length: int) -> int:
        """The ICRC's running CRC over the pseudo-LRH and these IP/UDP headers in front of
        ``length`` bytes (``roce.v2_headers_crc``)."""
        if length == self._seed_length:
            return self._seed
        seed = self._crc_by_length.get(length)
        if seed is None:
            head = self.for_transport(length)
            seed = self._crc_by_length[length] = v2_headers_crc(
                bytes_at(head, ETH_LEN, len(head) - ETH_LEN), not self.ipv6)
        self._seed_length, self._seed = length, seed
        return seed

    def for_transport(self, length: int) -> bytes:
        """The 42 (IPv6: 62) header bytes in front of ``length`` bytes of BTH onwards (ICRC
        included)."""
        if length == self._head_length:
            return self._head
        cached = self._by_length.get(length)
        if cached is None and not self.ipv6 and self._head_length >= 0:
            cached = _relength(self._head, self._head_length, length)
            self._by_length[length] = cached
        elif cached is None and self.ipv6:
            ip6 = IPV6.pack(6 << 28 | self.tos << 20, 8 + length, 17, self.ttl, self.src,
                            self.dst)
            cached = self.eth + ip6 + UDP.pack(self.sport, ROCE_V2_PORT, 8 + length, 0)
            self._by_length[length] = cached
        elif cached is None:
            ip = bytearray(IPV4.pack(0x45, self.tos, 20 + 8 + length, 0, 0x4000, self.ttl, 17,
                                     0, self.src, self.dst))
            struct.pack_into("!H", ip, 10, ipv4_checksum(bytes(ip)))
            cached = self.eth + bytes(ip) + UDP.pack(self.sport, ROCE_V2_PORT, 8 + length, 0)
            self._by_length[length] = cached
        self._head_length, self._head = length, cached
        return cached


def _relength(head: bytes, length: int, new_length: int) -> bytes:
    """IPv4 ``head`` (``Headers.for_transport(length)``) for ``new_length`` bytes after it:
    a copy with the IP total length, its checksum (RFC 1624, ``frames.checksum_adjust``)
    and the UDP length rewritten; compiled, in C, where packing it whole took some twenty
    Python calls per QP and length (three per QP of an all-to-all)."""
    total, new_total = IP_UDP_LEN + length, IP_UDP_LEN + new_length
    udp_length = new_total - IPV4_LEN
    if not cython.compiled:
        out = bytearray(head)
        csum = checksum_adjust(out[CHECKSUM_AT] << 8 | out[CHECKSUM_AT + 1], total, new_total)
        struct.pack_into("!H", out, TOTAL_AT, new_total)
        struct.pack_into("!H", out, CHECKSUM_AT, csum)
        struct.pack_into("!H", out, UDP_LENGTH_AT, udp_length)
        return bytes(out)
    out = PyBytes_FromStringAndSize(PyBytes_AS_STRING(head), HEADERS_LEN)
    at = cython.cast(cython.p_uchar, PyBytes_AS_STRING(out))
    csum = checksum_adjust(at[CHECKSUM_AT] << 8 | at[CHECKSUM_AT + 1], total, new_total)
    at[TOTAL_AT], at[TOTAL_AT + 1] = new_total >> 8, new_total & 0xFF
    at[CHECKSUM_AT], at[CHECKSUM_AT + 1] = csum >> 8, csum & 0xFF
    at[UDP_LENGTH_AT], at[UDP_LENGTH_AT + 1] = udp_length >> 8, udp_length & 0xFF
    return out


def _zeros(n: int) -> bytes:
    """``n`` zero bytes, made once per length: a sender's payloads come in few lengths."""
    zeros = _ZEROS.get(n)
    if zeros is None:
        zeros = _ZEROS[n] = bytes(n)
    return zeros


_ZEROS: dict[int, bytes] = {}

# The CRC-32 of a run of zero bytes (a payload) from any starting CRC, without reading the
# run: over zeros the CRC register only shifts and folds, so crc32(bytes(n), c) is
# L_n(c) ^ crc32(bytes(n), 0) with L_n linear in c's 32 bits. For each power of two, four
# 256-entry tables hold L of each byte of c; a run of n bytes takes a step per bit set in
# n. A 4 KiB payload is then one step of four lookups, where zlib reads 4 KiB per frame.
ZERO_RUN_STEPS = 14  # runs below 2**14 bytes, past any MTU; longer ones are read (zlib)


def _zero_run_tables() -> tuple[array, array]:
    """Step k's four tables at 1024 * k, and step k's constant, crc32(bytes(2**k), 0); 32-bit
    unsigned arrays, C arrays to the compiled code."""
    tables, constants = array("I"), array("I")
    for k in range(ZERO_RUN_STEPS):
        run = bytes(1 << k)
        constant = crc32(run)
        bits = [crc32(run, 1 << bit) ^ constant for bit in range(32)]  # L of each bit
        for byte in range(4):
            table = [0] * 256
            for value in range(1, 256):  # L is linear: L(value) = L(value - low bit) ^ ...
                low = value & -value
                table[value] = table[value ^ low] ^ bits[8 * byte + low.bit_length() - 1]
            tables.extend(table)
        constants.append(constant)
    return tables, constants


_ZERO_RUN_TABLES, _ZERO_RUN_CONSTANTS = _zero_run_tables()


@cython.boundscheck(False)
@cython.wraparound(False)
@cython.locals(k=cython.Py_ssize_t, at=cython.Py_ssize_t, c=cython.uint,
               tables="const unsigned int[::1]")
def crc32_zeros(n: int, crc: int) -> int:
    """``zlib.crc32(bytes(n), crc)``, in a few table lookups (above)."""
    if n >= 1 << ZERO_RUN_STEPS:
        return crc32(bytes(n), crc)
    tables, c, k = _ZERO_RUN_TABLES, crc, 0
    while n:
        if n & 1:
            at = 1024 * k
            c = (tables[at + (c & 0xFF)] ^ tables[at + 256 + (c >> 8 & 0xFF)]
                 ^ tables[at + 512 + (c >> 16 & 0xFF)] ^ tables[at + 768 + (c >> 24)]
                 ^ _ZERO_RUN_CONSTANTS[k])
        n >>= 1
        k += 1
    return c


def _frame(headers: Headers, opcode: int, dqpn: int, psn: int, ext: bytes, payload: int,
           ackreq: bool, becn: bool) -> bytes:
    """The frame, its ICRC continued from the CRC its headers share with every frame of
    this length (``roce.icrc`` gives the same, parsing the frame first). Interpreted, one
    join; compiled, written in place into the new frame, the CRC by zlib's C function (the
    interpreted way made some twenty objects and ten calls by name per frame)."""
    pad = -payload % 4
    transport_len = BTH_LEN + len(ext) + payload + pad + ICRC_LEN
    head = headers.for_transport(transport_len)
    seed = headers.icrc_seed(transport_len)
    if not cython.compiled:
        bth = _pack_bth(opcode, pad << 4, PKEY_DEFAULT, becn << 30 | dqpn, ackreq << 31 | psn)
        crc = crc32_zeros(payload + pad, crc32(ext, bth_crc(bth, seed)))
        return b"".join((head, bth, ext, _zeros(payload + pad), _pack_icrc(crc)))
    size = len(head)
    out = PyBytes_FromStringAndSize(cython.NULL, size + transport_len)
    at = cython.cast(cython.p_uchar, PyBytes_AS_STRING(out))
    memcpy(at, PyBytes_AS_STRING(head), size)
    bth = at + size
    qp_word = becn << 30 | dqpn
    psn_word = ackreq << 31 | psn
    bth[0], bth[1], bth[2], bth[3] = opcode, pad << 4, PKEY_DEFAULT >> 8, PKEY_DEFAULT & 0xFF
    bth[4], bth[5], bth[6], bth[7] = qp_word >> 24, qp_word >> 16, qp_word >> 8, qp_word
    bth[8], bth[9], bth[10], bth[11] = psn_word >> 24, psn_word >> 16, psn_word >> 8, psn_word
    memcpy(bth + BTH_LEN, PyBytes_AS_STRING(ext), len(ext))
    memset(bth + BTH_LEN + len(ext), 0, payload + pad)
    # BTH with its resv8a byte masked (``roce.bth_crc``), the extension, then the zeros
    crc = zlib_crc32(seed, bth, 4)
    crc = zlib_crc32(crc, cython.cast(cython.p_uchar, b"\xff"), 1)
    crc = zlib_crc32(crc, bth + 5, BTH_LEN - 5 + len(ext))
    crc = crc32_zeros(payload + pad, crc)
    icrc = bth + transport_len - ICRC_LEN  # least significant byte first
    icrc[0], icrc[1], icrc[2], icrc[3] = crc, crc >> 8, crc >> 16, crc >> 24
    return out


def data_frame(headers: Headers, dqpn: int, psn: int, opcode: int, payload: int,
               ackreq: bool, reth: tuple[int, int] | None = None) -> bytes:
    """A SEND or WRITE packet with ``payload`` zero bytes; ``reth`` (offset, DMA length)
    for a WRITE's first or only packet."""
    ext = b"" if reth is None else RETH.pack(REMOTE_VADDR + reth[0], RKEY, reth[1])
    return _frame(headers, opcode, dqpn, psn, ext, payload, ackreq, False)


def ack_frame(headers: Headers, dqpn: int, psn: int, msn: int, nak: bool = False) -> bytes:
    """ACK (credits not given, as NICs send) or PSN-sequence-error NAK."""
    syndrome = NAK_PSN_SEQUENCE if nak else AETH_CREDITS_INVALID
    return _frame(headers, ACK_OPCODE, dqpn, psn, AETH.pack(syndrome << 24 | msn), 0, False,
                  False)


def cnp_frame(headers: Headers, dqpn: int) -> bytes:
    """CNP: BECN set, 16 reserved bytes, PSN 0."""
    return _frame(headers, CNP_OPCODE, dqpn, 0, bytes(CNP_PADDING), 0, False, True)


# bytes between the BTH and the payload, by opcode: RETH, AETH, the CNP's reserved bytes;
# as one byte per opcode (0: none), what a received frame's opcode indexes
EXTENSION = {**dict.fromkeys(RETH_OPCODES, RETH.size), ACK_OPCODE: AETH.size,
             CNP_OPCODE: CNP_PADDING}
EXTENSION_LEN = bytes(EXTENSION.get(opcode, 0) for opcode in range(256))


@dataclass(frozen=True)
class Incoming:
    """What the endpoint needs of one received RoCEv2 frame."""

    src_ip: bytes  # 4 bytes (IPv4) or 16 (IPv6)
    ecn: int
    opcode: int
    dqpn: int
    psn: int
    ackreq: bool
    payload: int  # bytes after BTH and extension headers, padding excluded
    aeth: int | None  # syndrome << 24 | MSN, for ACK/NAK


def parse(frame: bytes) -> Incoming | None:
    """Decode an untagged IPv4 or IPv6 RoCEv2 frame (what hosts receive on access ports);
    None for anything else (IPv6 extension headers included). The ICRC is not checked
    here: the switch in between does not corrupt frames, and checks verify ICRCs on
    captures. Fields are read a byte at a time: compiled, C reads of the frame."""
    if len(frame) < ETH_LEN:
        return None
    ethertype = frame[12] << 8 | frame[13]
    if ethertype == ETH_P_IPV6:
        return _parse6(frame)
    if len(frame) < HEADERS_LEN + BTH_LEN + ICRC_LEN or ethertype != ETH_P_IPV4 \
            or frame[14] != 0x45 or frame[23] != 17 \
            or frame[36] << 8 | frame[37] != ROCE_V2_PORT:
        return None
    total = frame[16] << 8 | frame[17]
    if ETH_LEN + total > len(frame):  # truncated: not a whole packet
        return None
    return _transport(frame, BTH_AT, total - 20, bytes_at(frame, 26, 4), frame[15] & 3)


def _parse6(frame: bytes) -> Incoming | None:
    if len(frame) < HEADERS6_LEN + BTH_LEN + ICRC_LEN or frame[14] >> 4 != 6 \
            or frame[20] != 17 or frame[56] << 8 | frame[57] != ROCE_V2_PORT:
        return None
    udp_len = frame[18] << 8 | frame[19]  # payload length: UDP onwards
    if ETH_LEN + 40 + udp_len > len(frame):
        return None
    return _transport(frame, BTH6_AT, udp_len, frame[22:38], frame[15] >> 4 & 3)


def _transport(frame: bytes, bth_at: int, udp_len: int, src_ip: bytes, ecn: int) -> Incoming:
    """BTH onwards, the IP layer read: ``udp_len`` counts the UDP header and everything
    after it (``parse`` has checked that the BTH and four bytes after it are there)."""
    opcode = frame[bth_at]
    payload = (udp_len - 8 - BTH_LEN - EXTENSION_LEN[opcode] - ICRC_LEN
               - (frame[bth_at + 1] >> 4 & 3))  # the pad count
    aeth = None
    if opcode == ACK_OPCODE:
        at = bth_at + BTH_LEN
        aeth = (cython.cast(cython.longlong, frame[at]) << 24 | frame[at + 1] << 16
                | frame[at + 2] << 8 | frame[at + 3])
    dqpn = frame[bth_at + 5] << 16 | frame[bth_at + 6] << 8 | frame[bth_at + 7]
    psn = frame[bth_at + 9] << 16 | frame[bth_at + 10] << 8 | frame[bth_at + 11]
    ackreq = frame[bth_at + 8] >> 7 == 1
    if not cython.compiled:
        return Incoming(src_ip, ecn, opcode, dqpn, psn, ackreq, payload, aeth)
    # compiled, its fields set in C: the call boxed eight values for __init__ to unbox
    incoming = Incoming.__new__(Incoming)
    incoming.src_ip, incoming.ecn, incoming.opcode, incoming.dqpn = src_ip, ecn, opcode, dqpn
    incoming.psn, incoming.ackreq, incoming.payload, incoming.aeth = psn, ackreq, payload, aeth
    return incoming
