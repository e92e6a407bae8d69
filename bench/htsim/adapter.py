"""One all-to-all case for ``htsim_roce`` (``sim/datacenter/main_roce.cpp``), and what it says.

- the case goes in as a connection matrix, one line per flow (``src->dst id N start 0 size
  B``), hosts numbered as htsim numbers them: host ``i`` sits on ToR ``i // (K/2)`` of its
  two-tier leaf-spine of K leaves and K/2 spines (``FatTreeTopology::set_params``), which is
  the rack order of ``labs.generate``'s host names (h1..h<K/2> on leaf1, ...);
- it prints one ``Flow <name> <id> finished at <us> total bytes <B>`` per flow and, at the
  end, ``New: <n> Rtx: <bytes>`` (its RoceSrc never counts new packets, so n is 0; the
  retransmitted figure is bytes gone back over). It counts no events or hops, so its
  frame-hops are derived: a sender sends ceil(size / MTU) packets of an MTU's payload
  (``RoceSrc::send_packet``) plus what it goes back over, its sink acknowledges every one
  (``RoceSink::receivePacket``), and a packet and its ACK each cross the switches of the
  flow's path (1 within a rack, 3 across).
"""
from __future__ import annotations

import math
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

FINISHED = re.compile(r"^Flow (\S+) (\d+) finished at ([0-9.eE+-]+) total bytes (\d+)")
PACKETS = re.compile(r"^New: (\d+) Rtx: (\d+)")
CONNECTION = re.compile(r"^Connection (\d+)->(\d+) starting at")


class HtsimError(RuntimeError):
    """htsim could not run the case, or said something the adapter does not read."""


@dataclass(frozen=True)
class Case:
    """An all-to-all of htsim's two-tier shape: ``hosts`` = K*K/2, K leaves of K/2 hosts,
    K/2 spines, every link at ``speed_mbps``; flows as (src, dst) host indexes."""

    hosts: int
    speed_mbps: int
    mtu: int
    size: int
    flows: tuple[tuple[int, int], ...]

    @property
    def leaves(self) -> int:
        return leaves_of(self.hosts)

    @property
    def hosts_per_leaf(self) -> int:
        return self.hosts // self.leaves

    def switches_on_path(self, src: int, dst: int) -> int:
        same = src // self.hosts_per_leaf == dst // self.hosts_per_leaf
        return 1 if same else 3


def leaves_of(hosts: int) -> int:
    """K of htsim's two-tier fat tree with ``hosts`` = K*K/2 (K even, so racks are whole)."""
    k = round((2 * hosts) ** 0.5)
    if k < 2 or k % 2 or k * k // 2 != hosts:
        raise HtsimError(f"--hosts {hosts}: htsim's two-tier fat tree has K*K/2 hosts for an "
                         "even K (128: K=16, 512: K=32)")
    return k


def matrix(case: Case) -> str:
    """The connection matrix ``ConnectionMatrix::load`` reads; flow ids from 1 (0 is none)."""
    lines = [f"Nodes {case.hosts}", f"Connections {len(case.flows)}"]
    lines += [f"{src}->{dst} id {n} start 0 size {case.size}"
              for n, (src, dst) in enumerate(case.flows, start=1)]
    return "\n".join(lines) + "\n"


def end_us(case: Case) -> int:
    """htsim stops at ``-end`` (default 1000 us), done or not: ten times what the busiest
    sender needs at line rate, so a case never stops for want of time."""
    per_host: dict[int, int] = {}
    for src, _ in case.flows:
        per_host[src] = per_host.get(src, 0) + case.size
    busiest = max(per_host.values(), default=0)
    return max(1000, 10 * round(busiest * 8 / case.speed_mbps))


def argv(binary: str | Path, case: Case, tm_file: str | Path, log_file: str | Path) -> list[str]:
    """``htsim_roce``'s arguments: the two-tier fat tree, ECMP over every spine, a deep
    queue, PFC with thresholds of 40/60 packets, the connection matrix."""
    return [str(binary), "-nodes", str(case.hosts), "-tiers", "2",
            "-linkspeed", str(case.speed_mbps), "-mtu", str(case.mtu),
            "-strat", "ecmp_host", "-paths", str(case.leaves // 2), "-q", "1000",
            "-pfc_thresholds", "40", "60", "-end", str(end_us(case)),
            "-tm", str(tm_file), "-o", str(log_file)]


def parse(lines: Sequence[str], case: Case) -> dict:
    """What htsim printed, read: flows finished and the last one's time, packets, and the
    frame-hops they make (module docstring)."""
    finished: dict[str, float] = {}
    rtx = None
    connections = 0
    for line in lines:
        if (m := FINISHED.match(line)) is not None:
            finished.setdefault(m.group(1), float(m.group(3)))
        elif (m := PACKETS.match(line)) is not None:
            rtx = int(m.group(2))
        elif CONNECTION.match(line):
            connections += 1
    if rtx is None:
        raise HtsimError("htsim printed no 'New: N Rtx: M' line: it did not run to the end")
    if connections != len(case.flows):
        raise HtsimError(f"htsim set up {connections} connections, the case has "
                         f"{len(case.flows)}")
    path_switches = sum(case.switches_on_path(s, d) for s, d in case.flows)
    per_flow = math.ceil(case.size / case.mtu)
    resent = math.ceil(rtx / case.mtu)
    return {"flows": len(case.flows), "flows_completed": len(finished),
            "complete": len(finished) == len(case.flows),
            "simulated_s": max(finished.values(), default=0.0) * 1e-6,
            "data_packets": per_flow * len(case.flows) + resent, "retransmitted_bytes": rtx,
            # a data packet and its ACK over each switch of the path; a resent one over
            # the mean path, as which flows went back is not printed
            "frame_hops": round(2 * (per_flow * path_switches
                                     + resent * path_switches / len(case.flows)))}


def check_binary(binary: str | Path) -> None:
    """HtsimError unless ``binary`` is a file this user can run."""
    if not (Path(binary).is_file() and os.access(binary, os.X_OK)):
        raise HtsimError(f"--htsim {binary}: not an executable file (build it with "
                         "bench/htsim/build.sh SRC)")


def run(binary: str | Path, case: Case, timeout_s: float = 3600) -> dict:
    """Run htsim on ``case`` in a scratch folder (it writes a log file where it runs): wall
    seconds, CPU seconds, peak RSS, and ``parse``'s reading of its output."""
    check_binary(binary)
    with tempfile.TemporaryDirectory(prefix="rocelab-htsim-") as tmp:
        folder = Path(tmp)
        tm = folder / "case.cm"
        tm.write_text(matrix(case))
        out_path = folder / "stdout.txt"
        with open(out_path, "w") as out:
            wall, cpu, rss_kib, code = measured(
                argv(binary, case, tm, folder / "logout.dat"), folder, out, timeout_s)
        text = out_path.read_text(errors="replace")
    if code != 0:
        tail = text.strip().splitlines()[-1:] or ["(nothing printed)"]
        raise HtsimError(f"htsim exited with {code}: {tail[0]}")
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": rss_kib / 1024,
            **parse(text.splitlines(), case)}


def measured(cmd: list[str], cwd: Path, stdout,
             timeout_s: float) -> tuple[float, float, int, int]:
    """Run ``cmd`` (an argv, no shell) to its end: (wall s, CPU s, peak RSS in KiB, exit
    code, negative for a signal). Killed past ``timeout_s``, which is an exit by SIGKILL.
    CPU seconds beside wall seconds say whether it had a core to itself."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=stdout, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    wall = time.perf_counter() - start
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, code
