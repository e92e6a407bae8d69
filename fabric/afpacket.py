"""Raw Ethernet on a Linux interface: AF_PACKET sockets as the switch agent and captures use them.

Two kernel habits would otherwise lie to a reader of raw frames, and are undone here:

- the kernel strips a received frame's 802.1Q tag into metadata (``PACKET_AUXDATA``), so a
  priority tag or a VID would silently vanish: ``recv_frame`` puts the tag back inline;
- the socket buffer overflows silently under bursts: sockets are opened deep
  (``SO_RCVBUFFORCE``), and ``statistics`` tells how many frames the kernel dropped anyway.

A reader serving many sockets takes frames out of order of their arrival; where the order
matters (a capture along a path), ``recv_stamped`` gives the kernel's own arrival time.

A reader that must keep up with a wire (the switch agent) maps the socket's receive queue
into its memory instead (``RxRing``): taking a frame is then a copy, not a system call.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import socket
import struct
import sys

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
VLAN_TAG = struct.Struct("!HH")
# PACKET_RX_RING, TPACKET_V2 (linux/if_packet.h)
PACKET_RX_RING = 5
PACKET_VERSION = 10
TPACKET_V2 = 1
TP_STATUS_KERNEL = 0  # written to a slot's status word: the slot is the kernel's again
TP_STATUS_USER = 1  # the slot holds a frame for us
SLOT_STATUS = struct.Struct("=I")  # tp_status: one pack_into is cheaper than a slice store
# struct tpacket2_hdr: status, len, snaplen, mac, net, sec, nsec, vlan_tci, vlan_tpid; the
# per-frame path reads only the parts it needs (SLOT_*), tests lay out whole slots with it
TPACKET2_HDR = struct.Struct("=IIIHHIIHH")
TPACKET2_HDR_SPACE = 32  # TPACKET_ALIGN(sizeof(struct tpacket2_hdr)); struct sockaddr_ll follows
SLOT_FRAME = struct.Struct("=4xIIH")  # the header's fields every frame needs: len, snaplen, mac
SLOT_TAG = struct.Struct("=HH")  # tp_vlan_tci, tp_vlan_tpid
SLOT_TAG_OFFSET = 24  # of tp_vlan_tci in struct tpacket2_hdr
SLL_PKTTYPE = 10  # offset of sll_pkttype in struct sockaddr_ll
SLOT_PKTTYPE = TPACKET2_HDR_SPACE + SLL_PKTTYPE
PACKET_OUTGOING = socket.PACKET_OUTGOING
# every TP_STATUS_* flag read here is in the status word's least significant byte
STATUS_FLAGS = 0 if sys.byteorder == "little" else 3
RING_SLOT = 9344  # header, sockaddr_ll and a frame of SONiC's largest MTU (9216) + 14
RING_BLOCK = 1 << 17  # 14 slots; blocks are what the kernel allocates contiguously
RING_BLOCKS = 128
RING_SLOTS = RING_BLOCK // RING_SLOT * RING_BLOCKS  # 1792 (16 MiB): what 4 MiB of skbs held
SIOCGIFFLAGS = 0x8913
IFREQ = struct.Struct("16sH22x")  # struct ifreq: name, ifr_flags (the rest of the union)
IFF_UP, IFF_RUNNING = 0x1, 0x40  # administratively up; operationally up (carrier)


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
                rcvbuf: int = RCVBUF, rx_ring: bool = False,
                bpf: list[tuple[int, int, int, int]] | None = None) -> socket.socket:
    """A non-blocking raw socket bound to ``iface`` of the calling thread's namespace.

    ``ignore_outgoing`` keeps the socket's own and its host's transmissions out of its
    receive queue (Linux >= 4.20; older kernels still mark them ``PACKET_OUTGOING``).
    ``timestamps`` makes the kernel stamp each frame, for ``recv_stamped``. ``rx_ring``
    makes it deliver into a ring (``RxRing.of``) rather than the receive queue; set before
    ``bind``, so that no frame is left behind in the queue. ``bpf`` filters in the kernel,
    also before binding, so no unwanted frame is ever queued.
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
        if rx_ring:
            sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
            sock.setsockopt(SOL_PACKET, PACKET_RX_RING,
                            struct.pack("IIII", RING_BLOCK, RING_BLOCKS, RING_SLOT, RING_SLOTS))
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
                return data[:12] + VLAN_TAG.pack(tpid, tci) + data[12:]
    return data


