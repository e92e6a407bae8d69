"""RoCEv1 stays in its L2 domain, RoCEv2 is routed, both land in the queue the config says.

Run against a live lab: ``invoke check LAB`` (or ``pytest checks --lab LAB``). Every
expectation is computed from the lab itself: domains from its topology and VLAN config
(``labs.domains``), router hops from which switches took the frame to their router MAC,
classes from each switch's QoS maps (``checks.roce``). Each probe's sightings, counters
before/after and pcaps are kept as evidence (see docs/checks.md).

On a large fabric the checks probe a stated sample of the pairs (``checks.sample``, written
into the report), and each probe reads the counters of the switches on its path only
(``checks.paths``).
"""
from __future__ import annotations

import pytest

from rocelab.checks import roce
from rocelab.checks.paths import Paths
from rocelab.checks.probing import COUNT, Run, send
from rocelab.checks.report import record_probes
from rocelab.checks.sample import Plan, homes
from rocelab.checks.port_roles import by_design, host_dscps
from rocelab.labs import domains as l2
from rocelab.fabric.model.egress import queue_priorities
from rocelab.fabric.qos import bound, pauses_sender, pg_of_tc, port_setting
from rocelab.nic.settings import RoceSettings
from rocelab.traffic.patterns import nic_settings

ATTEMPTS = 4  # counter checks retry when unrelated traffic (ARP, IPv6 chatter) moved them


def roce_of(lab, host: str) -> RoceSettings:
    """How ``host`` marks RoCE: its NIC settings (the file's, or nic.settings's defaults, which
    are what its endpoint sends when it has no file)."""
    return nic_settings(lab.topology.nodes[host], None).roce


def arrivals(run: Run, host: str) -> dict[int, list]:
    """Sent frame index -> its sightings arriving at ``host``."""
    return {i: [s for s in seen if s.node == host and s.direction == "in"]
            for i, seen in run.result.journeys().items()}


def assert_intact(run: Run, kind: str, src: str, dst: str) -> list:
    """Every sent frame reached ``dst`` exactly once, ICRC valid, unchanged where no switch
    may change it. Returns the arrivals, in sent order."""
    got = arrivals(run, dst)
    missing = [i for i in range(len(run.result.sent)) if not got.get(i)]
    assert not missing, (f"{kind} from {src} did not reach {dst}: {len(missing)} of "
                         f"{len(run.result.sent)} frames missing ({run.result.verdict()})")
    out = []
    for i, frame in enumerate(run.result.sent):
        copies = got[i]
        assert len(copies) == 1, (f"{kind} from {src}: frame {i} reached {dst} "
                                  f"{len(copies)} times (duplicated in the fabric)")
        seen = copies[0]
        assert seen.info is not None and seen.info.icrc_ok, (
            f"{kind} from {src} reached {dst} with an invalid ICRC (frame {i})")
        if roce.invariant(seen.frame) != roce.invariant(frame):
            assert False, (f"{kind} from {src} reached {dst} modified: "
                           f"{roce.difference(frame, seen.frame)} (frame {i})")
        out.append(seen)
    return out


def expected_wire_tag(lab, domain: l2.Domain, node: str, iface: str) -> str:
    """How a switch sends a domain's frames out of a port: tagged/untagged/priority_tagged."""
    config, port = lab.topology.nodes[node].config, lab.topology.port(node, iface)
    for vlan in config.vlans.values():
        if vlan.vid in domain.vids and port in vlan.members:
            return vlan.members[port]
    return "untagged"


# --------------------------------------------------------------------------- RoCEv1


def destinations(request, lab, plan: Plan, domains: list[l2.Domain], sender: str,
                 candidates) -> list[str]:
    """The destinations ``sender`` probes among ``candidates`` (``checks.sample``: every
    one, or a stated sample), written into the report."""
    chosen = plan.choose(sender, candidates, homes(lab.topology, domains))
    record_probes(request, plan.record(sender, chosen))
    return chosen


