"""The logic of sonic-mgmt's RoCEv2 snappi cases (``tests/snappi_tests/rocev2``) with PTF
ports as the traffic generator: RoCEv2-shaped frames (UDP 4791, ECT) on the lab's lossless
DSCPs and a lossy class. ``test_rocev2_basic_dp_no_congestion``: below line rate everything
arrives, nothing is CE-marked, no PFC, each class leaves from the queue its maps give it.
``test_rocev2_pfc_congestion_ai``: an N:1 incast at line rate, lossless 0 loss with PFC on
every lossless priority used and none on lossy ones, the lossy flow losing, per-queue rates
the water-fill of the SCHEDULER weights (``waterfill``).

sonic-mgmt's congestion case runs with DCQCN off and asserts no CE; here the queues keep
the lab's WRED profiles, which mark under congestion, so CE is only asserted absent where
nothing congests.
"""
from __future__ import annotations

import dataclasses

from ...fabric.config import SwitchConfig
from ...fabric.qos import pauses_sender
from .dut import Dut
from .sched import Unsupported, weights
from .waterfill import RateFlow, RatePlan, check_lossless, check_rates, queues_of, \
    rate_flow, rate_plan, run

LOSSLESS_LOAD = 0.8  # of src's line rate, the lossless classes together, uncongested
CONTROL_LOAD = 0.05  # the lossy control class, uncongested
BASIC_FRAMES = 2000  # frames src sends in the uncongested case


def classes(config: SwitchConfig, src: str, dst: str) -> tuple[dict[int, int], dict[int, int]]:
    """Per queue of dst a DSCP from src reaches, its lowest DSCP: (lossless, lossy)."""
    lossless, lossy = {}, {}
    for q, (dscp, tc) in queues_of(config, src, dst).items():
        (lossless if pauses_sender(config, src, tc) else lossy)[q] = dscp
    return lossless, lossy


def basic_plan(config: SwitchConfig, switch: str, src: str, dst: str,
               frame_bytes: int) -> RatePlan:
    """Every lossless class at an equal part of ``LOSSLESS_LOAD``, the control class (the
    highest strict lossy queue, SONiC's CNP/ACK queue, else the lowest lossy one) at
    ``CONTROL_LOAD``, for ``BASIC_FRAMES`` frames' time at src's line rate."""
    lossless, lossy = classes(config, src, dst)
    if not lossless:
        raise Unsupported(f"{switch} {src}: no DSCP reaches a lossless class (PORT_QOS_MAP|"
                          f"{src} pfc_enable, DSCP_TO_TC_MAP)")
    weight_of, _ = weights(config, dst)
    strict = sorted(q for q in lossy if q not in weight_of)
    control = strict[-1] if strict else min(lossy, default=None)
    flows = [rate_flow(config, src, dst, dscp, LOSSLESS_LOAD / len(lossless), 1 + q)
             for q, dscp in sorted(lossless.items())]
    lines = [f"{src} -> {dst}: lossless DSCPs {sorted(lossless.values())} (queues "
             f"{sorted(lossless)}) at {LOSSLESS_LOAD:.0%} together"]
    if control is not None:
        flows.append(rate_flow(config, src, dst, lossy[control], CONTROL_LOAD, 1 + control))
        lines.append(f"control: DSCP {lossy[control]} -> queue {control} "
                     f"({'STRICT' if control in strict else 'the lowest lossy'}) at "
                     f"{CONTROL_LOAD:.0%}")
    plan = rate_plan(config, dst, flows, frame_bytes, lines)
    seconds = BASIC_FRAMES * (frame_bytes + 20) * 8 / (config.ports[src].speed_mbps * 1e6)
    plan.lines.append(f"run {BASIC_FRAMES} frames' time at {src}'s line rate = "
                      f"{seconds * 1e6:.1f} us")
    return dataclasses.replace(plan, warmup=0.0, window=seconds)


