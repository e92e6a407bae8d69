"""PNG plots for a check run: queue/PG occupancy, PFC pause timeline, per-flow rates.

A person reads these after a run, so every figure names its units and the lab time scale S:
the x axis is wall time in ms (what the agent sampled), while data-plane time runs S times
slower than the real fabric (1 ms of wall time is 1/S ms of fabric time) and rates are on the
emulated wire (real rate / S). Data extraction is kept apart from drawing so it can be tested
exactly; figures are drawn on a bare ``Figure`` with the Agg canvas (no display, no pyplot
global state).
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

PRIORITIES = range(8)
PIXELS = 2000  # twice the x axis of a 10-inch figure at 100 dpi: half a pixel is 1/PIXELS
PAUSE_ROWS = 48  # (node, port, priority) rows a pause timeline draws at most
PG_WORDS = ("PG", "XOFF", "XON", "HEADROOM")  # a threshold naming one of these is ingress


def load_trace(path: str | Path) -> tuple[dict, list[dict]]:
    """(header, samples) of an agent trace, each sample whole: a line holds only the ports
    (and pools) that changed since the line before (``fabric.trace.Trace``), so the others
    are carried forward (the same objects: read them, do not change them). The agent may
    be stopped mid-write, so an unparsable last line is dropped; an unparsable line
    elsewhere is corruption and raises."""
    lines = [line for line in Path(path).read_text().splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"{path}: empty trace (no header line)")
    header = json.loads(lines[0])
    samples = []
    ports: dict[str, dict] = {}
    pools: dict = {}
    for number, line in enumerate(lines[1:], start=2):
        try:
            sample = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not a JSON sample") from None
        ports = {**ports, **sample.get("ports", {})}
        pools = sample.get("pools", pools)
        sample["ports"], sample["pools"] = ports, pools
        samples.append(sample)
    return header, samples


def nonzero_series(samples: list[dict], port: str, key: str) -> dict[int, list[int]]:
    """Per index (queue or PG) of ``key`` on ``port``, its values over the samples, only for
    indices ever non-zero: idle queues would only hide the interesting ones."""
    rows = [s["ports"][port][key] for s in samples if port in s.get("ports", {})]
    return {i: [row[i] for row in rows] for i in PRIORITIES if any(row[i] for row in rows)}


def pause_spans(samples: list[dict], port: str, priority: int) -> list[tuple[float, float]]:
    """(start_s, width_s) spans where egress ``priority`` of ``port`` was paused by received
    PFC. Consecutive paused samples are one span; it ends when the last one's remaining pause
    runs out, or at the next (unpaused) sample if that comes first (an XON ended it)."""
    points = [(s["t"], s["ports"][port]["pause_s"][priority])
              for s in samples if port in s.get("ports", {})]
    spans: list[tuple[float, float]] = []
    start = None
    for i, (t, left) in enumerate(points):
        if left > 0 and start is None:
            start = t
        if start is not None and left > 0 and (i + 1 == len(points) or points[i + 1][1] <= 0):
            end = t + left if i + 1 == len(points) else min(t + left, points[i + 1][0])
            spans.append((start, end - start))
            start = None
    return spans


def paused_priorities(samples: list[dict], port: str) -> list[int]:
    """The priorities of ``port`` paused in some sample. One pass; a port state carried
    forward unchanged (the same object, ``load_trace``) is looked at once."""
    paused: set[int] = set()
    last = None
    for sample in samples:
        entry = sample["ports"].get(port)
        if entry is None or entry is last:
            continue
        last = entry
        paused.update(p for p, left in enumerate(entry["pause_s"]) if left > 0)
    return sorted(paused)


def joined(spans: list[tuple[float, float]], gap: float) -> list[tuple[float, float]]:
    """``spans`` (start, width) with those less than ``gap`` apart drawn as one: a PFC
    storm pauses thousands of times, and bars closer than a pixel only cost drawing."""
    out: list[tuple[float, float]] = []
    for start, width in spans:
        if out and start - (out[-1][0] + out[-1][1]) < gap:
            out[-1] = (out[-1][0], max(out[-1][1], start + width - out[-1][0]))
        else:
            out.append((start, width))
    return out


def paused_rows(traces: Iterable[tuple[dict, list[dict]]]
                ) -> tuple[list[tuple[str, list[tuple[float, float]]]], list[float]]:
    """One (label "node port P<n>", spans in s on a shared clock) per priority ever paused,
    and the traces' time scales, from loaded traces, each looked at once (a fabric's traces
    need not all be in memory together). Switches started tracing at different moments:
    their starts put them on one clock that starts with the earliest trace: the simulator's
    own (``virtual_s``) when every trace has it, else their ``started`` epochs (the wall
    clock of a live lab's agents, set apart by the milliseconds between trace starts in a
    simulated one)."""
    found, headers = [], []
    for header, samples in traces:
        headers.append(header)
        for port in header["ports"]:
            for p in paused_priorities(samples, port):  # each has a span
                found.append((f"{header['node']} {port} P{p}", header,
                              pause_spans(samples, port, p)))
    clock = "virtual_s" if all("virtual_s" in h for h in headers) else "started"
    origin = min((h[clock] for h in headers), default=0.0)
    return ([(label, [(start + (h[clock] - origin), width) for start, width in spans])
             for label, h, spans in found], sorted({h["time_scale"] for h in headers}))


def longest_paused(rows: list[tuple[str, list[tuple[float, float]]]]
                   ) -> tuple[list[tuple[str, list[tuple[float, float]]]], int]:
    """At most PAUSE_ROWS of ``rows`` (``paused_rows``), those paused longest in all, in
    their order, and how many there were: a 255:1 incast pauses every sender's link, a
    figure 11,000 pixels tall, and a 1023:1 one would be four times that."""
    if len(rows) <= PAUSE_ROWS:
        return rows, len(rows)
    longest = sorted(range(len(rows)), key=lambda i: -sum(w for _, w in rows[i][1]))
    kept = sorted(longest[:PAUSE_ROWS])
    return [rows[i] for i in kept], len(rows)


def threshold_axis(label: str) -> str:
    """"pg" for an ingress threshold (XOFF, XON, headroom, PG...), "queue" otherwise (ECN)."""
    return "pg" if any(word in label.upper() for word in PG_WORDS) else "queue"


def scale_note(time_scale: float) -> str:
    return (f"lab time scale S = {time_scale:g}: 1 ms of wall time = "
            f"{1e3 / time_scale:.3g} µs of fabric time")


def format_rate(bps: float) -> str:
    """A bit rate with the unit a person expects: 33.1 Mb/s, 99.3 Gb/s."""
    for unit, size in (("Tb/s", 1e12), ("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if abs(bps) >= size:
            return f"{bps / size:.3g} {unit}"
    return f"{bps:.3g} b/s"


def goodput_label(flow: dict) -> str:
    """Emulated goodput and what it stands for on the real fabric."""
    scale = flow["time_scale"]
    return (f"{format_rate(flow['goodput_bps'])} emulated = "
            f"{format_rate(flow['goodput_bps'] * scale)} at S={scale:g}")


def _save(fig: Figure, out_png: str | Path) -> Path:
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(out, dpi=100)
    return out


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=12)


def queue_plot(trace: tuple[dict, list[dict]], port: str, out_png: str | Path,
               thresholds: dict[str, float] | None = None,
               pg_ports: Iterable[str] | None = None) -> Path:
    """Egress queue depth of ``port`` (top) and ingress PG occupancy (bottom) of
    ``pg_ports`` (default: ``port`` itself; under incast the PGs that fill are the ones of
    the ports the traffic comes in on) over time, from a loaded trace (``load_trace``),
    with optional threshold lines in bytes, e.g. {"XOFF PG3": 123456, "ECN min": 50000}."""
    header, samples = trace
    pg_ports = list(pg_ports or [port])
    for name in (port, *pg_ports):
        if name not in header["ports"]:
            raise KeyError(f"trace of {header['node']}: port {name} not traced (traced: "
                           f"{', '.join(header['ports'])})")
    times = [s["t"] * 1e3 for s in samples if port in s.get("ports", {})]
    fig = Figure(figsize=(10, 7), layout="constrained")
    queue_ax, pg_ax = fig.subplots(2, 1, sharex=True)
    fig.suptitle(f"{header['node']} {port}: buffer occupancy\n{scale_note(header['time_scale'])}")
    axes = {"queue": queue_ax, "pg": pg_ax}
    for index, values in nonzero_series(samples, port, "queue_bytes").items():
        queue_ax.plot(times, [v / 1e3 for v in values], label=f"{port} queue {index}")
    if not queue_ax.lines:
        _empty(queue_ax, "every queue empty throughout")
    for name in pg_ports:
        for index, values in nonzero_series(samples, name, "pg_bytes").items():
            pg_ax.plot(times, [v / 1e3 for v in values], label=f"{name} PG {index}")
    if not pg_ax.lines:
        _empty(pg_ax, "every PG empty throughout")
    queue_ax.set_title(f"egress queue depth ({port})")
    pg_ax.set_title(f"ingress PG occupancy ({', '.join(pg_ports)})")
    for ax in axes.values():
        ax.set_ylabel("KB (10³ bytes)")
        ax.grid(alpha=0.3)
    for label, value in (thresholds or {}).items():
        axes[threshold_axis(label)].axhline(value / 1e3, linestyle="--", color="grey",
                                            linewidth=1, label=f"{label} ({value:,} B)")
    for ax in axes.values():
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper right", fontsize=8)
    pg_ax.set_xlabel("wall time since trace start (ms)")
    return _save(fig, out_png)


def pause_timeline(traces: Iterable[tuple[dict, list[dict]]], out_png: str | Path) -> Path:
    """When each (node, port, priority) had its egress paused by received PFC, one row each,
    from loaded traces (``load_trace``), read once; a run without any pause still gets a
    figure that says so."""
    every, scales = paused_rows(traces)
    rows, paused = longest_paused(every)
    end = max((start + width for _, spans in rows for start, width in spans), default=0.0)
    gap = end / PIXELS  # half a pixel of the x axis
    fig = Figure(figsize=(10, max(3.0, 1.0 + 0.45 * len(rows))), layout="constrained")
    ax = fig.subplots()
    note = ", ".join(scale_note(s) for s in scales) or "no trace"
    if paused > len(rows):
        note += (f"\nthe {len(rows)} of {paused} paused (port, priority) pairs paused longest; "
                 "every pair's pauses are in the traces and counters")
    fig.suptitle(f"PFC pause timeline (egress paused by received PFC)\n{note}")
    if not rows:
        _empty(ax, "no PFC pause during the run")
        ax.set_yticks([])
    for y, (label, spans) in enumerate(rows):
        ax.broken_barh([(start * 1e3, width * 1e3) for start, width in joined(spans, gap)],
                       (y - 0.4, 0.8), color=f"C{y % 10}")
    if rows:
        ax.set_yticks(range(len(rows)), [label for label, _ in rows])
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.invert_yaxis()
    ax.set_ylabel("node port priority")
    ax.set_xlabel("wall time since the first trace started (ms)")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, out_png)


FLOWS_LABELLED = 4  # flows whose bars carry their rate in words
FLOWS_NAMED = 16  # flows drawn one by one, named; more are ranked (``flows_drawn``)


def flows_drawn(flows: list[dict]) -> list[int]:
    """The flows whose sending rate is drawn, by index: all of up to FLOWS_NAMED; of more
    (a 255:1 incast has 1020 QPs), FLOWS_NAMED spread evenly over their goodput ranking,
    the slowest and the fastest among them, slowest first."""
    if len(flows) <= FLOWS_NAMED:
        return list(range(len(flows)))
    ranked = sorted(range(len(flows)), key=lambda i: flows[i]["goodput_bps"])
    last = len(ranked) - 1
    return [ranked[round(k * last / (FLOWS_NAMED - 1))] for k in range(FLOWS_NAMED)]


def flow_plot(flows: list[dict], out_png: str | Path) -> Path:
    """Per-flow goodput (bars, labelled with the real-fabric equivalent) and sending rate
    over time (one line per flow), both on the emulated wire. Past FLOWS_NAMED flows the
    bars are ranked by goodput, unnamed, and the rates drawn are ``flows_drawn``'s."""
    fig = Figure(figsize=(10, 8), layout="constrained")
    bar_ax, rate_ax = fig.subplots(2, 1)
    scale = flows[0]["time_scale"] if flows else None
    fig.suptitle("RoCE flows: goodput and sending rate (emulated wire)"
                 + (f"\n{scale_note(scale)}" if scale else ""))
    if not flows:
        _empty(bar_ax, "no flows")
        _empty(rate_ax, "no flows")
        return _save(fig, out_png)
    drawn = flows_drawn(flows)
    if len(flows) <= FLOWS_NAMED:
        names = [f"{f['name']}\n{f['retransmitted']} retx, {f['cnps_received']} CNPs"
                 for f in flows]
        bars = bar_ax.bar(range(len(flows)), [f["goodput_bps"] / 1e6 for f in flows],
                          color=[f"C{i % 10}" for i in range(len(flows))])
        bar_ax.set_xticks(range(len(flows)), names, fontsize=8,
                          rotation=0 if len(flows) <= FLOWS_LABELLED else 45, ha="right"
                          if len(flows) > FLOWS_LABELLED else "center")
        if len(flows) <= FLOWS_LABELLED:  # beyond that the labels overlap; the axis tells
            bar_ax.bar_label(bars, [goodput_label(f) for f in flows], fontsize=8)
        bar_ax.set_title("goodput per flow")
    else:
        ranked = sorted(f["goodput_bps"] / 1e6 for f in flows)
        bar_ax.bar(range(len(flows)), ranked, width=1.0, color="C0")
        bar_ax.set_xlabel("flows, slowest to fastest")
        bar_ax.set_title(f"goodput per flow: {len(flows)} flows ranked "
                         f"({sum(f['retransmitted'] for f in flows)} retx, "
                         f"{sum(f['cnps_received'] for f in flows)} CNPs in all)")
    bar_ax.set_ylabel("goodput (Mb/s emulated)")
    bar_ax.margins(y=0.2)
    for k, i in enumerate(drawn):
        series = flows[i].get("rate_series") or []
        rate_ax.plot([t * 1e3 for t, _ in series], [r / 1e6 for _, r in series],
                     color=f"C{k % 10}", label=flows[i]["name"])
    rate_ax.set_title("sending rate (DCQCN)" if len(drawn) == len(flows) else
                      f"sending rate (DCQCN): {len(drawn)} of {len(flows)} flows, from the "
                      "slowest to the fastest")
    rate_ax.set_xlabel("wall time since flow start (ms)")
    rate_ax.set_ylabel("rate (Mb/s emulated)")
    rate_ax.secondary_yaxis("right", functions=(lambda v: v * scale / 1e3,
                                                lambda v: v * 1e3 / scale)
                            ).set_ylabel(f"real-fabric equivalent (Gb/s, x S={scale:g})")
    rate_ax.legend(loc="upper right", fontsize=8)
    rate_ax.grid(alpha=0.3)
    return _save(fig, out_png)