@pytest.mark.per_domain("peers")
def test_v1_stays_in_its_l2_domain(lab, domains, evidence, paths, plan, request, sender):
    """RoCEv1 from one host reaches every other host of its L2 domain intact (ICRC valid,
    GRH and payload unchanged), keeps its PCP on every tagged hop, and is seen on no port
    outside the domain."""
    domain = l2.domain_of(lab.topology, sender)
    assert domain in domains
    pcp = roce_of(lab, sender).priority
    for dst in destinations(request, lab, plan, domains, sender, domain.untagged_hosts):
        run = send(lab, evidence, paths, sender, dst, "v1", pcp=pcp)
        outside = sorted(run.result.seen_on() - domain.ports)
        assert not outside, (f"v1 from {sender} appeared on "
                             f"{', '.join(f'{n}:{i}' for n, i in outside)} "
                             f"(outside {domain})")
        strays = sorted(run.result.hosts_reached() - domain.hosts)
        assert not strays, f"v1 from {sender} reached {', '.join(strays)} (outside {domain})"
        assert_intact(run, "v1", sender, dst)
        for s in run.result.sightings:
            if s.direction != "out" or not lab.topology.nodes[s.node].is_switch:
                continue
            mode = expected_wire_tag(lab, domain, s.node, s.iface)
            want = {"tagged": (domain.vid, pcp), "priority_tagged": (0, pcp),
                    "untagged": (None, None)}[mode]
            assert (s.vid, s.pcp) == want, (
                f"v1 from {sender} left {s.node}:{s.iface} ({mode} member of {domain.name}) "
                f"with VID {s.vid} PCP {s.pcp}, expected VID {want[0]} PCP {want[1]}")


@pytest.mark.per_domain("outsiders")
def test_v1_to_another_domain_is_refused_by_the_router(lab, domains, evidence, paths, plan,
                                                       request, sender):
    """RoCEv1 to a host outside the sender's domain goes, as a host would send it, to the
    gateway's MAC; the gateway must refuse it (``non_ip_to_router``, one per frame), no host
    may receive it, and it must not be seen outside the sender's domain."""
    domain = l2.domain_of(lab.topology, sender)
    macs = roce.router_macs(lab.topology)
    outsiders = {h.name for h in lab.topology.hosts} - domain.hosts
    gateway = lab.default_gateway(sender)
    for dst in destinations(request, lab, plan, domains, sender, outsiders):
        if gateway:  # the bridges on the way learn the gateway's MAC: no flooding
            lab.ping(sender, "gateway", gateway, count=1)
        run = send(lab, evidence, paths, sender, dst, "v1", pcp=roce_of(lab, sender).priority)
        result = run.result
        outside = sorted(result.seen_on() - domain.ports)
        assert not outside, (f"v1 from {sender} to {dst} appeared on "
                             f"{', '.join(f'{n}:{i}' for n, i in outside)} "
                             f"(outside {domain})")
        reached = sorted(result.hosts_reached() - {sender})
        assert not reached, (f"v1 from {sender} to {dst} reached {', '.join(reached)} "
                             f"({result.verdict()})")
        gateway_mac = roce.dst_mac(result.sent[0])
        router = macs.get(gateway_mac)
        assert router is not None, (f"v1 from {sender} to {dst} was sent to {gateway_mac}, "
                                    "which is no switch's router MAC")
        assert router in domain.gateways, (
            f"{sender}'s gateway {router} has no SVI in {domain}")
        counted = {sw: roce.drops(run.after, sw, "non_ip_to_router")
                   - roce.drops(run.before, sw, "non_ip_to_router") for sw in run.after}
        counted = {sw: n for sw, n in counted.items() if n}
        assert counted == {router: COUNT}, (
            f"v1 from {sender} to {dst}: expected {router} to count {COUNT} non_ip_to_router "
            f"drops, counted {counted or 'none'}")
        assert result.stopped_at() == {router: COUNT}, (
            f"v1 from {sender} to {dst} stopped at {result.stopped_at()}, expected "
            f"{router} only")


