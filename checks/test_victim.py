"""A victim of PFC: a flow that shares only a paused link with an
incast loses throughput under PFC alone and gets it back with DCQCN (``checks/victim.py``).

Three runs, each with the victim writing as much as one incast sender:
- *alone*: the victim by itself, its goodput the reference;
- *pfc-only*: the incast from the victim's side of the fabric (the senders that cross the
  shared links) with DCQCN off, plus the victim: the congested switch pauses the shared
  links, and the victim, which never crosses the congested port, is paused with them;
- *dcqcn*: the same with DCQCN on: the incast slows at the congested port's marks, fewer
  pauses reach the shared links, the victim gets its throughput back.
The negative control is the dcqcn run: the same victim on the same links recovers once the
pauses stop, so what it lost was the pauses' doing. Runs only where the scenario is
pause-only (``victim.victim_of``), e.g. ``invoke check pfc-victim --runtime sim``.
"""
from __future__ import annotations

import json

import pytest

from rocelab.checks import congestion as cg
from rocelab.checks import incast as ic
from rocelab.checks import variants
from rocelab.checks import victim as vm
from rocelab.checks.report import record_evidence, record_fidelity
from rocelab.checks.rerun import decided
from rocelab.labs import actions
from rocelab.traffic import patterns

QPS = 4
MESSAGES = 2
VOLUME = 4  # x the incast's usual message size (incast.Incast.message_size): the pauses
#             last long enough that the start-up transient does not decide the figures
DCQCN_OFF = {"*": {"dcqcn": {"enabled": False}}}
DCQCN_ON = {"*": {"dcqcn": {"enabled": True}}}
RECOVERED = 0.15  # with DCQCN it gets back at least this share of its goodput alone


@pytest.fixture(scope="session")
def scenario(lab):
    try:
        incast = ic.incast_of(lab)
    except ic.NoIncast as e:
        pytest.skip(str(e))
    victim = vm.victim_of(lab.topology, incast)
    if victim is None:
        pytest.skip(f"lab {lab.name}: {vm.no_victim(lab.topology, incast)}")
    if not victim.pause_only:
        pytest.skip(f"lab {lab.name}: the victim {victim.src}->{victim.dst} is not pause-only "
                    f"({victim.why}): run it on pfc-victim")
    return incast, victim


def _goodput_gbps(flow: dict, result: dict) -> float:
    return flow["goodput_bps"] * result["time_scale"] / 1e9 if flow["complete"] else 0.0


def measure(lab, incast: ic.Incast, victim: vm.Victim, folder, name: str, nic,
            size: int) -> dict:
    """The remote incast and the victim together, observed (PFC captured on the shared
    links), each incast QP writing ``size``-byte messages; the victim's goodput and what
    the shared links saw."""
    remote = [h for h in victim.senders
              if ic.attachment(lab.topology, h)[0] != incast.switch]
    flows = patterns.incast(incast.receiver, remote, size, MESSAGES, QPS)
    mine = victim.flow(size * QPS, MESSAGES)
    out = folder / name
    bits = ic.flow_bits(flows + [mine])
    timeout = ic.time_limit(lab, incast, bits, 600.0)
    with cg.observe(lab, out, [(incast.switch, i) for i in victim.shared],
                    ic.line_span(lab, incast, bits), incast.switch) as seen:
        result = patterns.run(lab, flows + [mine], pattern=name, timeout_s=timeout, nic=nic)
    (out / "flows.json").write_text(json.dumps(result, indent=1) + "\n")
    run = cg.Run(**vars(seen), name=name, result=result)
    flow = next(f for f in result["flows"] if f["name"] == mine.name)
    rest = [f for f in result["flows"] if f["name"] != mine.name]
    return {"complete": result["complete"], "incast": remote,
            "victim_gbps": round(_goodput_gbps(flow, result), 2),
            "incast_gbps": round(sum(f["bytes"] for f in rest) * 8 / result["elapsed_s"]
                                 / 1e9 * result["time_scale"], 2),
            "victim_cnps": flow["cnps_received"],
            "shared_link": vm.shared_pause(lab.topology, seen.before, seen.after, incast, victim),
            "pfc_frames_captured": seen.pfc_frames, "drops": run.drop_reasons(),
            "marks_at_congested_port": seen.after[incast.switch]["ports"][incast.port]
            ["ecn_marked"] - seen.before[incast.switch]["ports"][incast.port]["ecn_marked"],
            "fidelity": seen.fidelity}


