"""The simulator side by side with htsim (``invoke bench --only sim [--hosts 128,512]
[--htsim PATH]``): an all-to-all of one 64 KiB message per pair on htsim's own two-tier
shape, K leaves of K/2 hosts and K/2 spines at 400G (128 hosts: K = 16; 512: K = 32), PFC
on (the generated lab's lossless profile), DCQCN off.

Each simulator runs as a child process of this one, timed from outside alike (its start,
the fabric's build and the run: what a user waits for), its peak RSS from ``wait4``. Work is
counted as htsim counts it: frame-hops, one per frame a switch forwards, data and ACK/CNP
alike (the switches' ``forwarded`` counters summed from the flows' start: the hosts' ARP
before it is not counted, htsim has none). Nothing waits for ARP once the flows start, as in
htsim: the switches ask for their routes' next hops when the lab comes up (as SONiC does),
the hosts for their gateways and on-link peers as the flows are set up; ``naks`` and
``switch_drops`` (by reason) say why any flow resent. The ratio of wall times is the target;
the ratio per frame-hop says how much of it is the work each does (htsim acknowledges every
packet; rocelab's responder at most every 16th, and when its coalescing timer runs out:
about four ACKs per 64 KiB message here).
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from bench.htsim import adapter

SIZE = 64 * 1024
SPEED = "400G"
TARGETS = {128: 2.0, 512: 1.0}  # rocelab wall / htsim wall at most
HOW_TO_COMPARE = ("no htsim to compare with: build it with bench/htsim/build.sh SRC (a "
                  "checkout of Broadcom/csg-htsim), then --htsim SRC/sim/datacenter/htsim_roce")


def spec(hosts: int):
    """The generated lab of htsim's shape for ``hosts``, or HtsimError naming --hosts."""
    from rocelab.labs.generate_spec import Spec
    k = adapter.leaves_of(hosts)
    return Spec(f"bench-a2a-{hosts}", hosts_per_leaf=k // 2, leaves=k, spines=k // 2,
                speed=SPEED)


def hosts_option(text: str) -> list[int]:
    """``--hosts 128,512``: the cases, each one htsim's shape holds (HtsimError if not)."""
    try:
        hosts = [int(h) for h in text.split(",") if h.strip()]
    except ValueError:
        raise adapter.HtsimError(f"--hosts {text}: give host counts, comma-separated "
                                 "(128,512)") from None
    for n in hosts:
        spec(n)
    return hosts


def switch_frame_hops(lab) -> int:
    """Frames the lab's switches forwarded so far: a frame crossing a switch counts once
    there (a flood once), PFC and frames a switch consumed or dropped not at all."""
    return sum(port["forwarded"] for sw in lab.net.switches.values()
               for port in sw.switch.counters()["ports"].values())


def switch_drops(lab) -> dict[str, int]:
    """Frames the lab's switches dropped, by reason, summed over the switches."""
    from rocelab.fabric.model.counters import drop_totals
    return drop_totals(*(sw.switch.counters()["drops"] for sw in lab.net.switches.values()))


def host_order(topo) -> list[str]:
    """A generated lab's hosts in rack order (h1, h2, ... h10): htsim's numbering of the
    same hosts."""
    return sorted((h.name for h in topo.hosts), key=lambda n: int(n.lstrip("h")))


def run_case(clab: Path, size: int) -> dict:
    """The child's work: build the lab, run the all-to-all in virtual time, count."""
    from rocelab.labs.runtimes.sim import simulated
    from rocelab.traffic import patterns
    start = time.perf_counter()
    lab = simulated(str(clab))
    hosts = host_order(lab.topology)
    built = time.perf_counter() - start
    flows = patterns.alltoall(hosts, size, 1, 1)
    job = patterns.start(lab, flows, pattern="alltoall", timeout_s=3600,
                         nic={"*": {"dcqcn": {"enabled": False}}})
    hops0 = switch_frame_hops(lab)  # after the hosts' ARP, which htsim does not model
    t0, nics = job.running.t0, job.running.nics
    result = job.wait()
    ends = [f.finished for nic in nics.values() for f in nic.senders]
    done = result["flows"]
    return {"flows": len(flows), "build_s": built, "run_s": time.perf_counter() - start - built,
            "flows_completed": sum(f["complete"] for f in done),
            # what the frame-hops are made of, summed over the flows
            "data_packets": sum(f["packets_sent"] for f in done),
            "retransmitted": sum(f["retransmitted"] for f in done),
            # why a flow resent: the receivers' NAKs and the switches' drops, by reason
            "naks": sum(f["receiver"]["naks_sent"] for f in done),
            "switch_drops": switch_drops(lab),
            "acks": sum(f["receiver"]["acks_sent"] + f["receiver"]["naks_sent"] for f in done),
            "cnps": sum(f["receiver"]["cnps_sent"] for f in done),
            "complete": result["complete"],
            "simulated_s": max(e for e in ends if e is not None) - t0 if any(ends) else 0.0,
            "frame_hops": switch_frame_hops(lab) - hops0, "events": lab.engine.events}


def rocelab_case(clab: Path, size: int, timeout_s: float) -> dict:
    """``run_case`` in a child process: wall s and peak RSS measured from outside."""
    with tempfile.TemporaryFile("w+") as out:
        wall, cpu, rss_kib, code = adapter.measured(
            [sys.executable, "-m", "bench.sim_side", str(clab), str(size)],
            Path(__file__).resolve().parent.parent, out, timeout_s)
        out.seek(0)
        lines = out.read().strip().splitlines()
    if code != 0:
        raise RuntimeError(f"rocelab's run exited with {code}: {(lines or ['?'])[-1]}")
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": rss_kib / 1024,
            **json.loads(lines[-1])}