# --------------------------------------------------------------------------- RoCEv2


@pytest.mark.per_domain("any")
def test_v2_is_routed_ttl_down_one_per_router(lab, domains, evidence, paths, plan, request,
                                              sender):
    """RoCEv2 from one host per domain reaches every other host: across subnets routed,
    each router taking exactly 1 off the TTL and bridges none; within its subnet unrouted,
    TTL unchanged; DSCP, ECN, ICRC and payload intact everywhere."""
    addrs = lab.host_interfaces()
    for dst in destinations(request, lab, plan, domains, sender,
                            [h.name for h in lab.topology.hosts]):
        run = send(lab, evidence, paths, sender, dst, "v2", dscp=roce_of(lab, sender).dscp)
        arrived = assert_intact(run, "v2", sender, dst)
        sent_ttl = roce.hop_limit(run.result.sent[0])
        local = roce.same_subnet(addrs[sender], addrs[dst])
        for i, journey in run.result.journeys().items():
            routers = roce.routed_by(lab.topology, journey)
            if local:
                assert not routers, (f"v2 from {sender} to {dst} (same subnet) was routed "
                                     f"by {', '.join(routers)}")
            else:
                assert routers, (f"v2 from {sender} to {dst} (another subnet) reached it "
                                 "without passing a router")
            ttl = arrived[i].info.ttl
            assert ttl == sent_ttl - len(routers), (
                f"v2 from {sender} reached {dst} with TTL {ttl}, expected {sent_ttl} - "
                f"{len(routers)} router(s) ({', '.join(routers) or 'none'}) = "
                f"{sent_ttl - len(routers)}")
            for switch, ttl_in, ttl_out in roce.hops(lab.topology, journey):
                want = ttl_in - 1 if switch in routers else ttl_in
                assert ttl_out == want, (
                    f"v2 from {sender} to {dst}: {switch} "
                    f"{'routed' if switch in routers else 'bridged'} it TTL {ttl_in} -> "
                    f"{ttl_out}, expected {want}")


# --------------------------------------------------------------------------- classification


