"""Operator views named and shaped like SONiC's ``show`` commands, from the switches' counters
(``Switch.counters``, the same dict live agents and the simulator answer), and the host NIC
counters named as mlx5 names them, from the endpoints' results.

SONiC's ``clear`` commands keep a snapshot and later shows print deltas against it; so do
these (``delta``): counters that only grow are shown since the snapshot, gauges (queue
depth) as they are now. Watermarks are peaks, which a delta cannot undo: clearing them
resets the switch's peaks to the occupancy of now (``sonic-clear queue|priority-group
watermark``), through the agent's ``clear_watermarks``.

Each view is a list of rows (``dict``s in column order), so that a task prints them as a
table and an exercise's self-check asserts on them.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

Rows = list[dict]
VIEWS = ("pfc-counters", "queue-counters", "queue-watermark", "pg-watermark", "pfcwd-stats",
         "interfaces-counters")
CLEARABLE = ("pfc-counters", "queue-counters", "pfcwd-stats", "interfaces-counters")
WATERMARKS = {"queue-watermark": "queue", "pg-watermark": "pg"}  # view -> what the switch resets
# The mlx5 name of each NIC counter and where rocelab's endpoint keeps it: (side, field).
# Sides: the receiver's QP ("receiver"), the sender's ("sender"), the host ("host").
MLX5 = (
    ("np_cnp_sent", "receiver", "cnps_sent"),
    ("np_ecn_marked_roce_packets", "receiver", "ce_marked"),
    ("rp_cnp_handled", "sender", "cnps_received"),
    ("out_of_sequence", "receiver", "out_of_sequence"),
    ("duplicate_request", "receiver", "duplicates"),
    ("packet_seq_err", "sender", "naks_received"),
    ("local_ack_timeout_err", "sender", "timeouts"),
    ("rx_prioN_pause", "host", "pfc_received.xoff"),  # N: the RoCE priority
    ("rx_prioN_pause_duration", "host", "paused_s"),  # microseconds
)


def _alias(port: str, entry: dict) -> str:
    """``Ethernet8 (eth3)``: the port and the wire the switch has it on (none: unwired)."""
    return f"{port} ({entry['iface']})" if entry.get("iface") else port


def _sub(now, then):
    """``now - then`` for numbers and, element by element, lists and dicts of them."""
    if then is None:
        return now
    if isinstance(now, dict):
        return {k: _sub(v, then.get(k)) for k, v in now.items()}
    if isinstance(now, list):
        return [_sub(a, b) for a, b in zip(now, then)]
    if isinstance(now, (int, float)) and not isinstance(now, bool):
        return now - then
    return now


def delta(now: dict, then: dict | None) -> dict:
    """A switch's counters since the snapshot ``then``: every count minus its snapshot, the
    gauges (queue depth, watermarks, watchdog state) as they are now; watchdog events
    since the snapshot."""
    if then is None:
        return now
    out = _sub(now, then)
    for port, entry in out["ports"].items():
        before = then["ports"].get(port, {})
        for q, fields in entry["queues"].items():
            for gauge in ("depth_bytes", "depth_packets", "watermark_bytes"):
                fields[gauge] = now["ports"][port]["queues"][q][gauge]
        for q, wd in entry["watchdog"].items():
            old = before.get("watchdog", {}).get(q, {}).get("events", [])
            current = now["ports"][port]["watchdog"][q]
            wd.update(stormed=current["stormed"], action=current["action"],
                      events=current["events"][len(old):])
        for state in ("admin_up", "oper_up"):
            entry[state] = now["ports"][port][state]
    return out


def pfc_counters(counters: dict[str, dict]) -> Rows:
    """``show pfc counters``: PFC frames received and sent per priority, per port."""
    rows = []
    for switch, c in counters.items():
        for port, e in c["ports"].items():
            for way, key in (("Rx", "pfc_rx"), ("Tx", "pfc_tx")):
                rows.append({"switch": switch, "Port": _alias(port, e), "Dir": way,
                             **{f"PFC{p}": n for p, n in enumerate(e[key])}})
    return rows


def queue_counters(counters: dict[str, dict]) -> Rows:
    """``show queue counters``: per port and unicast queue, packets and bytes sent and
    dropped (WRED, watchdog, port down), and the depth now."""
    rows = []
    for switch, c in counters.items():
        for port, e in c["ports"].items():
            for q, fields in e["queues"].items():
                dropped = sum(fields["dropped"].values())
                rows.append({"switch": switch, "Port": _alias(port, e), "TxQ": f"UC{q}",
                             "Counter/pkts": fields["tx_packets"],
                             "Counter/bytes": fields["tx_bytes"], "Drop/pkts": dropped,
                             "ECN marked": fields["ecn_marked"],
                             "Depth/bytes": fields["depth_bytes"]})
    return rows


def queue_watermark(counters: dict[str, dict]) -> Rows:
    """``show queue watermark unicast``: the deepest each queue has been, bytes."""
    return [{"switch": switch, "Port": _alias(port, e),
             **{f"UC{q}": f["watermark_bytes"] for q, f in e["queues"].items()}}
            for switch, c in counters.items() for port, e in c["ports"].items()]


def pg_watermark(counters: dict[str, dict]) -> Rows:
    """``show priority-group watermark shared`` and ``... headroom``: the most shared and
    headroom bytes each ingress PG has held."""
    rows = []
    for switch, c in counters.items():
        for port, e in c["ports"].items():
            for kind, key in (("shared", "shared_peak"), ("headroom", "headroom_peak")):
                rows.append({"switch": switch, "Port": _alias(port, e), "Kind": kind,
                             **{f"PG{pg}": f[key] for pg, f in e["pgs"].items()}})
    return rows


def pfcwd_stats(counters: dict[str, dict]) -> Rows:
    """``show pfcwd stats``: per watched queue, its state, storms detected and restored,
    and the frames the watchdog dropped."""
    rows = []
    for switch, c in counters.items():
        for port, e in c["ports"].items():
            for q, wd in e["watchdog"].items():
                kinds = [ev["kind"] for ev in wd["events"]]
                rows.append({"switch": switch, "QUEUE": f"{_alias(port, e)}:{q}",
                             "STATUS": "stormed" if wd["stormed"] else "operational",
                             "ACTION": wd["action"], "STORM DETECTED/RESTORED":
                             f"{kinds.count('storm')}/{kinds.count('restore')}",
                             "TX OK/DROP": f"{e['queues'][q]['tx_packets']}/"
                                           f"{e['queues'][q]['dropped'].get('pfc_wd', 0)}"})
    return rows


def interfaces_counters(counters: dict[str, dict]) -> Rows:
    """``show interfaces counters``: per port, state, frames received and sent, and drops
    (RX_DRP: every ingress drop reason, TX_DRP: every egress one)."""
    return [{"switch": switch, "IFACE": _alias(port, e), "STATE": "U" if e["oper_up"] else "D",
             "RX_OK": e["rx_packets"] - sum(e["drops"].values()),
             "RX_DRP": sum(e["drops"].values()), "TX_OK": e["tx_packets"],
             "TX_DRP": sum(e["egress_drops"].values()),
             "RX_ERR": e.get("kernel_rx_drops", 0), "TX_ERR": e.get("tx_errors", 0)}
            for switch, c in counters.items() for port, e in c["ports"].items()]


RENDER = {"pfc-counters": pfc_counters, "queue-counters": queue_counters,
          "queue-watermark": queue_watermark, "pg-watermark": pg_watermark,
          "pfcwd-stats": pfcwd_stats, "interfaces-counters": interfaces_counters}


def view(name: str, counters: dict[str, dict], snapshots: dict[str, dict] | None = None,
         nonzero: bool = False) -> Rows:
    """The view ``name`` of every switch in ``counters``, deltas since ``snapshots`` (per
    switch) for the views that can be cleared; ``nonzero`` keeps only rows with a count."""
    if name not in RENDER:
        raise ValueError(f"unknown view {name!r} (views: {', '.join(VIEWS)})")
    if name in CLEARABLE and snapshots:
        counters = {s: delta(c, snapshots.get(s)) for s, c in counters.items()}
    rows = RENDER[name](counters)
    if nonzero:
        rows = [r for r in rows if any(isinstance(v, int) and not isinstance(v, bool) and v
                                       for k, v in r.items() if k != "switch")
                or any(isinstance(v, str) and v in ("stormed", "D") for v in r.values())]
    return rows


def drop_totals(nodes: Iterable[dict]) -> dict[str, int]:
    """Drops by reason summed over every switch's counters (``lab.status``)."""
    out: dict[str, int] = {}
    for counters in nodes:
        for reason, n in counters.get("drops", {}).items():
            if n:
                out[reason] = out.get(reason, 0) + n
    return out


