"""Forwarding checks on a large fabric: the stated, seeded sample of pairs they probe
(``checks.sample``) and the switches each probe reads (``checks.paths``), sound both ways:
a defect on a sampled pair is caught, one on a pair left out is not claimed as checked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from rocelab.checks import outcome
from rocelab.checks import run as checks
from rocelab.checks.conftest import Evidence
from rocelab.checks.paths import Paths, shortest_paths
from rocelab.checks.probing import send
from rocelab.checks.sample import Plan, homes
from rocelab.labs import domains as l2
from rocelab.labs import topology
from rocelab.labs.runtimes.sim import simulated
from tests.conftest import copy_lab

V2_H1 = "test_v2_is_routed_ttl_down_one_per_router[h1@Vlan100]"


# --------------------------------------------------------------------------- the sample


def racks(n: int, per: int) -> dict[str, int]:
    """Host -> rack, ``n`` racks of ``per`` hosts: h1..h<per> in rack 0, and so on."""
    return {f"h{r * per + i + 1}": r for r in range(n) for i in range(per)}


def test_under_the_threshold_every_destination_is_probed():
    home = racks(4, 8)
    plan = Plan(hosts=32, threshold=33, size=2, seed=1)
    assert not plan.sampled
    assert plan.choose("h1", home, home) == sorted(set(home) - {"h1"})
    assert "every destination" in plan.how()


def test_past_the_threshold_the_own_domain_and_a_sample_of_the_others():
    home = racks(8, 4)
    plan = Plan(hosts=32, threshold=32, size=5, seed=1)
    chosen = plan.choose("h1", home, home)
    assert {"h2", "h3", "h4"} <= set(chosen)  # every host of its own rack
    others = [h for h in chosen if home[h] != 0]
    assert len(others) == 5
    assert len({home[h] for h in others}) == 5  # one per other rack in turn


def test_a_sample_as_large_as_the_domains_reaches_every_rack():
    home = racks(8, 4)
    chosen = Plan(hosts=32, threshold=2, size=7, seed=3).choose("h5", home, home)
    assert {home[h] for h in chosen} == set(range(8))


def test_probe_all_probes_every_destination_whatever_the_size():
    home = racks(8, 4)
    plan = Plan(hosts=32, threshold=2, size=1, seed=0, everything=True)
    assert plan.choose("h1", home, home) == sorted(set(home) - {"h1"})
    assert "--probe-all" in plan.how()


def test_the_same_seed_gives_the_same_sample_and_another_seed_another():
    home = racks(16, 8)
    samples = {seed: Plan(hosts=128, threshold=2, size=6, seed=seed).choose("h9", home, home)
               for seed in range(6)}
    assert samples[0] == Plan(hosts=128, threshold=2, size=6, seed=0).choose("h9", home, home)
    assert len({tuple(s) for s in samples.values()}) > 1


def test_the_same_seed_gives_the_same_sample_in_another_process():
    """The sample must not hang on Python's per-process string hashing."""
    code = ("from rocelab.checks.sample import Plan\n"
            "home = {f'h{i}': i // 4 for i in range(64)}\n"
            "print(Plan(64, 2, 5, 7).choose('h0', home, home))")
    out = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONHASHSEED": str(h)}).stdout
           for h in (1, 2, 3)}
    assert len(out) == 1


def test_the_report_lists_the_pairs_and_how_they_were_chosen():
    home = racks(4, 2)
    plan = Plan(hosts=8, threshold=8, size=1, seed=4)
    chosen = plan.choose("h1", home, home)
    record = plan.record("h1", chosen)
    assert record["sampled"] and record["pairs"] == [["h1", dst] for dst in chosen]
    assert "seed 4" in record["how"] and "--probe-all" in record["how"]


# --------------------------------------------------------------------------- the paths


def test_shortest_paths_are_every_switch_on_any_of_them():
    links = {"l1": {"s1", "s2"}, "l2": {"s1", "s2"}, "s1": {"l1", "l2", "x"},
             "s2": {"l1", "l2"}, "x": {"s1", "y"}, "y": {"x"}}
    assert shortest_paths(links, frozenset({"l1"}), frozenset({"l2"})) == {"l1", "s1", "s2",
                                                                           "l2"}
    assert shortest_paths(links, frozenset({"l1"}), frozenset({"y"})) == {"l1", "s1", "x", "y"}
    assert shortest_paths({"a": set(), "b": set()}, frozenset({"a"}), frozenset({"b"})) == set()


def test_a_probe_reads_its_rack_or_its_leaves_and_their_spines():
    topo = topology.load("sizing-32")
    paths = Paths(topo)
    home = homes(topo, l2.l2_domains(topo))
    same = next(h for h in sorted(home) if h != "h1" and home[h] == home["h1"])
    far = next(h for h in sorted(home) if home[h] != home["h1"])
    spines = {n.name for n in topo.switches} - set().union(*paths.wired.values())
    rack, routed = paths.between("h1", same), paths.between("h1", far)
    assert len(rack) == 1 and rack <= {n.name for n in topo.switches} - spines
    assert routed == spines | rack | paths.between(far, "h1", routed=False)
    assert len(routed) < len(topo.switches)
    assert paths.between("h1", far, routed=False) == rack  # RoCEv1 stays in its domain


# --------------------------------------------------------------------------- the probes