def classified(lab, evidence, paths: Paths, sender: str, dst: str, kind: str, what: str,
               **kw) -> list:
    """Probe and compare each crossed switch's PG and queue counters with the config's
    expectation, frame by frame (ECMP may send each frame another way). Returns the
    expectations, which held.

    PG 0 and queue 0 are shared with whatever else the hosts send (ARP, IPv6 chatter just
    after a lab comes up): an attempt whose mismatch is on a port that also carried frames
    of no probe is inconclusive and retried once the fabric is quiet; a mismatch on ports
    that carried only the probe is a wrong classification and fails at once."""
    problems: list[str] = []
    read = paths.between(sender, dst, routed=kind == "v2")
    for attempt in range(1, ATTEMPTS + 1):
        if attempt > 1:
            roce.quiet(lab, switches=read)
        run = send(lab, evidence, paths, sender, dst, kind, **kw)
        read = run.switches
        assert_intact(run, kind, sender, dst)
        pgs: dict[tuple[str, str, int], int] = {}
        queues: dict[tuple[str, str, int], int] = {}
        rx_ours: dict[tuple[str, str], int] = {}
        tx_ours: dict[tuple[str, str], int] = {}
        expected: dict[tuple, roce.Expected] = {}
        for journey in run.result.journeys().values():
            for e in roce.path_expectations(lab.topology, journey):
                for table, key in ((pgs, (e.switch, e.ingress, e.pg)),
                                   (queues, (e.switch, e.egress, e.queue)),
                                   (rx_ours, (e.switch, e.ingress)),
                                   (tx_ours, (e.switch, e.egress))):
                    table[key] = table.get(key, 0) + 1
                expected.setdefault((e.switch, e.ingress, e.egress), e)
        assert expected, f"{what} from {sender} to {dst} crossed no switch"
        evidence.json(f"{run.label}-expected", {
            "per_hop": [e.__dict__ for e in expected.values()],
            "pg_rx_packets": {f"{s}:{i} PG {n}": c for (s, i, n), c in pgs.items()},
            "queue_tx_packets": {f"{s}:{i} queue {n}": c for (s, i, n), c in queues.items()}})
        problems, noisy = [], []
        for e in expected.values():
            want_pg = pgs[e.switch, e.ingress, e.pg]
            want_q = queues[e.switch, e.egress, e.queue]
            pg = roce.pg_rx(run.after, e.switch, e.in_port, e.pg) - roce.pg_rx(
                run.before, e.switch, e.in_port, e.pg)
            q = roce.queue_tx(run.after, e.switch, e.out_port, e.queue) - roce.queue_tx(
                run.before, e.switch, e.out_port, e.queue)
            if pg == want_pg and q == want_q:
                continue
            others = (roce.port_delta(run, e.switch, e.in_port, "rx_packets")
                      - rx_ours[e.switch, e.ingress]
                      + roce.port_delta(run, e.switch, e.out_port, "tx_packets")
                      - tx_ours[e.switch, e.egress])
            problems.append(
                f"{what} on {e.switch}: expected {want_pg} frames in PG {e.pg} of "
                f"{e.ingress} and {want_q} in queue {e.queue} of {e.egress}, counted {pg} "
                f"and {q} ({e.why})")
            noisy.append(others > 0)
        if not problems:
            return list(expected.values())
        if not all(noisy):
            break  # only probe frames crossed those ports: the classification is wrong
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    assert not problems, f"{problems[0]}{more} [attempt {attempt} of {ATTEMPTS}]"
    return []


def target(lab, sender: str, *, other_subnet: bool) -> str | None:
    """A destination for ``sender``: the first host in another subnet (or in the same one),
    by name."""
    addrs = lab.host_interfaces()
    for host in sorted(h.name for h in lab.topology.hosts if h.name != sender):
        if roce.same_subnet(addrs[sender], addrs[host]) != other_subnet:
            return host
    return None


def lossless_queues(lab, switch: str, iface: str) -> set[int]:
    """The queues of the port on ``iface`` of ``switch`` that obey PFC: a pause of a
    priority ``pfc_enable`` turns on stops them (``pfc_to_queue_map``, as the switch model
    reads it). A lossless TC sent to any other queue is never paused there."""
    config, name = lab.topology.nodes[switch].config, lab.topology.port(switch, iface)
    enabled, _ = port_setting(config.qos, name, "pfc_enable")
    return {queue for queue, priorities in enumerate(queue_priorities(config.qos, name))
            if enabled & set(priorities)}


def lossless_pgs(lab, switch: str, iface: str) -> set[int]:
    """The PGs of the port on ``iface`` that can pause their sender
    (``fabric.qos.pauses_sender``)."""
    config, name = lab.topology.nodes[switch].config, lab.topology.port(switch, iface)
    enabled, _ = port_setting(config.qos, name, "pfc_enable")
    return {pg_of_tc(config, name, tc)[0] for tc in enabled if pauses_sender(config, name, tc)}