# --- snapshots (clear) -----------------------------------------------------------------


def snapshot_path(folder: Path, switch: str) -> Path:
    return folder / f"show-snapshot-{switch}.json"


def save_snapshots(folder: Path, counters: dict[str, dict]) -> list[Path]:
    """Store each switch's counters as its snapshot: later views show deltas since now."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for switch, c in counters.items():
        path = snapshot_path(folder, switch)
        path.write_text(json.dumps(c) + "\n")
        paths.append(path)
    return paths


def clear(lab, view: str, folder: Path) -> int:
    """``clear.<view>`` on every switch of ``lab``: a counters snapshot, or the
    watermarks reset in the switches themselves; how many switches."""
    switches = [s.name for s in lab.topology.switches]
    if view in WATERMARKS:
        for switch in switches:
            lab.agent(switch).clear_watermarks(WATERMARKS[view])
    else:
        save_snapshots(folder, {s: lab.agent(s).counters() for s in switches})
    return len(switches)


def load_snapshots(folder: Path, switches: Iterable[str]) -> dict[str, dict]:
    """The snapshots stored for ``switches`` (those never cleared are absent)."""
    out = {}
    for switch in switches:
        path = snapshot_path(folder, switch)
        if path.is_file():
            out[switch] = json.loads(path.read_text())
    return out


# --- host NIC counters -----------------------------------------------------------------


def nic_counters(result: dict, priority: int) -> Rows:
    """Each host's NIC counters as mlx5 names them (``ethtool -S``, the RDMA hw_counters),
    summed over its QPs, next to the name rocelab's endpoint results use; from a traffic
    run's results (``traffic.patterns.run``, or ``--json`` of a traffic task). The pause
    counters are the RoCE ``priority``'s, the only one the endpoint obeys."""
    totals: dict[str, dict[str, float]] = {}
    for flow in result["flows"]:
        for side, host, fields in (("sender", flow["src"], flow),
                                   ("receiver", flow["dst"], flow["receiver"])):
            mine = totals.setdefault(host, {})
            for name, where, key in MLX5:
                if where == side:
                    mine[name] = mine.get(name, 0) + fields.get(key, 0)
    for host, report in result.get("hosts", {}).items():
        mine = totals.setdefault(host, {})
        mine["rx_prioN_pause"] = report["pfc_received"]["xoff"]
        mine["rx_prioN_pause_duration"] = round(report["paused_s"] * 1e6)
    return [{"host": host, "mlx5 counter": name.replace("N", str(priority)),
             "rocelab": f"{where}.{key}",
             "value": totals[host].get(name, 0)}
            for host in sorted(totals) for name, where, key in MLX5]
