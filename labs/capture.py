"""Capture on every wire of a lab at once, from one process, both directions.

Each AF_PACKET socket is created inside the namespace of the node it listens for (a socket
stays bound to the namespace it was born in), by a short-lived thread that enters that
namespace: ``setns`` moves only the calling thread, so the rest of the process never leaves
its own namespace. One reader thread then serves all sockets and records what matches, with
the node, the interface and the direction as that node saw it.

    with Capture(lab, match=lambda f: NONCE in f, pcap_dir=Path("evidence")) as cap:
        send()
        cap.wait_quiet()
    sightings = cap.frames()
"""
from __future__ import annotations

import os
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol, TypeVar

from pyroute2 import netns

from ..fabric import afpacket
from .pcap import PcapFiles
from .sighting import Direction, Sighting
from .topology import Topology

T = TypeVar("T")
Match = Callable[[bytes], bool]

BATCH = 64  # frames drained from one socket before the reader looks at the others


def run_in_netns(namespace: str, fn: Callable[[], T]) -> T:
    """``fn()`` on a fresh thread that entered ``namespace`` first; the thread then ends,
    so no thread of this process is left in a foreign namespace."""
    result: list[T] = []
    error: list[BaseException] = []

    def body() -> None:
        try:
            netns.setns(namespace, flags=0)  # flags=0: never create a missing namespace
            result.append(fn())
        except BaseException as e:  # handed to the caller's thread
            error.append(e)

    thread = threading.Thread(target=body, name=f"netns-{namespace}")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


def open_sockets(namespace: str, ifaces: list[str], *, timestamps: bool = False,
                 bpf: list[tuple[int, int, int, int]] | None = None) -> list[socket.socket]:
    """AF_PACKET sockets on ``ifaces`` of ``namespace``, seeing both directions; all or
    none."""
    def open_all() -> list[socket.socket]:
        socks: list[socket.socket] = []
        try:
            for iface in ifaces:
                socks.append(afpacket.open_socket(iface, timestamps=timestamps, bpf=bpf))
        except OSError:
            for sock in socks:
                sock.close()
            raise
        return socks

    return run_in_netns(namespace, open_all)


@dataclass
class _Tap:
    node: str
    iface: str
    sock: socket.socket
    kernel_drops: int = 0


class LiveNamespaces(Protocol):
    """What a capture needs of a live lab (``labs.live.LiveLab``): its wires and where each
    node's network namespace is."""

    name: str
    topology: Topology

    def namespace(self, node: str) -> str: ...


class Capture:
    """Records the frames ``match`` accepts (all by default) on the lab's wires.

    ``where`` limits it to some (node, iface) pairs; by default every wired interface of
    every node, hosts and switches. With ``pcap_dir`` the recorded frames also go to one
    pcapng file per interface, for Wireshark.
    """

    def __init__(self, lab: LiveNamespaces, *, where: Iterable[tuple[str, str]] | None = None,
                 pcap_dir: Path | None = None, match: Match | None = None,
                 bpf: list[tuple[int, int, int, int]] | None = None) -> None:
        self.lab = lab
        self.where = list(where) if where is not None else [
            (node, iface) for node in lab.topology.nodes
            for iface in lab.topology.interfaces(node)]
        self.pcap = PcapFiles(pcap_dir) if pcap_dir is not None else None
        self.match = match
        self.bpf = bpf  # a kernel-side prefilter (``afpacket.dst_mac_filter``); match still applies
        self._taps: list[_Tap] = []
        self._records: list[tuple[_Tap, Direction, float, bytes]] = []
        self._last = 0.0  # monotonic time of the last recorded frame
        self._cond = threading.Condition()
        self._sel = selectors.DefaultSelector()
        self._wakeup_r, self._wakeup_w = os.pipe()
        self._reader: threading.Thread | None = None
        self._wall_offset = time.time() - time.monotonic()

    def __enter__(self) -> Capture:
        try:
            self._open()
        except BaseException:
            self._close()
            raise
        self._reader = threading.Thread(target=self._read_loop, name="capture", daemon=True)
        self._reader.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._reader is not None:
            os.write(self._wakeup_w, b"x")
            self._reader.join()
        self._close()

    def _open(self) -> None:
        by_node: dict[str, list[str]] = {}
        for node, iface in self.where:
            by_node.setdefault(node, []).append(iface)
        for node, ifaces in by_node.items():
            namespace = self.lab.namespace(node)
            socks = open_sockets(namespace, ifaces, timestamps=True, bpf=self.bpf)
            for iface, sock in zip(ifaces, socks):
                tap = _Tap(node, iface, sock)
                self._taps.append(tap)
                self._sel.register(sock, selectors.EVENT_READ, tap)
        self._sel.register(self._wakeup_r, selectors.EVENT_READ, None)

    def _close(self) -> None:
        for tap in self._taps:
            tap.kernel_drops += afpacket.statistics(tap.sock)[1]
            tap.sock.close()
        self._sel.close()
        os.close(self._wakeup_r)
        os.close(self._wakeup_w)
        if self.pcap is not None:
            self.pcap.close()

    def _read_loop(self) -> None:
        while True:
            for key, _ in self._sel.select():
                if key.data is None:
                    return
                self._drain(key.data)

    def _drain(self, tap: _Tap) -> None:
        """Frames time-stamped by the kernel: this loop reads sockets in whatever order
        they became ready, not in the order frames crossed the wires."""
        for _ in range(BATCH):
            got = afpacket.recv_stamped(tap.sock)
            if got is None:
                return
            frame, pkttype, stamp = got
            if self.match is not None and not self.match(frame):
                continue
            now = time.monotonic()
            when = now if stamp is None else stamp - self._wall_offset
            direction: Direction = "out" if pkttype == socket.PACKET_OUTGOING else "in"
            if self.pcap is not None:
                self.pcap.write(tap.node, tap.iface, direction,
                                round((when + self._wall_offset) * 1e9), frame)
            with self._cond:
                self._records.append((tap, direction, when, frame))
                self._last = now
                self._cond.notify_all()

    def frames(self, match: Match | None = None) -> list[Sighting]:
        """What was recorded so far (and ``match`` accepts), in the order the kernel saw it."""
        with self._cond:
            records = sorted(self._records, key=lambda r: r[2])
        return [Sighting.of(tap.node, tap.iface, direction, when, frame)
                for tap, direction, when, frame in records
                if match is None or match(frame)]

    def wait_quiet(self, quiet: float = 0.2, timeout: float = 3.0) -> bool:
        """Return once no frame was recorded for ``quiet`` seconds (True), or at
        ``timeout`` (False): frames still in flight when a fixed sleep ends would be
        missed, a quiet wire says the fabric is done with them."""
        start = time.monotonic()
        deadline = start + timeout
        with self._cond:
            while True:
                now = time.monotonic()
                quiet_at = max(self._last, start) + quiet
                if now >= quiet_at:
                    return True
                if now >= deadline:
                    return False
                self._cond.wait(min(quiet_at, deadline) - now)

    def kernel_drops(self) -> int:
        """Frames the kernel dropped before this capture could read them: nonzero means
        the sightings are incomplete. Final once the capture is closed."""
        return sum(tap.kernel_drops for tap in self._taps)
