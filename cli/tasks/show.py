"""``show.*`` and ``clear.*``: SONiC's operator views of a running lab's switches, deltas
since the last clear where SONiC keeps them (logic in labs/show.py; docs/lab-guide.md)."""
from __future__ import annotations

import json
from pathlib import Path

from invoke import Collection, task
from rich.table import Table

from ...labs import live
from ...labs import show
from ...labs import state as states
from .common import USER_ERRORS, console, fail, using


def _show_task(view: str, doc: str):
    """A ``show.<view>`` task: the view of one switch or of every switch, deltas since the
    last ``clear.<view>`` where SONiC keeps them (labs/show.py)."""
    @task(name=view, help={"switch": "one switch (default: every switch)",
                           "lab": "lab name (default: the only running lab)",
                           "nonzero": "only rows with a count", "json": "print JSON rows"})
    def show_view(c, switch="", lab="", nonzero=False, json=False):
        try:
            with using(lab) as handle:
                names = [switch] if switch else [s.name for s in handle.topology.switches]
                counters = {s: handle.agent(s).counters() for s in names}
                snaps = show.load_snapshots(states.lab_dir(handle.name), names)
        except USER_ERRORS as e:
            raise fail(e) from None
        rows = show.view(view, counters, snaps, nonzero)
        print_rows(f"show {view.replace('-', ' ')} ({handle.name}"
                   + (", since clear" if snaps and view in show.CLEARABLE else "") + ")",
                   rows, json)
    show_view.__doc__ = doc
    return show_view


def _clear_task(view: str):
    @task(name=view, help={"lab": "lab name (default: the only running lab)"})
    def clear_view(c, lab=""):
        try:
            with using(lab) as handle:
                n = show.clear(handle, view, states.lab_dir(handle.name))
        except USER_ERRORS as e:
            raise fail(e) from None
        console.print(f"{view} cleared on {n} switches of {handle.name}: show.{view} "
                      + ("prints peaks from now" if view in show.WATERMARKS
                         else "prints deltas since now"))
    clear_view.__doc__ = (f"Reset every switch's {view.replace('-', ' ')}s to now."
                          if view in show.WATERMARKS else
                          f"Snapshot every switch's counters: show.{view} (and every other "
                          "clearable view) then prints deltas since this moment.")
    return clear_view


def print_rows(title: str, rows: list[dict], as_json: bool) -> None:
    """Rows as JSON, or as a table whose numbers are right-aligned."""
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    if not rows:
        console.print(f"{title}: nothing to show")
        return
    table = Table(title=title)
    for col in rows[0]:
        table.add_column(col, justify="left" if col in ("switch", "host") or not isinstance(
            rows[0][col], (int, float)) else "right")
    for row in rows:
        table.add_row(*(f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)
                        for v in row.values()))
    console.print(table)


@task(name="nic-counters", help={"results": "a traffic run's results (--json of "
                                            "traffic.incast, alltoall, allreduce)",
                                 "priority": "the RoCE priority (default: from the lab's "
                                             "first host NIC settings, else 3)"})
def show_nic_counters(c, results="", priority=-1):
    """Host NIC counters named as mlx5 names them, next to rocelab's own names."""
    if not results:
        raise fail("give a traffic run's results: --results FILE")
    try:
        result = json.loads(Path(results).read_text())
    except (OSError, ValueError) as e:
        raise fail(f"{results}: {e}") from None
    if priority < 0:
        try:
            lab = live.running(result["lab"])
            host = lab.topology.hosts[0]
            priority = host.nic.roce.priority if host.nic else 3
        except (*USER_ERRORS, KeyError, IndexError):
            priority = 3
    print_rows(f"NIC counters ({results})", show.nic_counters(result, priority), False)


VIEW_DOCS = {
    "pfc-counters": "show pfc counters: PFC frames received and sent per priority, per port.",
    "queue-counters": "show queue counters: per queue, packets and bytes sent, dropped, "
                      "ECN-marked, and the depth now.",
    "queue-watermark": "show queue watermark unicast: the deepest each queue has been.",
    "pg-watermark": "show priority-group watermark shared/headroom: the most each ingress "
                    "PG has held.",
    "pfcwd-stats": "show pfcwd stats: per watched queue, state, storms and watchdog drops.",
    "interfaces-counters": "show interfaces counters: state, RX/TX OK and drops per port.",
}
ns = Collection("show", show_nic_counters, *(_show_task(v, VIEW_DOCS[v]) for v in show.VIEWS))
clear_ns = Collection("clear", *(_clear_task(v) for v in (*show.CLEARABLE, *show.WATERMARKS)))
