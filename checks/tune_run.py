"""One ``tune`` measurement: a point applied to a copy of the lab (``tune_apply``), simulated
in virtual time with a seed, under one of the lab's own scenarios, reduced to the figures
the trade-off is drawn from. A plain function of plain data (``Task`` in, a dict out), so
that a process pool or a Dask worker runs it as it is, and the same task always gives the
same dict.

The scenarios are the congestion checks' (``checks.congestion``): the ECN check's incast
(``ecn_load``: every host that reaches the lab's receiver writes into it, long enough to
judge DCQCN after its start-up), an all-to-all among the same hosts carrying the same
volume (every pair one QP, MESSAGES messages), and the two at once.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from . import congestion as cg
from . import incast as ic
from .tune_apply import apply, copy_lab
from ..labs import topology
from ..labs.runtimes.sim import SimLab, simulated
from ..traffic import patterns

SCENARIOS = ("incast", "alltoall", "both")


@dataclass(frozen=True)
class Task:
    """Measure ``point`` (``tune_space``) on ``scenario`` of the lab at ``clab``, ``seed``."""

    clab: str
    point_name: str
    point: dict
    scenario: str
    seed: int
    fraction: float = 1.0  # of every message's size and of the start-up left out: a quick
    #                        look (and the tests') at a scenario; the ECN check's verdict
    #                        needs the whole (1)


def flows(lab: SimLab, incast: ic.Incast, scenario: str, fraction: float = 1.0
          ) -> tuple[list[patterns.FlowSpec], float]:
    """The scenario's flows and its time limit (``incast.time_limit``), messages cut to
    ``fraction`` of their size (whole MTUs, one at least)."""
    mtu = ic.roce_mtu(lab, incast)
    into = [replace(f, size=ic.whole_mtus(f.size * fraction, mtu))
            for f in cg.ecn_load(lab, incast).flows]
    hosts = sorted([incast.receiver, *incast.senders])
    pairs = len(hosts) * (len(hosts) - 1)
    per_message = ic.flow_bits(into) / 8 / (pairs * cg.MESSAGES)
    among = patterns.alltoall(hosts, ic.whole_mtus(per_message, mtu), cg.MESSAGES)
    chosen = {"incast": into, "alltoall": among, "both": into + among}[scenario]
    return chosen, ic.time_limit(lab, incast, ic.flow_bits(chosen), 180.0)


def pause_fraction(run: cg.Run) -> float:
    """After the start-up: the largest share of that time any lossless PG of any switch port
    held XOFF (the worst-paused input, wherever the scenario congests)."""
    worst = 0.0
    for node, port, now in run.ports(run.after):
        then = run.startup[node]["ports"][port]["pgs"]
        for pg, c in now["pgs"].items():
            if c["lossless"]:
                worst = max(worst, c["xoff_seconds"] - then[pg]["xoff_seconds"])
    return worst / run.window_s()


def figures(lab: SimLab, incast: ic.Incast, run: cg.Run) -> dict:
    """The measures of one run: pause fraction, the bottleneck's share of its line rate
    (after the start-up), flow completion p50 / p99 (fabric seconds), CE marks, CNPs,
    drops (every reason, every switch) and retransmissions; for the incast, the ECN check's
    own figures (``congestion.after_startup``) as well."""
    fct = [f["elapsed_s"] for f in run.result["flows"]]
    out = {"pause_fraction": round(pause_fraction(run), 4),
           "share": round(run.line_share(incast.switch, incast.port,
                                         ic.bottleneck_bps(lab, incast)), 4),
           "fct_p50_s": float(np.percentile(fct, 50)), "fct_p99_s": float(np.percentile(fct, 99)),
           "ce_marks": run.marks(), "cnps": run.cnps(),
           "drops": sum(run.drop_reasons().values()), "drop_reasons": run.drop_reasons(),
           "retransmitted": run.flows("retransmitted"), "complete": run.result["complete"]}
    return out


def measure(task: Task) -> dict:
    """The task's figures, from a copy of the lab with its point applied, in a scratch
    folder removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="rocelab-tune-") as scratch:
        topo = topology.load(task.clab)
        clab = copy_lab(topo, Path(scratch) / "lab")
        apply(topo, clab, task.point)
        lab = simulated(str(clab), seed=task.seed)
        incast = ic.incast_of(lab)
        chosen, timeout_s = flows(lab, incast, task.scenario, task.fraction)
        run = cg.run_incast(lab, incast, Path(scratch) / "runs", task.scenario, flows=chosen,
                            timeout_s=timeout_s, startup_s=cg.STARTUP_S * task.fraction)
        out = figures(lab, incast, run)
        if task.scenario == "incast":
            out["ecn_check"] = cg.after_startup(lab, incast, run)
        lab.down()
    return out
