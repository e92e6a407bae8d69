"""Victim flows, and the three RoCE modes side by side.

- **Victim flow**: a flow from another rack to *another* host on the congested switch,
  sharing only the links into that switch with the incast; its goodput is measured in every
  mode next to its goodput alone. Asserted only where the lab makes it a pause-only victim
  (``checks.victim.victim_of``, e.g. ``pfc-victim``) and PFC alone paused: it then keeps at
  most ``vm.LOST`` of its goodput alone (docs/checks.md gives pfc-victim's figures). Its
  recovery with DCQCN is asserted by
  ``checks/test_victim.py``, on a longer incast that pauses even with DCQCN on.
- **Modes** (NVIDIA's three, as rocelab builds them from the lab's files):
  - *lossless*: PFC and ECN/DCQCN, the lab as shipped;
  - *semi-lossless*: PFC only at the edge (switch ports toward hosts keep ``pfc_enable``,
    ports between switches lose it), ECN/DCQCN on: a switch still pauses its own hosts,
    the fabric drops rather than pause;
  - *lossy*: ECN/DCQCN only, no ``pfc_enable`` anywhere.
  Each runs the same incast plus victim; the trade-offs measured (goodput, drops,
  retransmissions, pause time, completion p99, the victim's goodput) go to ``modes.json``.
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
DCQCN_OFF = {"*": {"dcqcn": {"enabled": False}}}


def victim_of(lab, incast: ic.Incast) -> patterns.FlowSpec | None:
    """A flow from a sender on another switch to a host of the congested switch that is
    not the receiver: it shares the paused links into the switch and nothing else (its
    sender sends nothing else, so it is left out of the incast)."""
    if vm.no_victim(lab.topology, incast) is not None:
        return None
    local, remote = vm.sides(lab.topology, incast)
    # as much as an incast sender on the congested switch sends: it is on the wire for
    # the whole incast
    size = incast.message_size(QPS, MESSAGES, ic.roce_mtu(lab, incast)) * QPS
    return patterns.FlowSpec(remote[0], local[0], size, MESSAGES, qp=99)


def edge_ports(topo) -> dict[str, set[str]]:
    """Every switch's SONiC ports wired to hosts, by switch name."""
    hosts = {h.name for h in topo.hosts}
    edge: dict[str, set[str]] = {node.name: set() for node in topo.switches}
    for link in topo.links:
        for mine, peer in ((link.a, link.b), (link.b, link.a)):
            if mine.node in edge and peer.node in hosts:
                edge[mine.node].add(topo.port(mine.node, mine.iface))
    return edge


def edge_only_pfc(lab):
    """A ``config_db.json`` edit: ``pfc_enable`` kept only on ports wired to hosts."""
    edges = edge_ports(lab.topology)
    by_hostname = {node.config.hostname or node.name: edges[node.name]
                   for node in lab.topology.switches}

    def edit(data: dict) -> None:
        name = data.get("DEVICE_METADATA", {}).get("localhost", {}).get("hostname")
        edge = by_hostname.get(name, set())
        for port, entry in data.get("PORT_QOS_MAP", {}).items():
            if port not in edge:
                entry.pop("pfc_enable", None)
    return edit


def measure(lab, incast: ic.Incast, victim, folder, name: str, nic) -> dict:
    """The incast and the victim together; the figures a mode is judged by."""
    senders = tuple(s for s in incast.senders if s != victim.src)  # the victim's NIC is its own
    flows = incast.flows(QPS, MESSAGES, ic.roce_mtu(lab, incast), senders=senders)
    out = folder / name
    bits = ic.flow_bits(flows + [victim])
    timeout = ic.time_limit(lab, incast, bits, 180.0)
    with cg.observe(lab, out, [], ic.line_span(lab, incast, bits), incast.switch) as seen:
        result = patterns.run(lab, flows + [victim], pattern=name, timeout_s=timeout, nic=nic)
    run = cg.Run(**vars(seen), name=name, result=result)
    (out / "flows.json").write_text(json.dumps(result, indent=1) + "\n")
    edges = edge_ports(lab.topology)
    fabric = {(n, p) for n, c in seen.after.items() for p in c["ports"] if p not in edges[n]}
    mine = next(f for f in result["flows"] if f["name"] == victim.name)
    rest = [f for f in result["flows"] if f["name"] != victim.name]
    p99 = slowest_p99(rest)
    return {"complete": result["complete"],
            "incast_goodput_gbps": round(sum(f["bytes"] for f in rest if f["complete"])
                                         * 8 / result["elapsed_s"] / 1e9
                                         * result["time_scale"], 2),
            "drops": sum(run.drop_reasons().values()),
            "retransmitted": sum(f["retransmitted"] for f in rest),
            "pfc_sent": run.pfc_sent(), "pfc_sent_in_fabric": run.pfc_sent_from(fabric),
            "paused_s": round(run.paused_s(incast.priority), 6),
            "ecn_marks": run.marks(), "cnps": run.cnps(),
            "completion_p99_s": p99,
            "victim_goodput_gbps": round(mine["goodput_bps"] * result["time_scale"] / 1e9, 2)
            if mine["complete"] else 0.0,
            "fidelity": seen.fidelity}


