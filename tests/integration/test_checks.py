"""``invoke check`` end to end: the checks pass on both project labs, agree with the computed
L2 domains, follow the switch configs, and fail (with a reason a person reads) when the
fabric does something its config does not say.

Needs root. Every test works on a copy of a project lab under a fresh name and takes down
what it brought up, even on failure; no namespace of the test's lab may be left behind.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pyroute2 import netns

from rocelab.labs import domains as l2
from rocelab.labs import live
from rocelab.labs import state as states
from rocelab.labs import topology
from tests.conftest import ROOT, copy_lab

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces and veth"),
]


def lab_name(path: Path) -> str:
    return path.name.removesuffix(".clab.yml")


def namespaces(name: str) -> list[str]:
    return [n for n in netns.listnetns() if n.startswith(f"{name}-")]


def check(spec: Path, results: Path, k: str | None = None,
          reuse: bool = False) -> subprocess.CompletedProcess:
    """``invoke check`` exactly as a user types it (``reuse``: on a lab whose files changed)."""
    argv = [sys.executable, "-m", "invoke", "check", str(spec), "--results", str(results)]
    argv += (["-k", k] if k else []) + (["--reuse"] if reuse else [])
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def summary(results: Path) -> dict:
    return json.loads((results / "summary.json").read_text())


def verdicts(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stdout.splitlines() if line.startswith("[")]


def edit_config(path: Path, switch: str, change) -> None:
    config = path.parent / "configs" / switch / "config_db.json"
    data = json.loads(config.read_text())
    change(data)
    config.write_text(json.dumps(data, indent=4))


def route_the_trunk(data: dict) -> None:
    """leaf1's Ethernet0 (to spine1) becomes a routed port instead of a Vlan100 trunk."""
    del data["VLAN_MEMBER"]["Vlan100|Ethernet0"]
    data.setdefault("INTERFACE", {}).update({"Ethernet0": {}, "Ethernet0|10.0.0.0/31": {}})


def dscp26_to(tc: str):
    def change(data: dict) -> None:
        data["DSCP_TO_TC_MAP"]["AZURE"]["26"] = tc
    return change


def probes(results: Path, pattern: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(results.glob(pattern))]


