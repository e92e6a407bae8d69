"""The time scale S a live lab runs at, chosen at ``lab.up`` for the machine it runs on.

A live lab's lateness (how late agents and endpoints take and send frames) is scheduling
delay: it grows with the share of the cores the lab's incast keeps busy, long before the
cores are full. The project's reference measurement is the default lab at S = 3000 on an
idle 2-core machine: every check decided, the worst p99 lateness at 0.86 of its bound. So a
lab that declares no S (label ``rocelab.time-scale`` absent or ``auto``) is given that
run's CPU headroom per frame: S is raised until its incast needs no larger share of what
this machine offers *now* than the reference lab needed of the reference machine.

What this machine offers is measured at ``lab.up``, in under a second: the cores free (the
machine's idle time over a short window, /proc/stat: a core a CPU-bound process holds is not
free). The per-core speed (the endpoint's per-frame work, a RoCEv2 data frame built and
parsed by ``nic.codec``, timed in one process) is measured and recorded beside it, but does
not choose S: on the reference machine (a 2-vCPU virtual machine) the best of three short
windows still read 1.7x slow in one measurement of five, which would make S jump between
runs of one lab on one idle machine. The lab's demand is ``labs.load``'s: frame-hops a second
its agents forward when every host sends at its port's rate / S (the endpoints' frames are
in proportion to them).

A lab that declares S keeps it: its author chose it, and its variants (the checks' copies)
are written with their parent's S, so a check's negative control runs at its lab's S.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..nic import codec
from . import load
from .topology import Topology

REFERENCE_SCALE = 3000.0  # the default lab's S in the reference measurement
# its incast's frame-hops a second then (labs.load), against its agents' budget on 2 cores
REFERENCE_DEMAND_FPS = 11_990
REFERENCE_SHARE = REFERENCE_DEMAND_FPS / (2 * load.MEASURED_AGENT_PPS)
REFERENCE_CORE_FPS = 280_000.0  # the per-frame workload below, one core of that machine (median)
IDLE_WINDOW_S = 0.3  # how long the machine's idle time is sampled
WINDOW_S = 0.08  # each timed window of the workload
WINDOWS = 3
NEAR = 1.15  # a choice within this factor of the floor keeps the floor: runs stay alike
STEP = 500.0  # S is rounded up to a multiple of this
MAX_FACTOR = 8.0  # past floor x this, a check would take too long: warn and stop there
MIN_CORES_FREE = 0.01  # a machine with none free (every core busy) is counted as this: capped


@dataclass(frozen=True)
class Machine:
    core_fps: float  # the workload's rate on one core now
    cores: int  # the machine's cores
    cores_free: float  # idle core-seconds a second


@dataclass(frozen=True)
class Calibration:
    time_scale: float  # S chosen
    floor: float  # S the lab would run at on the reference machine
    core_fps: float
    cores: int
    cores_free: float
    share: float  # the lab's incast at S, against this machine's budget now
    capped: bool  # the machine needs more than MAX_FACTOR x floor

    def as_record(self) -> dict[str, float | int | bool]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(self).items()}

    def line(self, lab: str) -> str:
        free = f"{self.cores_free:.1f} of {self.cores} cores free"
        speed = f"per-core speed {self.core_fps / REFERENCE_CORE_FPS:.2f}x the reference"
        if self.time_scale == self.floor:
            why = f"the lab's floor ({free}, {speed})"
        else:
            why = f"raised from {self.floor:g} ({free}, {speed})"
        warn = (f"; this machine needs more than {self.time_scale:g}: congestion checks may "
                "come out INCONCLUSIVE, --runtime sim decides them" if self.capped else "")
        return f"lab {lab}: time scale S = {self.time_scale:g}, {why}{warn}"


def calibrated(lab: str, record: dict) -> str:
    """The line that says which S a lab runs at and why, from its state's record."""
    return Calibration(**record).line(lab)


def _workload(seconds: float) -> int:
    """RoCEv2 data frames built and parsed in ``seconds``: an endpoint's per-frame work."""
    headers = codec.Headers("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.0.2",
                            dscp=26, ecn=2, sport=49152)
    done, psn = 0, 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(50):
            frame = codec.data_frame(headers, 17, psn, 0x0A, 1024, ackreq=True)
            codec.parse(frame)
            psn = (psn + 1) & 0xFFFFFF
        done += 50
    return done


def cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot (/proc/stat)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def idle_cores(seconds: float = IDLE_WINDOW_S, cores: int | None = None) -> float:
    """Cores left idle by everything else over ``seconds`` (this process sleeps)."""
    cores = cores or os.cpu_count() or 1
    busy0, total0 = cpu_jiffies()
    time.sleep(seconds)
    busy1, total1 = cpu_jiffies()
    total = max(1, total1 - total0)
    return cores * (total - (busy1 - busy0)) / total


def measure(cores: int | None = None, seconds: float = WINDOW_S) -> Machine:
    """The cores free, then the workload's best rate over a few windows on one core."""
    cores = cores or os.cpu_count() or 1
    free = idle_cores(cores=cores)
    _workload(2 * seconds)  # warm up: a core idle a moment ago runs slow at first
    best = max(_workload(seconds) / seconds for _ in range(WINDOWS))
    return Machine(best, cores, free)


def floor_of(topo: Topology) -> float:
    """The S an auto lab starts from: the largest of its nodes' (the default, or what a
    port's speed needs for PFC to be refreshable)."""
    return max((n.time_scale for n in topo.nodes.values() if n.time_scale_auto),
               default=REFERENCE_SCALE)


def choose(topo: Topology, machine: Machine) -> Calibration:
    """The smallest S, at least the lab's floor, at which its incast needs no larger share
    of this machine's free cores now than the reference lab needed of the reference
    machine's two."""
    floor = floor_of(topo)
    at_floor = load.estimate(topo.with_time_scale(floor), cores=machine.cores,
                             rate=load.MEASURED_AGENT_PPS)
    budget = load.MEASURED_AGENT_PPS * max(machine.cores_free, MIN_CORES_FREE)
    share_at_floor = at_floor.demand_fps / budget
    wanted = floor * share_at_floor / REFERENCE_SHARE  # demand falls as 1/S
    # a step's 0.1 % is rounding in the reference figures, not a reason for the next step
    scale = floor if wanted <= floor * NEAR else math.ceil(wanted / STEP - 1e-3) * STEP
    capped = scale > floor * MAX_FACTOR
    scale = min(scale, floor * MAX_FACTOR)
    return Calibration(scale, floor, machine.core_fps, machine.cores, machine.cores_free,
                       share_at_floor * floor / scale, capped)


def calibrate(topo: Topology, machine: Machine | None = None) -> tuple[Topology, Calibration | None]:
    """``topo`` at the S chosen for this machine, and how it was chosen; a lab whose nodes
    all declare S is returned as it is, with None."""
    if not any(n.time_scale_auto for n in topo.nodes.values()):
        return topo, None
    chosen = choose(topo, machine or measure())
    return topo.with_time_scale(chosen.time_scale), chosen