def basic(dut: Dut, plan: RatePlan) -> None:
    """All delivered, none CE, no PFC, each class counted on its queue of dst."""
    before = dut.read()["ports"][plan.dst]["queues"]
    got = run(dut, plan)
    after = dut.read()["ports"][plan.dst]["queues"]
    lost = {f"DSCP {f.dscp}": (sent, received) for f, sent, received in got.flows
            if sent != received}
    assert not lost, f"{dut.name} -> {plan.dst}: flows (sent, received) {lost}; expected " \
                     "all delivered below line rate"
    assert got.ce == 0, f"{dut.name} {plan.dst}: {got.ce} frames CE-marked; expected none"
    pfc = {s: p for s, p in got.pfc_tx.items() if any(p)}
    assert not pfc, f"{dut.name}: PFC sent {pfc}; expected none without congestion"
    sent: dict[int, int] = {}
    for f, n, _ in got.flows:
        sent[f.queue] = sent.get(f.queue, 0) + n
    tx = {q: after[str(q)]["tx_packets"] - before[str(q)]["tx_packets"] for q in sent}
    assert tx == sent, f"{dut.name} {plan.dst}: per-queue TX {tx}; expected {sent} (each " \
                       "class on the queue its maps give it)"


def congestion_plan(config: SwitchConfig, switch: str, src: str, dst: str, ports: list[str],
                    frame_bytes: int) -> RatePlan:
    """Every wired port but dst at line rate into dst: src (sonic-mgmt's last Tx) on the
    lowest lossy class with a weight and a BUFFER_QUEUE, the others on every lossless class,
    an equal part each."""
    senders = [p for p in ports if p not in (src, dst)]
    if not senders:
        raise Unsupported(f"{switch}: {len(ports)} wired ports; an incast with a lossy flow "
                          "needs a lossless sender besides src")
    weight_of, _ = weights(config, dst)
    lossless, _ = classes(config, senders[0], dst)
    _, lossy = classes(config, src, dst)
    bulk = [q for q in sorted(lossy) if q in weight_of and (dst, q) in config.qos.buffer_queue]
    if not lossless or not bulk:
        raise Unsupported(f"{switch} {dst}: needs a lossless class and a weighted lossy queue "
                          f"with a BUFFER_QUEUE (PORT_QOS_MAP pfc_enable, QUEUE|{dst}|<q> "
                          "scheduler, BUFFER_QUEUE)")
    flows: list[RateFlow] = []
    for n, s in enumerate(senders):
        flows += [rate_flow(config, s, dst, dscp, 1 / len(lossless), 10 * (n + 1) + q)
                  for q, dscp in sorted(lossless.items())]
    flows.append(rate_flow(config, src, dst, lossy[bulk[0]], 1.0, 1))
    plan = rate_plan(config, dst, flows, frame_bytes, [
        f"{senders} -> {dst}: lossless DSCPs {sorted(lossless.values())} at 100 % each "
        f"sender; {src} -> {dst}: lossy DSCP {lossy[bulk[0]]} (queue {bulk[0]}) at 100 %"])
    if not congested(plan):
        raise Unsupported(f"{switch} {dst}: the lossless senders {senders} do not offer its "
                          "lossless queues more than the water-fill serves them (PORT speed): "
                          "no back-pressure to expect")
    return plan


def congested(plan: RatePlan) -> set[int]:
    """The lossless queues offered more than the water-fill serves them: the ones whose
    senders must be paused."""
    lossless = {f.queue for f in plan.flows if f.lossless}
    return {q for q in lossless if plan.expected[q] < plan.offered[q] * (1 - 1e-6)}


def congestion(dut: Dut, plan: RatePlan) -> None:
    """Lossless 0 loss; PFC from the DUT to each sender on every lossless priority whose
    queue is offered more than the water-fill serves it, and on no lossy priority
    anywhere; the lossy flow loses; rates water-fill."""
    got = run(dut, plan)
    check_lossless(dut, got)
    full = congested(plan)
    used = {(f.src, f.priority) for f in plan.flows if f.lossless and f.queue in full}
    silent = sorted(k for k in used if got.pfc_tx[k[0]][k[1]] == 0)
    assert not silent, f"{dut.name}: no PFC sent for (port, priority) {silent}; expected " \
                       "back-pressure on every lossless priority offered more than it is served"
    lossless_prios = {f.priority for f in plan.flows if f.lossless}
    wrong = {s: [p for p, n in enumerate(c) if n and p not in lossless_prios]
             for s, c in got.pfc_tx.items()}
    wrong = {s: p for s, p in wrong.items() if p}
    assert not wrong, f"{dut.name}: PFC sent on lossy priorities {wrong}; expected none"
    kept = [(f, sent, received) for f, sent, received in got.flows if not f.lossless]
    assert all(received < sent for _, sent, received in kept), \
        f"{dut.name} {plan.dst}: lossy flow (sent, received) " \
        f"{[(s, r) for _, s, r in kept]}; expected loss under the incast"
    check_rates(dut, plan, got)
