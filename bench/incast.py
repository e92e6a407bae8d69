"""The highest emulated port rate at which a 3:1 incast on roce-v2-leafspine keeps fidelity
on this machine.

The emulation is honest only while the agents keep up with ``speed / S``: the kernel drops
nothing under a port, the scheduler dequeues within one MTU frame time of when it should,
and a lossless PG never takes more after XOFF than its headroom. A smaller S is a faster
emulated port and more frames per second of wall time, so at some S this machine stops
keeping up. We walk S downwards (the baseline is the slowest, easiest rate of the same run)
with the integration test's incast: h2, h3 and h4 blast DSCP 26 (the lossless class) at h1
through ``traffic.blast``, which honours PFC. The byte count scales with the rate so every
run drains h1's port in about the same wall time: a constant cost per step, and the same
amount of emulated time would be unaffordable at the slow end.

A step passes when every switch's fidelity verdict is ok, no switch dropped a lossless frame
and every frame sent left leaf1 toward h1 (Ethernet8 queue 3: only the blast uses it, so the
count is exact and needs no capture). The walk stops after two failures in a row.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyroute2 import NetNS

from rocelab.fabric.client import fidelity
from rocelab.labs import live
from rocelab.labs.topology import TIME_SCALE_LABEL
from tests.conftest import copy_lab

LAB = "roce-v2-leafspine"
SCALES = (12000, 6000, 3000, 1500, 750, 375)
PORT_MBPS = 100_000  # every port of the lab runs 100G
SENDERS = ("h2", "h3", "h4")
H1_IP = "10.1.1.11"
FRAME = 8000  # bytes, as the integration test: few frames per second for the agents
DRAIN_S = 4.0  # wall time for h1's port to carry everything: long enough to pass XOFF at S=3000
BOTTLENECK = ("leaf1", "Ethernet8")  # leaf1's port to h1
LOSSLESS = "3"  # PG and queue of DSCP 26
STOP_AFTER_FAILURES = 2
TRIES = 3  # per S: the edge is noisy (a busy core for one tick is enough), one pass proves little


def port_rate_mbps(scale: float) -> float:
    return PORT_MBPS / scale


def frames_per_sender(scale: float) -> int:
    """Enough for h1's port, at its emulated rate, to take DRAIN_S of wall time."""
    total = port_rate_mbps(scale) * 1e6 * DRAIN_S / 8
    return math.ceil(total / FRAME / len(SENDERS))


def with_time_scale(scale: float):
    """An edit for copy_lab: S for every node, through the lab-wide default labels."""
    def edit(doc: dict) -> None:
        defaults = doc["topology"].setdefault("defaults", {})
        defaults.setdefault("labels", {})[TIME_SCALE_LABEL] = f"{scale:g}"
    return edit


def rx_packets(namespace: str, iface: str) -> int:
    with NetNS(namespace) as ipr:
        return ipr.get_links(ifname=iface)[0].get_attr("IFLA_STATS64")["rx_packets"]


def bottleneck_tx(lab) -> int:
    node, port = BOTTLENECK
    return lab.agent(node).counters()["ports"][port]["queues"][LOSSLESS]["tx_packets"]


def blast(lab, count: int, scale: float, timeout: float) -> dict[str, dict | str]:
    """Start every sender at once and collect their JSON reports (or why one failed)."""
    argv = [sys.executable, "-m", "rocelab.traffic.blast", "--dst-ip", H1_IP, "--count", str(count),
            "--size", str(FRAME), "--time-scale", f"{scale:g}"]
    procs = {host: lab.node(host).popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
             for host in SENDERS}
    reports: dict[str, dict | str] = {}
    deadline = time.monotonic() + timeout
    for host, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            reports[host] = "timed out"
            continue
        reports[host] = json.loads(out) if proc.returncode == 0 else err.strip()
    return reports


def await_delivery(lab, expected: int, quiet_s: float, timeout: float) -> int:
    """Poll the bottleneck until it sent everything, or stopped moving for quiet_s: a
    condition, so a fast run does not pay for a fixed sleep."""
    last, changed, deadline = -1, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        sent = bottleneck_tx(lab)
        if sent >= expected:
            return sent
        if sent != last:
            last, changed = sent, time.monotonic()
        elif time.monotonic() - changed > quiet_s:
            return sent
        time.sleep(0.1)
    return last


def lossless_drops(counters: dict[str, dict]) -> int:
    """Lossless frames any switch dropped: at ingress admission (PG 3) or in queue 3."""
    total = 0
    for c in counters.values():
        for port in c["ports"].values():
            total += port["pgs"][LOSSLESS]["drops"]
            total += sum(port["queues"][LOSSLESS]["dropped"].values())
    return total


def summarise(counters: dict[str, dict]) -> dict:
    """The figures behind the verdicts: kernel drops, the bottleneck's lateness against one
    MTU frame, the worst headroom use against what is configured, PFC sent."""
    node, port = BOTTLENECK
    block = counters[node]["ports"][port]["fidelity"]
    headroom = [h for c in counters.values() for p in c["ports"].values()
                for h in p["fidelity"]["headroom"]]
    worst = max(headroom, key=lambda h: h["after_xoff_max"] / h["headroom"])
    verdicts = {n: fidelity(c) for n, c in counters.items()}
    return {
        "fidelity_ok": all(v["ok"] for v in verdicts.values()),
        "problems": [f"{n}: {p}" for n, v in verdicts.items() for p in v["problems"]],
        "kernel_rx_drops": sum(p["kernel_rx_drops"] for c in counters.values()
                               for p in c["ports"].values()),
        "lossless_drops": lossless_drops(counters),
        "lateness_p99_s": block["lateness"]["p99_s"],
        "lateness_max_s": block["lateness"]["max_s"],
        "lateness_count": block["lateness"]["count"],
        "mtu_frame_s": block["mtu_frame_s"],
        "headroom_after_xoff_max": worst["after_xoff_max"],
        "headroom_configured": worst["headroom"],
        "headroom_where": f"{worst['port']} PG {worst['pg']}",
        "pfc_xoff_sent": sum(p["pfc_tx"][int(LOSSLESS)] for c in counters.values()
                             for p in c["ports"].values()),
    }