def test_check_brings_the_default_lab_up_passes_and_takes_it_down(tmp_path):
    path = copy_lab(tmp_path / "labs")
    name, results = lab_name(path), tmp_path / "results"
    try:
        proc = check(path, results)
        # 3: some congestion checks had no verdict, the emulation having lost fidelity on a
        # busy machine; never a failure, and each says so
        assert proc.returncode in (0, 3), proc.stdout[-3000:] + proc.stderr[-2000:]
        got = summary(results)
        assert got["lab"] == name and got["runtime"] == "netns"
        assert got["counts"]["failed"] == got["counts"]["error"] == 0
        inconclusive = {c["name"] for c in got["checks"] if c["outcome"] == "inconclusive"}
        assert (proc.returncode == 3) == bool(inconclusive)
        assert all(f"[INCONCLUSIVE] {n}: INCONCLUSIVE: the emulation lost fidelity" in
                   proc.stdout for n in inconclusive)
        names = {c["name"] for c in got["checks"]}
        for expected in ("test_v1_stays_in_its_l2_domain[h1@Vlan100]",
                         "test_v1_stays_in_its_l2_domain[h3@Vlan200]",
                         "test_v1_to_another_domain_is_refused_by_the_router[h1@Vlan100]",
                         "test_v2_is_routed_ttl_down_one_per_router[h3@Vlan200]",
                         "test_v2_dscp_lands_in_the_configured_pg_and_queue"
                         "[h1@Vlan100-dscp26-lossless]",
                         "test_v2_dscp_lands_in_the_configured_pg_and_queue"
                         "[h1@Vlan100-dscp0-control]",
                         "test_v1_pcp_lands_in_the_configured_pg_and_queue"
                         "[h1@Vlan100-pcp3-lossless]",
                         "test_lossless_incast", "test_negative_control_without_pfc",
                         "test_ecn_before_pfc", "test_lossy_class_drops_and_never_pauses",
                         "test_headroom_too_small_drops", "test_pfc_storm_watchdog",
                         "test_dscp_mismatch[hosts]", "test_dscp_mismatch[negative-control]"):
            assert expected in names
            assert f"[PASS] {expected}" in verdicts(proc) or expected in inconclusive
        assert "passed, 0 failed" in proc.stdout
        assert (results / "junit.xml").is_file() and (results / "domains.json").is_file()
        ran = [c for c in got["checks"] if c["outcome"] != "skipped"]
        assert ran and all(c["evidence"] for c in ran)  # probes, counters, pcaps
        assert list(results.glob("*/*-pcap/*.pcapng"))
        # the congestion checks leave plots a person reads from summary.md, and fidelity
        incast = next(c for c in got["checks"] if c["name"] == "test_lossless_incast")
        assert incast["fidelity"] is not None and len(incast["plots"]) == 3
        assert all((results / p).read_bytes().startswith(b"\x89PNG") for p in incast["plots"])
        # the folder of the run that decided it: lossless/, or lossless-slower/ when the first
        # run lost fidelity and the rerun at a larger time scale decided
        folder = Path(incast["plots"][0]).parent
        assert folder.name in ("lossless", "lossless-slower")
        report = (results / "summary.md").read_text()
        assert ("All " in report or inconclusive) and f"({folder}/queues.png)" in report
        assert list((results / folder / "pcap").glob("*.pcapng"))
        # v2 across racks: leaf, spine, leaf each took 1 off the TTL
        (cross,) = probes(results, "*/*v2-h1-h3-dscp26-probe.json")[:1]
        assert cross["verdict"].endswith("TTL 64 -> 61")
        assert states.load(name) is None, "check must take down the lab it brought up"
    finally:
        live.down(name)
    assert namespaces(name) == []


def test_v1_l2_lab_passes_then_a_check_fails_when_the_fabric_outgrows_its_config(tmp_path):
    path = copy_lab(tmp_path / "labs", lab="roce-v1-l2")
    name = lab_name(path)
    lab = live.up(str(path))
    try:
        results = tmp_path / "agree"
        proc = check(path, results, k="roce_domains")  # the default lab's test runs the rest
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        domains = json.loads((results / "domains.json").read_text())
        assert [(d["name"], d["hosts"]) for d in domains] == [
            ("Vlan100", ["h1", "h2", "h3"]), ("Vlan200", ["h4"])]
        # v1 h1 -> h3 crossed leaf1 -> spine1 -> leaf2, tagged VID 100 with its PCP 3
        (v1,) = probes(results, "v1_stays_in_its_l2_domain_h1@Vlan100/*v1-h1-h3-*probe.json")
        on_trunks = [(s["node"], s["iface"], s["vid"], s["pcp"]) for s in v1["sightings"]
                     if s["node"] == "spine1"]
        assert on_trunks and all(vid == 100 and pcp == 3 for *_, vid, pcp in on_trunks)
        assert not [s for s in v1["sightings"] if s["node"] == "h4"]
        # v1 to h4 was refused by leaf2, h1's gateway, after crossing the stretched VLAN
        (refused,) = probes(results, "v1_to_another_domain*h1@Vlan100/*v1-h1-h4-*probe.json")
        assert "stopped at leaf2 (3 of 3)" in refused["verdict"]

        # The same fabric, but the configs on disk now say leaf1's trunk is routed: the
        # computed Vlan100 domain shrinks to {h1,h2} while the agents still bridge to h3.
        edit_config(path, "leaf1", route_the_trunk)
        assert l2.domain_of(topology.load(path), "h1").hosts == {"h1", "h2"}
        results = tmp_path / "drift"
        proc = check(path, results, k="v1_to_another", reuse=True)  # the lab as it runs
        assert proc.returncode == 1, proc.stdout[-3000:]
        (line,) = [v for v in verdicts(proc) if "[h1@Vlan100]" in v]
        assert re.fullmatch(
            r"\[FAIL\] test_v1_to_another_domain_is_refused_by_the_router\[h1@Vlan100\]: "
            r"v1 from h1 to h3 appeared on .*leaf1:eth1.*spine1:eth1.* "
            r"\(outside Vlan100 domain \{h1,h2\}\)", line), line
        failed = [c for c in summary(results)["checks"] if c["outcome"] == "failed"]
        assert any(c["reason"] == line.split(": ", 1)[1] for c in failed)
        assert states.load(name) is not None, "check must leave a running lab running"
    finally:
        lab.down()
    assert namespaces(name) == []


