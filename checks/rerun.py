"""One more chance for a live scenario that lost fidelity: the same scenario on a copy of
the lab at RERUN_SCALE x its time scale (every rate slower, so agents and endpoints that
fell behind have more time per frame). That run decides; only if it too loses fidelity is
the scenario left undecided. Virtual time never loses fidelity, and never reruns."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .variants import keep_configs, variant
from ..labs.lab import Lab

RERUN_SCALE = 2.0  # a live scenario that lost fidelity runs once more at this x S

T = TypeVar("T")


def decided(lab: Lab, folder: Path, name: str, attempt: Callable[[Lab, str, float], T],
            fidelity: Callable[[T], dict], rerun: bool = True) -> T:
    """``attempt(lab, name, 1.0)``; if it ran live and its ``fidelity`` is not ok,
    ``attempt(slower, name + "-slower", RERUN_SCALE)`` on the slower copy (the factor, for
    what an attempt sizes in wall seconds), whose fidelity then names the first run
    (``rerun_of``)."""
    first = attempt(lab, name, 1.0)
    lost = fidelity(first)
    if lost["ok"] or not rerun or lab.runtime_name == "sim":
        return first
    with variant(lab, "slower", folder, keep_configs, scale=RERUN_SCALE) as slower:
        again = attempt(slower, f"{name}-slower", RERUN_SCALE)
    fidelity(again)["rerun_of"] = {"name": name, "time_scale": lost.get("time_scale"),
                                   "factor": RERUN_SCALE, "problems": lost["problems"]}
    return again