def run_one(scale: float, folder: Path) -> dict:
    """One lab at S, one incast, the verdicts; the lab always comes down."""
    count = frames_per_sender(scale)
    expected = count * len(SENDERS)
    t0 = time.perf_counter()
    lab = live.up(str(copy_lab(folder, lab=LAB, edit=with_time_scale(scale))))
    try:
        for host in SENDERS:  # the switches resolve h1 before the burst, not during it
            if not lab.ping(host, "h1", H1_IP, count=1).ok:
                raise RuntimeError(f"S={scale:g}: {host} cannot reach h1 before the incast")
        h1 = lab.namespace("h1")
        tx0, rx0 = bottleneck_tx(lab), rx_packets(h1, "eth1")
        t1 = time.perf_counter()
        senders = blast(lab, count, scale, timeout=DRAIN_S * 4 + 20)
        delivered = await_delivery(lab, tx0 + expected, quiet_s=1.5, timeout=DRAIN_S * 3) - tx0
        incast_s = time.perf_counter() - t1
        h1_rx = rx_packets(h1, "eth1") - rx0
        counters = {n: lab.agent(n).counters() for n in lab.state.agents}
    finally:
        lab.down()
    sent = sum(r["sent"] for r in senders.values() if isinstance(r, dict))
    figures = summarise(counters)
    all_arrived = sent == expected and delivered == expected and h1_rx >= expected
    return {
        "time_scale": scale, "port_rate_mbps": port_rate_mbps(scale),
        "frame_bytes": FRAME, "frames_per_sender": count, "frames_sent": sent,
        "frames_at_bottleneck": delivered, "h1_rx_packets": h1_rx,
        "all_arrived": all_arrived, **figures,
        "passed": figures["fidelity_ok"] and figures["lossless_drops"] == 0 and all_arrived,
        "senders": senders, "incast_s": incast_s, "total_s": time.perf_counter() - t0,
    }


def measure(scales: tuple[float, ...] = SCALES, tries: int = TRIES) -> dict:
    """Walk S downwards until two failures in a row; the answer is the smallest S passed.

    An S passes only if every try passes; its first failed try ends it, so the slow end
    costs ``tries`` runs and the fast end one."""
    runs: list[dict] = []
    verdicts: dict[float, bool] = {}
    failures = 0
    with tempfile.TemporaryDirectory(prefix="rocelab-incast-") as tmp:
        for scale in scales:
            for attempt in range(1, tries + 1):
                runs.append({"try": attempt, **run_one(scale, Path(tmp))})
                if not runs[-1]["passed"]:
                    break
            verdicts[scale] = runs[-1]["passed"]
            failures = 0 if verdicts[scale] else failures + 1
            if failures >= STOP_AFTER_FAILURES:
                break
    passed = [scale for scale, ok in verdicts.items() if ok]
    best = min(passed) if passed else None
    return {
        "lab": LAB, "senders": list(SENDERS), "receiver": "h1", "dscp": 26,
        "drain_s": DRAIN_S, "tries": tries, "runs": runs,
        "verdicts": {f"{scale:g}": ok for scale, ok in verdicts.items()},
        "best_time_scale": best,
        "best_port_rate_mbps": port_rate_mbps(best) if best else None,
        "clean_edge": clean_edge(list(verdicts.values())),
    }


def clean_edge(verdicts: list[bool]) -> bool:
    """Whether passes and failures split at one S (in walking order): a pass below a
    failure means the edge is noisy on this machine, and the answer deserves a repeat."""
    return verdicts == sorted(verdicts, reverse=True)


def verdict(run: dict) -> str:
    """pass, or which criteria failed: fidelity (fid), lost lossless frames (loss)."""
    if run["passed"]:
        return "pass"
    why = [w for w, bad in (("fid", not run["fidelity_ok"]),
                            ("loss", run["lossless_drops"] or not run["all_arrived"])) if bad]
    return "FAIL " + ",".join(why)


def rows(result: dict) -> list[tuple[str, ...]]:
    """One table row per S, for bench's second table (narrow: bench prints in 80 columns)."""
    return [(f"{r['time_scale']:g}#{r['try']}", f"{r['port_rate_mbps']:.1f}", verdict(r),
             f"{r['frames_at_bottleneck']}/{r['frames_sent']}",
             f"{r['lossless_drops']}/{r['kernel_rx_drops']}",
             f"{r['lateness_p99_s'] * 1e3:.1f}/{r['lateness_max_s'] * 1e3:.1f}/"
             f"{r['mtu_frame_s'] * 1e3:.2f}",
             f"{r['headroom_after_xoff_max'] // 1000}/{r['headroom_configured'] // 1000}k",
             str(r["pfc_xoff_sent"]), f"{r['incast_s']:.1f}")
            for r in result["runs"]]


COLUMNS = ("S#try", "Mb/s", "verdict", "h1/sent", "drops LL/kern", "late ms p99/max/mtu",
           "headroom", "PFC", "s")


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("bench.incast: needs root (it builds network namespaces)")
    result = measure(tuple(float(a) for a in sys.argv[1:]) or SCALES)
    for r in result["runs"]:
        print({k: v for k, v in r.items() if k != "senders"}, flush=True)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}))
