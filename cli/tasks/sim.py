"""``sim.*``: the virtual-time runtime next to the live one (docs/runtimes.md)."""
from __future__ import annotations

from pathlib import Path

from invoke import Collection, Exit, task
from rich.table import Table

from ...labs.live import lab_name
from .common import FAILED, USER_ERRORS, checked_jitter_ns, console, fail


@task(help={"name": "lab name (topologies/NAME) or path to a .clab.yml",
            "results": "folder for the runs (default: results/compare-<lab>-<time>/)",
            "seeds": "how many simulated runs, seeds 0 .. N-1, to compare the live run with",
            "jitter_ns": "the simulated runs' mean timing jitter per hop, fabric ns (default: "
                         "what the live run measured; 0: exact clocks)"})
def compare(c, name, results="", seeds=5, jitter_ns=""):
    """Each congestion scenario live and in virtual time at the lab's S, side by side:
    verdicts, PFC frames, pause time, completion time, frames lost; the live run against
    the spread of several seeds (docs/runtimes.md)."""
    from ...checks import compare as cmp
    from ...checks import run as checks
    try:
        if int(seeds) < 1:
            raise ValueError(f"--seeds {seeds}: at least one simulated run is needed")
        jitter = checked_jitter_ns(jitter_ns) if jitter_ns != "" else None
        folder = Path(results) if results else checks.fresh_results(
            f"compare-{lab_name(name)}")
        rows, jitter = cmp.compare(name, folder, say=console.print, seeds=range(int(seeds)),
                                   jitter_ns=jitter)
    except USER_ERRORS as e:
        raise fail(e) from None
    clocks = f"timing jitter {jitter:.3g} ns per hop" if jitter else "exact clocks"
    table = Table(title=f"live vs simulated at the lab's S, seeds 0-{int(seeds) - 1}, "
                        f"{clocks} ({folder})")
    for col in ("scenario", "verdict live / sim", *(f"{f} live / sim" for f in cmp.FIGURES)):
        table.add_column(col)
    for row in rows:
        cells = [row.scenario, f"{row.live.get('verdict')} / "
                 + "|".join(sorted(str(v) for v in row.sim_verdicts))
                 + ("" if row.verdicts_agree else " [red]differ[/]")]
        for f in cmp.FIGURES:
            a, span = row.live.get(f), row.span(f)
            mark = "" if row.agrees(f) else " [yellow]>15%[/]"
            sim = "-" if span is None else (f"{span[0]:.4g}" if span[0] == span[1]
                                            else f"{span[0]:.4g}..{span[1]:.4g}")
            cells.append(f"{a:.4g} / {sim}{mark}" if a is not None else f"{a} / {sim}")
        table.add_row(*cells)
    console.print(table)
    if not all(r.verdicts_agree for r in rows):
        raise Exit("rocelab: live and simulated verdicts differ", code=FAILED)


ns = Collection("sim", compare)