class RxRing:
    """A socket's receive queue mapped into memory (``PACKET_RX_RING``, ``TPACKET_V2``).

    The kernel writes each frame into the next slot of a ring and flags it ours; ``take``
    copies frames out and hands their slots back, so a busy reader takes frames without a
    system call each (``select`` still says when the ring has frames). The tag the kernel stripped
    is in the slot's header rather than in ancillary data. A frame longer than a slot (a
    wire whose MTU exceeds SONiC's 9216) arrives truncated: ``take`` skips it and counts it
    in ``truncated``, as the kernel counts its own drops.
    """

    def __init__(self, ring: mmap.mmap | bytearray, slots: int, slot_size: int = RING_SLOT,
                 block_size: int = RING_BLOCK) -> None:
        """``ring``: the mapping (a bytearray laid out alike in tests)."""
        per_block = block_size // slot_size
        self.ring = ring
        self.slots = [(i // per_block) * block_size + (i % per_block) * slot_size
                      for i in range(slots)]
        self.next = 0
        self.truncated = 0

    @classmethod
    def of(cls, sock: socket.socket) -> RxRing:
        """The ring of a socket opened with ``open_socket(..., rx_ring=True)``."""
        return cls(mmap.mmap(sock.fileno(), RING_BLOCK * RING_BLOCKS), RING_SLOTS)

    def take(self, limit: int) -> list[bytes]:
        """Up to ``limit`` frames that arrived, oldest first, 802.1Q tags restored; none
        when the ring holds nothing for us. Our own host's transmissions, which kernels
        before 4.20 deliver despite ``ignore_outgoing``, are left out. One call a batch:
        this is the agent's per-frame path."""
        ring, slots, n, at_slot = self.ring, self.slots, len(self.slots), self.next
        header, flags_at, pkttype_at = SLOT_FRAME.unpack_from, STATUS_FLAGS, SLOT_PKTTYPE
        hand_back = SLOT_STATUS.pack_into
        frames: list[bytes] = []
        while len(frames) < limit:
            at = slots[at_slot]
            flags = ring[at + flags_at]
            if not flags & TP_STATUS_USER:
                break
            length, snaplen, mac = header(ring, at)
            start = at + mac
            frame = ring[start:start + snaplen]
            outgoing = ring[at + pkttype_at] == PACKET_OUTGOING
            hand_back(ring, at, TP_STATUS_KERNEL)  # the slot is the kernel's again
            at_slot += 1
            if at_slot == n:
                at_slot = 0
            if snaplen < length:
                self.truncated += 1
            elif not outgoing:
                if flags & TP_STATUS_VLAN_VALID:
                    tci, tpid = SLOT_TAG.unpack_from(ring, at + SLOT_TAG_OFFSET)
                    if not flags & TP_STATUS_VLAN_TPID_VALID:
                        tpid = ETH_P_8021Q
                    frame = frame[:12] + VLAN_TAG.pack(tpid, tci) + frame[12:]
                frames.append(frame)
        self.next = at_slot
        return frames

    def close(self) -> None:
        if isinstance(self.ring, mmap.mmap):
            self.ring.close()


def link_running(iface: str) -> bool:
    """Whether ``iface`` exists in the calling thread's namespace, is up and has carrier:
    one ioctl, cheap enough to poll for a port whose wire went away."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as probe:
        try:
            reply = fcntl.ioctl(probe, SIOCGIFFLAGS, IFREQ.pack(iface.encode(), 0))
        except OSError:  # ENODEV: no such interface (any more)
            return False
    flags = IFREQ.unpack(reply)[1]
    return flags & (IFF_UP | IFF_RUNNING) == IFF_UP | IFF_RUNNING


def statistics(sock: socket.socket) -> tuple[int, int]:
    """(frames queued, frames the kernel dropped for want of buffer) since the last call:
    reading resets the kernel's counters, so callers accumulate."""
    return STATS.unpack(sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, STATS.size))


SLOT_STAMP = struct.Struct("=II")  # tp_sec, tp_nsec: the kernel's receive time
SLOT_STAMP_OFFSET = 16  # of tp_sec in struct tpacket2_hdr


def oldest_stamp(ring: RxRing) -> float | None:
    """When the kernel received the oldest frame waiting in ``ring`` (seconds,
    CLOCK_REALTIME, as ``time.time()``); None when the ring holds nothing for us. The agent
    compares it with its clock to measure how long frames wait before it takes them."""
    at = ring.slots[ring.next]
    if not ring.ring[at + STATUS_FLAGS] & TP_STATUS_USER:
        return None
    sec, nsec = SLOT_STAMP.unpack_from(ring.ring, at + SLOT_STAMP_OFFSET)
    return sec + nsec * 1e-9