def test_a_routed_trunk_shrinks_the_domain_and_the_v1_checks_agree(tmp_path):
    path = copy_lab(tmp_path / "labs", lab="roce-v1-l2")
    edit_config(path, "leaf1", route_the_trunk)
    name, results = lab_name(path), tmp_path / "results"
    topo = topology.load(path)
    assert [sorted(d.hosts) for d in l2.l2_domains(topo)] == [["h1", "h2"], ["h3"], ["h4"]]
    try:
        proc = check(path, results, k="v1_stays")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert verdicts(proc) == ["[PASS] test_v1_stays_in_its_l2_domain[h1@Vlan100]"]
        (v1,) = probes(results, "*/*v1-h1-h2-*probe.json")
        assert {s["node"] for s in v1["sightings"]} == {"h1", "leaf1", "h2"}
    finally:
        live.down(name)
    assert namespaces(name) == []


def test_classification_follows_the_config_and_fails_when_the_fabric_does_not(tmp_path):
    path = copy_lab(tmp_path / "labs")
    for switch in ("leaf1", "leaf2", "spine1", "spine2"):
        edit_config(path, switch, dscp26_to("0"))
    name = lab_name(path)
    lab = live.up(str(path))
    try:
        # DSCP 26 -> TC 0 everywhere: the counters follow the config, queue 0 it is; and
        # since the hosts' NIC files send RoCE with DSCP 26, their lossless class is lossy
        # at every hop, which the check reports at the first
        results = tmp_path / "follows"
        proc = check(path, results, k="dscp26")
        assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
        fails = [v for v in verdicts(proc) if v.startswith("[FAIL]")]
        assert len(fails) == 2 and all(
            re.search(r": v2 DSCP 26, a lossless class, is lossy on leaf\d: PG 0 of eth\d sends "
                      r"no PFC \(DSCP 26 -> TC 0", f) for f in fails), fails
        hops = [hop for exp in probes(results, "*/*-expected.json") for hop in exp["per_hop"]]
        assert hops and {(h["tc"], h["pg"], h["queue"]) for h in hops} == {(0, 0, 0)}

        # The configs on disk say 26 -> TC 3 again, the running switches still say TC 0: a
        # check refuses a lab that no longer runs its files, and with --reuse it fails
        for switch in ("leaf1", "leaf2", "spine1", "spine2"):
            edit_config(path, switch, dscp26_to("3"))
        proc = check(path, tmp_path / "stale", k="dscp26")
        assert proc.returncode == 1 and not verdicts(proc)
        assert f"lab {name} is stale: " in proc.stderr, proc.stderr
        results = tmp_path / "drift"
        proc = check(path, results, k="dscp26", reuse=True)
        assert proc.returncode == 1, proc.stdout[-3000:]
        fails = [v for v in verdicts(proc) if v.startswith("[FAIL]")]
        assert len(fails) == 2, proc.stdout[-3000:]
        assert all(re.search(r": v2 DSCP 26 on \w+: expected \d frames in PG 3 of eth\d and "
                             r"\d in queue 3 of eth\d, counted 0 and 0 \(DSCP 26 -> TC 3", f)
                   for f in fails), fails
    finally:
        lab.down()
    assert namespaces(name) == []
