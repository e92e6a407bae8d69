"""Raw Ethernet on a Linux interface: AF_PACKET sockets as the switch agent and captures use them.

Two kernel habits would otherwise lie to a reader of raw frames, and are undone here:

- the kernel strips a received frame's 802.1Q tag into metadata (``PACKET_AUXDATA``), so a
  priority tag or a VID would silently vanish: ``recv_frame`` puts the tag back inline;
- the socket buffer overflows silently under bursts: sockets are opened deep
  (``SO_RCVBUFFORCE``), and ``statistics`` tells how many frames the kernel dropped anyway.

A reader serving many sockets takes frames out of order of their arrival; where the order
matters (a capture along a path), ``recv_stamped`` gives the kernel's own arrival time.
"""
from __future__ import annotations

import ctypes
import errno
import socket
import struct

ETH_P_ALL = 0x0003
ETH_P_8021Q = 0x8100
SOL_PACKET = 263
PACKET_AUXDATA = 8
PACKET_STATISTICS = 6
PACKET_IGNORE_OUTGOING = 23
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
AUXDATA = struct.Struct("=IIIHHHH")  # struct tpacket_auxdata
STATS = struct.Struct("II")  # struct tpacket_stats: packets, drops
SO_RCVBUFFORCE = 33  # not in the socket module
SO_TIMESTAMPNS = 35  # nor this (asm-generic value: x86, arm); its cmsg type is the same
SO_ATTACH_FILTER = 26
BPF_INSN = struct.Struct("=HBBI")  # struct sock_filter: code, jt, jf, k
BPF_PROG = struct.Struct("@HP")  # struct sock_fprog: length, pointer (native alignment)
TIMESPEC = struct.Struct("@ll")  # struct timespec
RCVBUF = 4 << 20
MAX_FRAME = 65536
ANCILLARY = 64
ANCILLARY_STAMPED = socket.CMSG_SPACE(AUXDATA.size) + socket.CMSG_SPACE(TIMESPEC.size)


def dst_mac_filter(mac: bytes) -> list[tuple[int, int, int, int]]:
    """A classic BPF program accepting only frames sent to ``mac`` (e.g. PFC's multicast
    address): a capture of a busy wire then costs the reader nothing for the rest."""
    return [(0x20, 0, 0, 0),  # ld [0]: the first four bytes of the destination
            (0x15, 0, 3, int.from_bytes(mac[:4], "big")),  # jeq, else drop
            (0x28, 0, 0, 4),  # ldh [4]: its last two
            (0x15, 0, 1, int.from_bytes(mac[4:6], "big")),  # jeq, else drop
            (0x06, 0, 0, MAX_FRAME),  # ret: the whole frame
            (0x06, 0, 0, 0)]  # ret 0: drop


def attach_filter(sock: socket.socket, program: list[tuple[int, int, int, int]]) -> None:
    """Let the kernel drop what ``program`` (classic BPF) rejects before it is queued."""
    code = ctypes.create_string_buffer(b"".join(BPF_INSN.pack(*i) for i in program))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER,
                    BPF_PROG.pack(len(program), ctypes.addressof(code)))


def open_socket(iface: str, *, ignore_outgoing: bool = False, timestamps: bool = False,
                rcvbuf: int = RCVBUF,
                bpf: list[tuple[int, int, int, int]] | None = None) -> socket.socket:
    """A non-blocking raw socket bound to ``iface`` of the calling thread's namespace.

    ``ignore_outgoing`` keeps the socket's own and its host's transmissions out of its
    receive queue (Linux >= 4.20; older kernels still mark them ``PACKET_OUTGOING``).
    ``timestamps`` makes the kernel stamp each frame, for ``recv_stamped``. ``bpf``
    filters in the kernel, before binding, so no unwanted frame is ever queued.
    """
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        if bpf is not None:
            attach_filter(sock, bpf)
        sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        if timestamps:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        if ignore_outgoing:
            try:
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            except OSError:
                pass
        try:  # beyond net.core.rmem_max needs CAP_NET_ADMIN; settle for the capped size
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
        except PermissionError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.bind((iface, ETH_P_ALL))
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def recv_frame(sock: socket.socket) -> tuple[bytes, int] | None:
    """The next frame, 802.1Q tag restored, and its packet type (``socket.PACKET_*``:
    ``PACKET_OUTGOING`` for frames this host sent); None when nothing is queued."""
    try:
        data, anc, _flags, addr = sock.recvmsg(MAX_FRAME, ANCILLARY)
    except BlockingIOError:
        return None
    except OSError as e:  # the link went down: reported once on the socket, not fatal
        if e.errno != errno.ENETDOWN:
            raise
        return None
    return _with_tag(data, anc), addr[2]


def recv_stamped(sock: socket.socket) -> tuple[bytes, int, float | None] | None:
    """``recv_frame`` plus when the kernel saw the frame (seconds, CLOCK_REALTIME), None
    unless the socket was opened with ``timestamps``."""
    try:
        data, anc, _flags, addr = sock.recvmsg(MAX_FRAME, ANCILLARY_STAMPED)
    except BlockingIOError:
        return None
    except OSError as e:
        if e.errno != errno.ENETDOWN:
            raise
        return None
    stamp = None
    for level, kind, raw in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= TIMESPEC.size:
            sec, nsec = TIMESPEC.unpack_from(raw)
            stamp = sec + nsec / 1e9
    return _with_tag(data, anc), addr[2], stamp


def _with_tag(data: bytes, anc: list[tuple[int, int, bytes]]) -> bytes:
    """The frame with the tag the kernel moved into auxdata put back after the MACs."""
    for level, kind, raw in anc:
        if level == SOL_PACKET and kind == PACKET_AUXDATA and len(raw) >= AUXDATA.size:
            status, _, _, _, _, tci, tpid = AUXDATA.unpack_from(raw)
            if status & TP_STATUS_VLAN_VALID:
                if not status & TP_STATUS_VLAN_TPID_VALID:
                    tpid = ETH_P_8021Q
                return data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
    return data


def statistics(sock: socket.socket) -> tuple[int, int]:
    """(frames queued, frames the kernel dropped for want of buffer) since the last call:
    reading resets the kernel's counters, so callers accumulate."""
    return STATS.unpack(sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, STATS.size))
