"""``tune``: sweep ECN marking and DCQCN on a lab in virtual time, and recommend a setting
(``checks.tune``, docs/tune.md)."""
from __future__ import annotations

from pathlib import Path

from invoke import task

from ...labs.live import lab_name
from .common import USER_ERRORS, console, fail


@task(iterable=["bound", "scenario"],
      help={"name": "lab name (topologies/NAME) or path to a .clab.yml",
            "results": "folder for the runs and the report (default: results/tune-<lab>/; "
                       "a rerun into the same folder skips what it holds)",
            "points": "Latin-hypercube points to sample (default 6)",
            "grid": "a grid of this many levels per dimension instead of a sample",
            "seed": "the sample's seed and the first simulation seed (default 0)",
            "seeds": "simulation seeds per point and scenario (default 1)",
            "bound": "NAME=LO:HI (or NAME=VALUE) overriding a bound or adding a DCQCN "
                     "parameter to the sweep; repeatable",
            "scenario": "incast, alltoall or both; repeatable (default: all three)",
            "workers": "local processes (default: every core)",
            "fraction": "run this fraction of each scenario's volume: a quick look (the "
                        "ECN check's verdict needs 1, the default)",
            "cluster": "a Dask scheduler address (tcp://host:8786): run there instead"})
def tune(c, name, results="", points=6, grid=0, seed=0, seeds=1, bound=None, workers=0,
         cluster="", fraction=1.0, scenario=None):
    """Sweep WRED/ECN (Kmin, Kmax, Pmax) and DCQCN on the lab's incast, an all-to-all and
    both at once, beside NVIDIA's, Alibaba's and PFC-only settings; write the Pareto plot,
    the table and the recommended setting as an edited copy of the lab plus a JSON patch."""
    from ...checks.incast import NoIncast
    from ...checks.tune import plan, tune as sweep, verdict
    from ...checks.tune_apply import ApplyError
    from ...checks.tune_run import SCENARIOS
    from ...checks.tune_space import SpaceError
    try:
        folder = Path(results) if results else Path.cwd() / "results" / f"tune-{lab_name(name)}"
        p = plan(name, points=int(points), seed=int(seed), seeds=int(seeds),
                 levels=int(grid), bounds=list(bound or []), fraction=float(fraction),
                 scenarios=tuple(scenario or SCENARIOS))
        console.print(f"tune {p.clab}: {len(p.points)} points x {len(p.seeds)} seeds x "
                      f"{len(p.scenarios)} scenarios into {folder}")
        outcome = sweep(p, folder, workers=int(workers) or None, cluster=cluster or None)
    except (SpaceError, ApplyError) as e:
        raise fail(str(e)) from None
    except NoIncast as e:
        raise fail(f"{e}: nothing for tune to measure") from None
    except USER_ERRORS as e:
        raise fail(e) from None
    chosen = outcome["recommended"]
    if chosen is None:
        console.print(f"no recommendation: every point lost data; report {folder / 'report.md'}")
        return
    said = verdict(outcome["passes_ecn_check"]).replace("*", "")
    again = outcome["recheck"]
    if again is not None:
        said += ("; rerun on the recommended copy: " +
                 ("passes" if not again["problems"] else "fails"))
    console.print(f"recommended: {chosen} ({said}); report {folder / 'report.md'}")