def assert_lossless_everywhere(lab, hops: list, what: str, dscp: int | None = None) -> None:
    """A lossless class must stay lossless at every hop: counted in a PG that can pause its
    sender and leaving by a queue that obeys PFC. Each switch doing what its own config says
    is not enough: one switch whose maps put the class in a lossy PG drops it under
    congestion while the others pause (docs/checks.md, "The checks").

    A class the configs carry but no host's NIC marks (``dscp`` given, and no host marks
    it) may be lossless on one port role only, by design (per-port-role maps): a hop's PG
    is held to it only where some switch keeps the class lossless on the ingress port's
    role, its queue only where that holds for both of the hop's ports (the queue follows
    the class the ingress gave it)."""
    held = by_design(lab, dscp) if dscp is not None and dscp not in host_dscps(lab) \
        else (lambda switch, iface: True)
    lossy = [(e, f"PG {e.pg} of {e.ingress} sends no PFC") for e in hops
             if held(e.switch, e.ingress) and e.pg not in lossless_pgs(lab, e.switch, e.ingress)]
    lossy += [(e, f"queue {e.queue} of {e.egress} ignores PFC") for e in hops
              if held(e.switch, e.ingress) and held(e.switch, e.egress)
              and e.queue not in lossless_queues(lab, e.switch, e.egress)]
    if lossy:
        hop, where = lossy[0]
        more = f" (and {len(lossy) - 1} more)" if len(lossy) > 1 else ""
        pytest.fail(f"{what}, a lossless class, is lossy on {hop.switch}: {where} "
                    f"({hop.why}){more}")


@pytest.mark.per_domain("any")
def test_v2_dscp_lands_in_the_configured_pg_and_queue(lab, evidence, paths, sender, dscp_case):
    """RoCEv2 with each lossless class's DSCP (and, as a control, a DSCP no switch makes
    lossless) is counted in the PG and queue each switch's DSCP_TO_TC / TC_TO_PRIORITY_GROUP
    / TC_TO_QUEUE maps give it, on every switch it crosses, routed or bridged; the control
    stays out of every lossless queue. The DSCPs come from the lab (conftest, dscp_case)."""
    dst = target(lab, sender, other_subnet=True) or target(lab, sender, other_subnet=False)
    if dst is None:
        pytest.skip(f"{sender} has no other host to send to")
    dscp = dscp_case.value
    expected = classified(lab, evidence, paths, sender, dst, "v2", f"v2 DSCP {dscp}",
                          dscp=dscp)
    if dscp_case.lossless:
        assert_lossless_everywhere(lab, expected, f"v2 DSCP {dscp}", dscp)
    else:
        wrong = [e for e in expected if e.queue in lossless_queues(lab, e.switch, e.egress)]
        assert not wrong, (f"v2 DSCP {dscp} (the lossy control) leaves {wrong[0].switch} "
                           f"{wrong[0].egress} by queue {wrong[0].queue}, a lossless queue "
                           f"({wrong[0].why})")


@pytest.mark.per_domain("peers")
def test_v1_pcp_lands_in_the_configured_pg_and_queue(lab, evidence, paths, sender, pcp_case):
    """RoCEv1 with each lossless priority as its PCP (from the lab: conftest, pcp_case) is
    counted in the PG and queue each switch's DOT1P_TO_TC /
    TC_TO_PRIORITY_GROUP / TC_TO_QUEUE maps give it, on every switch it crosses (trunks
    carry the PCP from switch to switch). Only where the lab classifies PCP: a sender's
    port that binds no DOT1P_TO_TC_MAP (a trust-DSCP RoCEv2 fabric) carries no RoCEv1
    class, and the check is skipped, saying so."""
    domain = l2.domain_of(lab.topology, sender)
    here = domain.attachment(sender).switch
    port = lab.topology.port(here, domain.attachment(sender).port)
    if bound(lab.topology.nodes[here].config.qos, port, "dot1p_to_tc_map")[0] is None:
        pytest.skip(f"{here} {port}, {sender}'s port, binds no DOT1P_TO_TC_MAP (PORT_QOS_MAP): "
                    "the lab does not classify PCP there, so it carries no RoCEv1 class")
    peers = sorted(domain.untagged_hosts - {sender})
    # the farthest peer: one behind another switch if there is one (crosses the trunks)
    dst = next((p for p in peers if domain.attachment(p).switch != here), peers[0])
    hops = classified(lab, evidence, paths, sender, dst, "v1", f"v1 PCP {pcp_case.value}",
                      pcp=pcp_case.value)
    assert_lossless_everywhere(lab, hops, f"v1 PCP {pcp_case.value}")