@dataclass(frozen=True)
class QueueFigure:
    """``queue_plot``'s figure of one switch: its trace file, the port whose queues are
    drawn, the ports whose PGs are, and the threshold lines."""

    trace: Path
    port: str
    out: Path
    thresholds: dict[str, float] = field(default_factory=dict)
    pg_ports: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunFigures:
    """A scenario's figures, named by the files they are drawn from (traces, the flows'
    results): everything here pickles, so a worker process can draw them while the next
    scenario runs (``checks.drawing``). ``draw`` reads each trace once."""

    traces: tuple[Path, ...]  # every traced switch: the pause timeline
    pauses: Path
    queues: QueueFigure | None = None
    flows: tuple[list[dict], Path] | None = None  # the endpoints' per-flow results, and
    #                                               where ``flow_plot`` draws them

    def outputs(self) -> list[Path]:
        """The PNGs ``draw`` writes, in its order, known before it runs."""
        return [p for p in (self.queues and self.queues.out, self.pauses,
                            self.flows and self.flows[1]) if p]

    def draw(self) -> list[Path]:
        loaded: dict[Path, tuple[dict, list[dict]]] = {}
        out = []
        if self.queues is not None:
            q = self.queues
            loaded[q.trace] = load_trace(q.trace)
            out.append(queue_plot(loaded[q.trace], q.port, q.out, q.thresholds,
                                  pg_ports=q.pg_ports))
        out.append(pause_timeline((loaded.get(p) or load_trace(p) for p in self.traces),
                                  self.pauses))
        if self.flows is not None:
            out.append(flow_plot(*self.flows))
        return out
