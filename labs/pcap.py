"""pcapng files of captured frames, one per (node, iface), for Wireshark: written by live
captures (``labs.capture``) and by the simulator's taps alike."""
from __future__ import annotations

import struct
from fractions import Fraction
from pathlib import Path

from scapy.packet import Raw
from scapy.utils import PcapNgWriter

from .sighting import Direction

DLT_EN10MB = 1  # pcap link type: Ethernet
PCAPNG_DIRECTION = {"in": 1, "out": 2}  # pcapng EPB flags: inbound, outbound


class NsPcapNgWriter(PcapNgWriter):
    """pcapng with nanosecond timestamps (``if_tsresol`` 9 on every interface): scapy's
    writer stores microseconds, which would merge a simulated 100G link's frames (86 ns
    apart) and round a live capture's kernel stamps."""

    def __init__(self, filename: str) -> None:
        super().__init__(filename)
        self.tsresol = 10**9

    def _write_block_idb(self, linktype: int, ifname: bytes | None = None) -> None:
        endian = self.endian
        opts = b""
        if ifname is not None:
            opts += struct.pack(endian + "HH", 2, len(ifname)) + self._add_padding(ifname)
        opts += struct.pack(endian + "HHB3x", 9, 1, 9)  # if_tsresol: 10^-9 s
        opts += struct.pack(endian + "HH", 0, 0)
        body = struct.pack(endian + "HHI", linktype, 0, 262144)
        self.f.write(self.build_block(struct.pack(endian + "I", 1), body, options=opts))


class PcapFiles:
    """One pcapng file per (node, iface), both directions in it, each frame flagged
    inbound or outbound (classic pcap cannot say which), named ``<node>-<iface>.pcapng``,
    stamped to the nanosecond (wall time live, simulated time in virtual time)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._writers: dict[tuple[str, str], NsPcapNgWriter] = {}

    def path(self, node: str, iface: str) -> Path:
        return self.folder / f"{node}-{iface}.pcapng"

    def write(self, node: str, iface: str, direction: Direction, time_ns: int,
              frame: bytes) -> None:
        writer = self._writers.get((node, iface))
        if writer is None:
            writer = self._writers[node, iface] = NsPcapNgWriter(str(self.path(node, iface)))
            writer.linktype = DLT_EN10MB  # scapy cannot infer it from raw bytes
            writer.write_header(None)
        pkt = Raw(frame)  # raw: the file holds the exact bytes, not a scapy rebuild
        pkt.time = Fraction(time_ns, 10**9)  # exact under the writer's int(time * 10^9)
        pkt.direction = PCAPNG_DIRECTION[direction]
        pkt.sniffed_on = f"{node}:{iface}"
        writer.write_packet(pkt)

    def close(self) -> list[Path]:
        """Flush and close; the files written."""
        for writer in self._writers.values():
            writer.close()
        paths = [self.path(node, iface) for node, iface in self._writers]
        self._writers.clear()
        return paths
