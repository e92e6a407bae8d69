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
from dataclasses import dataclass
from zlib import crc32

import cython

from ..fabric.model.frames import internet_checksum as ipv4_checksum  # over an IPv4 header
from .roce import AETH_CREDITS_INVALID, ROCE_V2_PORT, bth_crc, v2_headers_crc
from .rc import RETH_OPCODES

ETH = struct.Struct("!6s6sH")
IPV4 = struct.Struct("!BBHHHBBH4s4s")
IPV6 = struct.Struct("!IHBB16s16s")  # version/traffic class/flow label, payload length, ...
UDP = struct.Struct("!HHHH")
BTH = struct.Struct("!BBHII")
RETH = struct.Struct("!QII")
AETH = struct.Struct("!I")
ETH_LEN, BTH_LEN = ETH.size, BTH.size
# the per-frame calls, bound once: compiled, ``BTH.pack`` would look ``pack`` up by name
_pack_bth, _unpack_bth, _unpack_aeth = BTH.pack, BTH.unpack_from, AETH.unpack_from
_pack_icrc = struct.Struct("<I").pack  # the ICRC goes on the wire little-endian
HEADERS_LEN = ETH.size + IPV4.size + UDP.size
BTH_AT = HEADERS_LEN
HEADERS6_LEN = ETH.size + IPV6.size + UDP.size
BTH6_AT = HEADERS6_LEN
ETH_P_IPV4 = 0x0800
ETH_P_IPV6 = 0x86DD
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

    def icrc_seed(self, length: int) -> int:
        """The ICRC's running CRC over the pseudo-LRH and these IP/UDP headers in front of
        ``length`` bytes (``roce.v2_headers_crc``)."""
        seed = self._crc_by_length.get(length)
        if seed is None:
            seed = self._crc_by_length[length] = v2_headers_crc(
                self.for_transport(length)[ETH_LEN:], not self.ipv6)
        return seed

    def for_transport(self, length: int) -> bytes:
        """The 42 (IPv6: 62) header bytes in front of ``length`` bytes of BTH onwards (ICRC
        included)."""
        cached = self._by_length.get(length)
        if cached is None and self.ipv6:
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
        return cached


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
_ZERO_RUN_TABLES: list[int] = []  # step k's four tables at 1024 * k
_ZERO_RUN_CONSTANTS: list[int] = []  # step k: crc32(bytes(2**k), 0)


def _zero_run_tables() -> None:
    for k in range(ZERO_RUN_STEPS):
        run = bytes(1 << k)
        constant = crc32(run)
        bits = [crc32(run, 1 << bit) ^ constant for bit in range(32)]  # L of each bit
        for byte in range(4):
            table = [0] * 256
            for value in range(1, 256):  # L is linear: L(value) = L(value - low bit) ^ ...
                low = value & -value
                table[value] = table[value ^ low] ^ bits[8 * byte + low.bit_length() - 1]
            _ZERO_RUN_TABLES.extend(table)
        _ZERO_RUN_CONSTANTS.append(constant)


_zero_run_tables()


@cython.locals(k=cython.Py_ssize_t, at=cython.Py_ssize_t, c=cython.uint)
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
    """The frame in one join, its ICRC continued from the CRC its headers share with every
    frame of this length (``roce.icrc`` gives the same, parsing the frame first)."""
    pad = -payload % 4
    transport_len = BTH_LEN + len(ext) + payload + pad + ICRC_LEN
    bth = _pack_bth(opcode, pad << 4, PKEY_DEFAULT, becn << 30 | dqpn, ackreq << 31 | psn)
    body = _zeros(payload + pad)
    crc = crc32_zeros(payload + pad,
                      crc32(ext, bth_crc(bth, headers.icrc_seed(transport_len))))
    return b"".join((headers.for_transport(transport_len), bth, ext, body,
                     _pack_icrc(crc)))


def data_frame(headers: Headers, dqpn: int, psn: int, opcode: int, payload: int, *,
               ackreq: bool, reth: tuple[int, int] | None = None) -> bytes:
    """A SEND or WRITE packet with ``payload`` zero bytes; ``reth`` (offset, DMA length)
    for a WRITE's first or only packet."""
    ext = b"" if reth is None else RETH.pack(REMOTE_VADDR + reth[0], RKEY, reth[1])
    return _frame(headers, opcode, dqpn, psn, ext, payload, ackreq, False)


def ack_frame(headers: Headers, dqpn: int, psn: int, msn: int, *, nak: bool = False) -> bytes:
    """ACK (credits not given, as NICs send) or PSN-sequence-error NAK."""
    syndrome = NAK_PSN_SEQUENCE if nak else AETH_CREDITS_INVALID
    return _frame(headers, ACK_OPCODE, dqpn, psn, AETH.pack(syndrome << 24 | msn), 0, False,
                  False)


def cnp_frame(headers: Headers, dqpn: int) -> bytes:
    """CNP: BECN set, 16 reserved bytes, PSN 0."""
    return _frame(headers, CNP_OPCODE, dqpn, 0, bytes(CNP_PADDING), 0, False, True)


# bytes between the BTH and the payload, by opcode: RETH, AETH, the CNP's reserved bytes
EXTENSION = {**dict.fromkeys(RETH_OPCODES, RETH.size), ACK_OPCODE: AETH.size,
             CNP_OPCODE: CNP_PADDING}


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
    captures."""
    if frame[12:14] == b"\x86\xdd":
        return _parse6(frame)
    if len(frame) < HEADERS_LEN + BTH_LEN + ICRC_LEN or frame[12:14] != b"\x08\x00" \
            or frame[14] != 0x45 or frame[23] != 17 \
            or frame[36] << 8 | frame[37] != ROCE_V2_PORT:
        return None
    total = frame[16] << 8 | frame[17]
    if ETH_LEN + total > len(frame):  # truncated: not a whole packet
        return None
    return _transport(frame, BTH_AT, total - 20, frame[26:30], frame[15] & 3)


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
    after it."""
    opcode, flags, _, qp_word, psn_word = _unpack_bth(frame, bth_at)
    ext = EXTENSION[opcode] if opcode in EXTENSION else 0
    payload = udp_len - 8 - BTH_LEN - ext - ICRC_LEN - (flags >> 4 & 3)
    aeth = _unpack_aeth(frame, bth_at + BTH_LEN)[0] if opcode == ACK_OPCODE else None
    return Incoming(src_ip, ecn, opcode, qp_word & 0xFFFFFF, psn_word & 0xFFFFFF,
                    bool(psn_word >> 31), payload, aeth)