def slowest_p99(flows: list[dict]) -> float | None:
    """The largest p99 message completion time of ``flows`` (None when no flow finished a
    message: a flow the time limit cut short has none)."""
    return max((f["completion_s"]["p99"] for f in flows
                if (f["completion_s"] or {}).get("p99") is not None), default=None)


def alone(lab, victim, nic) -> float:
    result = patterns.run(lab, [victim], pattern="victim-alone", timeout_s=60, nic=nic)
    flow = result["flows"][0]
    assert flow["complete"], f"the victim {victim.name} alone did not complete"
    return flow["goodput_bps"] * result["time_scale"] / 1e9


@pytest.fixture(scope="session")
def modes(lab, incast, results):
    """Every mode measured once; PFC alone (DCQCN off) too, for the victim check."""
    victim = victim_of(lab, incast)
    if victim is None:
        pytest.skip(f"lab {lab.name}: every mode runs the incast with a victim flow, and "
                    f"there is none: {vm.no_victim(lab.topology, incast)}")
    folder = results / "modes"
    folder.mkdir(exist_ok=True)
    scenario = vm.victim_of(lab.topology, incast)
    table = {"victim": victim.name, "victim_alone_gbps": round(alone(lab, victim, None), 2),
             "victim_pause_only": bool(scenario and scenario.pause_only),
             "victim_links": scenario.why if scenario else None}

    def mode(at, name: str, nic) -> dict:  # a live mode that lost fidelity reruns slower
        return decided(at, folder, name, lambda on, label, _: measure(
            on, incast, victim, folder, label, nic), lambda m: m["fidelity"])
    table["lossless"] = mode(lab, "lossless", None)
    table["pfc-only"] = mode(lab, "pfc-only", DCQCN_OFF)
    with variants.variant(lab, "semi", folder, edge_only_pfc(lab)) as other:
        table["semi-lossless"] = mode(other, "semi-lossless", None)
    with variants.variant(lab, "lossy", folder, actions.without_pfc) as other:
        table["lossy"] = mode(other, "lossy", None)
    (folder / "modes.json").write_text(json.dumps(table, indent=1) + "\n")
    return {**table, "file": folder / "modes.json"}


def test_roce_modes(request, modes):
    """Lossless drops nothing and pauses; lossy never pauses and loses frames or relies on
    marks; semi-lossless pauses only at the edge and drops in the fabric."""
    lossless, semi, lossy = modes["lossless"], modes["semi-lossless"], modes["lossy"]
    record_evidence(request, modes["file"])
    for mode in (lossless, semi, lossy):
        record_fidelity(request, mode["fidelity"])
    assert lossless["drops"] == 0 and lossless["retransmitted"] == 0, lossless
    assert lossless["ecn_marks"] > 0, f"lossless mode never marked: {lossless}"
    assert lossy["pfc_sent"] == 0, f"lossy mode paused: {lossy}"
    assert lossy["ecn_marks"] > 0, f"lossy mode never marked: {lossy}"
    # semi-lossless pauses at the edge only: its fabric ports have no pfc_enable. Not fewer
    # frames in all than lossless: its edge ports may pause more where no uplink can
    assert semi["pfc_sent_in_fabric"] == 0, (
        f"semi-lossless sent {semi['pfc_sent']} PFC frames, {semi['pfc_sent_in_fabric']} of "
        f"them from ports between switches: {semi}")
    pfc = modes["pfc-only"]
    if modes["victim_pause_only"] and pfc["pfc_sent"]:
        assert pfc["victim_goodput_gbps"] <= vm.LOST * modes["victim_alone_gbps"], (
            f"PFC alone paused ({pfc['pfc_sent']} frames) but the pause-only victim kept "
            f"{pfc['victim_goodput_gbps']} of {modes['victim_alone_gbps']} Gb/s")