@pytest.fixture(scope="session")
def figures(lab, scenario, results):
    incast, victim = scenario
    folder = results / "victim"
    folder.mkdir(exist_ok=True)
    mtu = ic.roce_mtu(lab, incast)
    size = incast.message_size(QPS, MESSAGES, mtu) * VOLUME
    # on a fresh copy: the runs' start phases, and so DCQCN's outcome, must not depend on
    # which checks ran on the lab before
    def run(at, name: str, nic) -> dict:  # a live run that lost fidelity reruns slower
        return decided(at, folder, name, lambda on, label, _: measure(
            on, incast, victim, folder, label, nic, size), lambda m: m["fidelity"])
    with variants.variant(lab, "victim", folder, actions.as_shipped) as fresh:
        alone = patterns.run(fresh, [victim.flow(size * QPS, MESSAGES)],
                             pattern="victim-alone", timeout_s=120, nic=DCQCN_OFF)
        table = {"victim": f"{victim.src}->{victim.dst}", "congested": f"{incast.switch} "
                 f"{incast.port}", "shared": [f"{incast.switch}:{i}" for i in victim.shared],
                 "pause_only": victim.why,
                 "alone_gbps": round(_goodput_gbps(alone["flows"][0], alone), 2),
                 "pfc-only": run(fresh, "pfc-only", DCQCN_OFF),
                 "dcqcn": run(fresh, "dcqcn", DCQCN_ON)}
    (folder / "victim.json").write_text(json.dumps(table, indent=1) + "\n")
    return {**table, "file": folder / "victim.json"}


def test_victim_loses_under_pfc_and_recovers_with_dcqcn(request, figures):
    """Under PFC alone the victim, which never crosses the congested port, is paused on the
    shared link and keeps at most vm.LOST of its goodput alone, with no drop anywhere; with
    DCQCN the shared link is paused less and the victim gets back at least RECOVERED."""
    record_evidence(request, figures["file"])
    alone, pfc, dcqcn = figures["alone_gbps"], figures["pfc-only"], figures["dcqcn"]
    for run in (pfc, dcqcn):
        record_fidelity(request, run["fidelity"])
    assert alone > 0, f"the victim alone delivered nothing: {figures}"
    assert pfc["complete"] and dcqcn["complete"], f"a run did not complete: {figures}"
    assert not pfc["drops"], f"PFC alone dropped frames (not lossless): {pfc['drops']}"
    assert pfc["shared_link"]["pfc_sent"] > 0, \
        f"the shared link was never paused: no victim scenario: {pfc['shared_link']}"
    assert pfc["victim_gbps"] <= vm.LOST * alone, \
        f"under PFC alone the victim kept {pfc['victim_gbps']} of {alone} Gb/s alone"
    assert dcqcn["shared_link"]["paused_s"] < pfc["shared_link"]["paused_s"], \
        f"DCQCN did not reduce the pauses on the shared link: {dcqcn['shared_link']} vs " \
        f"{pfc['shared_link']}"
    assert dcqcn["victim_gbps"] >= pfc["victim_gbps"] + RECOVERED * alone, \
        f"with DCQCN the victim got {dcqcn['victim_gbps']} Gb/s against " \
        f"{pfc['victim_gbps']} under PFC alone ({alone} alone): no recovery"