class OnlyTheSendersSwitches(Paths):
    """Paths that leave out everything but the sender's own domain: a fabric whose frames
    land where the topology says they should not."""

    def between(self, src: str, dst: str, routed: bool = True) -> frozenset[str]:
        return super().between(src, dst, routed=False)


def test_a_probe_that_reaches_a_switch_off_its_path_is_sent_again_reading_it(tmp_path):
    lab = simulated("roce-v2-leafspine")
    node = SimpleNamespace(user_properties=[])
    evidence = Evidence(tmp_path, SimpleNamespace(node=node))
    run = send(lab, evidence, OnlyTheSendersSwitches(lab.topology), "h1", "h3", "v2", dscp=26)
    first, second = (json.loads(p.read_text()) for p in sorted(tmp_path.glob("*-probe.json")))
    assert first["counters_read"] == {"before": ["leaf1"], "after": ["leaf1"]}
    assert "leaf2" in first["off_path"]
    assert second["off_path"] == [] and "leaf2" in second["counters_read"]["before"]
    crossed = run.result.received_by() - run.result.hosts
    assert crossed <= run.switches and crossed == set(run.after)
    assert run.delta()["leaf2"]["ports"]  # its counters moved, and were read


def test_counters_after_a_probe_are_read_on_the_switches_it_reached(tmp_path):
    """Before: every ECMP candidate of the path; after: the ones the frames took (3 frames
    take at most 3 of sizing-256's 4 spines)."""
    lab = simulated("sizing-256")
    evidence = Evidence(tmp_path, SimpleNamespace(node=SimpleNamespace(user_properties=[])))
    paths = Paths(lab.topology)
    home = homes(lab.topology, l2.l2_domains(lab.topology))
    far = next(h for h in sorted(home) if home[h] != home["h1"])
    run = send(lab, evidence, paths, "h1", far, "v2", dscp=26)
    crossed = run.result.received_by() - run.result.hosts
    assert set(run.before) == paths.between("h1", far) == run.switches
    assert set(run.after) == crossed < run.switches


# --------------------------------------------------------------------------- soundness


def h4_port_down(clab) -> None:
    """A defect on one pair's path only: leaf2's port to h4 shut."""
    path = clab.parent / "configs" / "leaf2" / "config_db.json"
    config = json.loads(path.read_text())
    config["PORT"]["Ethernet12"]["admin_status"] = "down"
    path.write_text(json.dumps(config, indent=1))


def seed_choosing(want: str, avoid: str) -> int:
    """A seed whose sample of one host outside h1's domain is ``want``, not ``avoid``."""
    topo = topology.load("roce-v2-leafspine")
    home = homes(topo, l2.l2_domains(topo))
    hosts = [h.name for h in topo.hosts]
    for seed in range(50):
        chosen = Plan(len(hosts), 4, 1, seed).choose("h1", hosts, home)
        if want in chosen and avoid not in chosen:
            return seed
    raise AssertionError(f"no seed under 50 samples {want}")


def v2_from_h1(clab, tmp_path, name: str, *options: str) -> dict:
    _, folder = checks.run(str(clab), k="v2_is_routed and h1", results=tmp_path / name,
                           runtime="sim", say=lambda line: None,
                           extra=["--sample-from", "4", "--sample-size", "1", *options])
    summary = json.loads((folder / "summary.json").read_text())
    return next(c for c in summary["checks"] if c["name"] == V2_H1)


@pytest.fixture(scope="module")
def defective(tmp_path_factory):
    clab = copy_lab(tmp_path_factory.mktemp("defect"))
    h4_port_down(clab)
    return clab


def test_a_defect_on_a_sampled_pair_is_caught(defective, tmp_path):
    check = v2_from_h1(defective, tmp_path, "sampled", "--seed",
                       str(seed_choosing("h4", "h3")))
    assert check["outcome"] == "failed"
    assert "did not reach h4" in check["reason"]
    assert ["h1", "h4"] in check["probes"]["pairs"] and check["probes"]["sampled"]


def test_a_defect_on_a_pair_left_out_is_not_claimed_as_checked(defective, tmp_path):
    check = v2_from_h1(defective, tmp_path, "unsampled", "--seed",
                       str(seed_choosing("h3", "h4")))
    assert check["outcome"] == "passed"  # it passed on the pairs it probed, and says which
    assert check["probes"]["sampled"] and ["h1", "h4"] not in check["probes"]["pairs"]
    assert check["probes"]["pairs"] == [["h1", "h2"], ["h1", "h3"]]
    assert "a sample" in check["probes"]["how"]
    md = (tmp_path / "unsampled" / "summary.md").read_text()
    assert f"**{V2_H1}**: 2 pair(s), a sample" in md and "h1 -> h2, h3" in md


def test_probe_all_catches_it_whatever_the_seed(defective, tmp_path):
    check = v2_from_h1(defective, tmp_path, "all", "--seed", str(seed_choosing("h3", "h4")),
                       "--probe-all")
    assert check["outcome"] == "failed" and "did not reach h4" in check["reason"]
    assert len(check["probes"]["pairs"]) == 3 and not check["probes"]["sampled"]


def test_a_bad_sample_size_is_one_line_naming_the_option(tmp_path, capfd):
    code, _ = checks.run("roce-v2-leafspine", k="v2_is_routed", runtime="sim",
                         results=tmp_path / "bad", say=lambda line: None,
                         extra=["--sample-size", "0"])
    assert code == outcome.USAGE
    assert "argument --sample-size: '0' is not a whole number of 1 or more" in \
        capfd.readouterr().err