def rates(run: dict) -> dict:
    """Per-case figures every side reports alike."""
    return {"frame_hops_per_s": run["frame_hops"] / run["wall_s"],
            "wall_per_simulated_s": run["wall_s"] / run["simulated_s"]
            if run["simulated_s"] else None}


def case(hosts: int, htsim: str | None, folder: Path, timeout_s: float = 4 * 3600) -> dict:
    """One case: the lab generated in ``folder``, rocelab then htsim (when given) on it."""
    from rocelab.labs import generate, topology
    from rocelab.labs.generate_spec import SPEEDS_MBPS
    from rocelab.traffic import patterns
    written = generate.write(spec(hosts), folder / f"a2a-{hosts}")
    clab = next(written.path.glob("*.clab.yml"))
    topo = topology.load(clab)
    order = host_order(topo)
    index = {name: i for i, name in enumerate(order)}
    mtu = patterns.nic_settings(topo.nodes[order[0]], None).roce.mtu
    speed = SPEEDS_MBPS[written.fabric.spec.speed.upper()]
    flows = tuple((index[f.src], index[f.dst]) for f in patterns.alltoall(order, SIZE, 1, 1))
    htsim_case = adapter.Case(hosts, speed, mtu, SIZE, flows)
    out: dict = {"hosts": hosts, "shape": generate.describe(written.fabric), "size": SIZE,
                 "mtu": mtu, "speed_mbps": speed, "target_ratio": TARGETS.get(hosts)}
    try:
        ours = rocelab_case(clab, SIZE, timeout_s)
        out["rocelab"] = {**ours, **rates(ours)}
    except RuntimeError as e:
        out["rocelab"] = {"error": str(e)}
    if htsim:
        try:
            theirs = adapter.run(htsim, htsim_case, timeout_s)
            out["htsim"] = {**theirs, **rates(theirs),
                            "argv": adapter.argv(htsim, htsim_case, "FILE", "LOG")}
        except adapter.HtsimError as e:
            out["htsim"] = {"error": str(e)}
    out.update(compare(out))
    return out


def errors(run: dict | None) -> str | None:
    """Why a side's figures are not figures: it failed, or a flow did not complete."""
    if run is None:
        return None
    if "error" in run:
        return run["error"]
    if not run["complete"]:
        return f"{run['flows'] - run['flows_completed']} of {run['flows']} flows did not complete"
    return None


def compare(out: dict) -> dict:
    """The ratios (rocelab / htsim) and the target's verdict, where both sides gave figures."""
    ours, theirs = out.get("rocelab"), out.get("htsim")
    if theirs is None or errors(ours) or errors(theirs):
        return {"ratio_wall": None, "ratio_per_frame_hop": None, "target_holds": None}
    wall = ours["wall_s"] / theirs["wall_s"]
    per_hop = (ours["wall_s"] / ours["frame_hops"]) / (theirs["wall_s"] / theirs["frame_hops"])
    target = out["target_ratio"]
    return {"ratio_wall": wall, "ratio_per_frame_hop": per_hop,
            "target_holds": None if target is None else wall <= target}


def verdict(holds: bool | None) -> str:
    return {True: "holds", False: "DOES NOT HOLD", None: "not measured"}[holds]


def side_cells(run: dict) -> tuple[str, str]:
    """(value, detail) cells of one simulator's run, or its error in their place."""
    problem = errors(run)
    if problem:
        return f"ERROR: {problem}", ""
    per_sim = run["wall_per_simulated_s"]
    return (f"{run['wall_s']:.1f} s wall ({run['cpu_s']:.1f} s CPU), "
            f"{run['peak_rss_mib']:,.0f} MiB",
            f"{run['simulated_s'] * 1e6:,.1f} us simulated, {run['frame_hops']:,} frame-hops, "
            f"{run['frame_hops_per_s']:,.0f}/s, "
            + (f"{per_sim:,.0f} wall s per simulated s" if per_sim else ""))


def rows(table, out: dict) -> None:
    """The cases as rows of the bench's table (``measure``, ``value``, ``baseline``,
    ``ratio``, ``target``), and how to get the ratio when htsim was not given."""
    for c in out["cases"]:
        target = c["target_ratio"]
        aim = f"<= {target:g}x: {verdict(c['target_holds'])}" if target else "report"
        value, detail = side_cells(c["rocelab"])
        table.add_row(f"all-to-all 64 KiB, {c['shape'].split(';')[0]}: rocelab", value,
                      detail, "", aim)
        if "htsim" in c:
            value, detail = side_cells(c["htsim"])
            ratio = (f"{c['ratio_wall']:.2f}x wall, {c['ratio_per_frame_hop']:.2f}x per "
                     "frame-hop" if c["ratio_wall"] is not None else "")
            table.add_row("  htsim, same case", value, detail, ratio, "")
    if not out["htsim"]:
        table.add_row(HOW_TO_COMPARE, "", "", "", "")


def measure(hosts: list[int], htsim: str | None) -> dict:
    """Every case, in order; the labs live in a scratch folder for the run."""
    with tempfile.TemporaryDirectory(prefix="rocelab-bench-a2a-") as tmp:
        cases = [case(n, htsim, Path(tmp)) for n in hosts]
    return {"htsim": htsim, "cases": cases}


if __name__ == "__main__":
    print(json.dumps(run_case(Path(sys.argv[1]), int(sys.argv[2]))))
