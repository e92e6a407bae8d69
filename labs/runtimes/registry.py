"""Which runtime a lab runs in: one table from the names users type (``--runtime``, a lab's
recorded state) to the runtimes that deploy labs, and the interface each of them provides.

The ``sim`` runtime deploys nothing (the lab lives in the process that simulates it:
``labs.runtimes.sim.simulated``), so it is named here only to say so.
"""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Protocol

from ..errors import LabError
from ..state import LabState
from ..topology import Node, Topology
from .containerlab import ContainerlabRuntime
from .netns import NetnsRuntime


class Runtime(Protocol):
    """What ``labs.live.LiveLab`` asks of the runtime that deployed it."""

    name: str
    runs_frr: bool  # BGP switches run FRR here, whose sessions lab.status reads

    def up(self, topo: Topology) -> LabState: ...

    def down(self, state: LabState, logs: Path | None = None) -> None: ...

    def exec_argv(self, state: LabState, node: str, argv: list[str]) -> list[str]: ...

    def exec(self, state: LabState, node: str, argv: list[str],
             timeout: float | None = None) -> subprocess.CompletedProcess: ...

    def runs_agent(self, node: Node) -> bool: ...


RUNTIMES: dict[str, type[Runtime]] = {"netns": NetnsRuntime,
                                      "containerlab": ContainerlabRuntime}


def runtime_for(name: str) -> Runtime:
    if name == "sim":
        raise LabError("the sim runtime lives in the process that uses it, so there is no "
                       "lab to bring up or down: run invoke check LAB --runtime sim, or "
                       "invoke traffic.incast|alltoall|allreduce LAB --runtime sim")
    if name not in RUNTIMES:
        raise LabError(f"unknown runtime {name!r} (available: {', '.join(RUNTIMES)}, "
                       "and sim for checks and traffic)")
    return RUNTIMES[name]()
