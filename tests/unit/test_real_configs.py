"""The real-config corpus (its manifest in tests/data/sonic_corpus; its files in the shared
reference folder, see docs/real-configs.md) and the labs tests/real_labs.py builds from it.

The files are SONiC's own, byte for byte, with their provenance; the corpus covers the
platform kinds a nightly CI meets; each lab carries the rendered tables unchanged, wires its
ports by lanes and gives its hosts a class the maps agree on. And what a user of such a
config is owed (docs/real-configs.md): every lab loads, lint finds no error the platform's
own files do not cause, and the classification checks neither fail nor error in the
simulator.
"""
from __future__ import annotations

import hashlib
import json
import re

import pytest
import yaml

from rocelab.checks import lint
from rocelab.checks import run as checks
from rocelab.labs import topology
from tests import real_labs

PLATFORMS = real_labs.platforms()


def _platform(name: str) -> real_labs.Platform:
    """The platform, its files read from the corpus; the test skips, saying where the files
    go, on a machine that does not have them (they are SONiC's: the repository keeps only
    their manifest)."""
    plat = real_labs.Platform(name)
    if (reason := plat.missing()) is not None:
        pytest.skip(reason)
    return plat


def _git_blob(data: bytes) -> str:
    """The id git gives a file's content: what provenance.json records for it."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_every_manifest_names_a_commit_and_each_file_by_path_and_blob():
    """What the repository keeps of the corpus, whether or not its files are here."""
    assert len(PLATFORMS) >= 6
    for name in PLATFORMS:
        prov = real_labs.Platform(name).provenance
        assert re.fullmatch(r"[0-9a-f]{40}", prov["commit"]), name
        assert {"qos.json", "buffers.json", "port_config.ini"} <= set(prov["files"]), name
        for source in prov["files"].values():
            assert source["path"] and re.fullmatch(r"[0-9a-f]{40}", source["blob"]), name


def test_the_corpus_covers_voq_spectrum_tomahawk_and_port_roles():
    platforms = [_platform(p) for p in PLATFORMS]
    assert len(platforms) >= 6
    assert any(p.provenance.get("device_metadata", {}).get("switch_type") == "voq"
               for p in platforms)
    assert any("BUFFER_PORT_INGRESS_PROFILE_LIST" in p.tables
               and "Spectrum" in p.provenance["asic"] for p in platforms)
    assert any(re.search(r"Tomahawk\d?\b", p.provenance["asic"]) for p in platforms)
    assert any(set(p.port_roles()[0]).isdisjoint(p.port_roles()[1]) for p in platforms)


@pytest.mark.parametrize("name", PLATFORMS)
def test_every_file_is_the_one_sonic_has_at_the_recorded_commit(name):
    plat = _platform(name)
    prov = plat.provenance
    assert prov["repository"] == "https://github.com/sonic-net/sonic-buildimage"
    assert re.fullmatch(r"[0-9a-f]{40}", prov["commit"])
    assert {p.name for p in plat.folder.iterdir()} >= set(prov["files"])
    for file, source in prov["files"].items():
        assert source["path"]
        assert _git_blob((plat.folder / file).read_bytes()) == source["blob"], file
    for file in ("qos.json", "buffers.json"):
        tables = json.loads((plat.folder / file).read_text())
        assert tables and all(isinstance(t, dict) for t in tables.values())


class _Labs(dict):
    """Each platform's lab by name; a platform whose files are not here skips its test."""

    def __missing__(self, name: str) -> None:
        pytest.skip(real_labs.Platform(name).missing())


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    dest = tmp_path_factory.mktemp("real")
    return _Labs({name: real_labs.make(dest, name) for name in PLATFORMS
                  if real_labs.Platform(name).missing() is None})


@pytest.mark.parametrize("name", PLATFORMS)
def test_the_lab_carries_the_rendered_tables_unchanged(labs, name):
    plat = _platform(name)
    topo = topology.load(labs[name], configs=False)
    assert len(topo.switches) == 4 and len(topo.hosts) == 4 and len(topo.links) == 8
    for node in topo.switches:
        config = json.loads(node.config_path.read_text())
        for table, entries in plat.tables.items():
            assert config[table] == entries, f"{node.name}: {table}"
        for port, row in plat.ports.items():
            assert {k: config["PORT"][port][k] for k in row} == row


@pytest.mark.parametrize("name", PLATFORMS)
def test_each_wire_gets_its_port_by_the_lanes_of_a_bound_lanemap(labs, name):
    topo = topology.load(labs[name], configs=False)
    for node in topo.switches:
        bind = next(b for b in node.binds if b.split(":")[1].endswith("/hwsku/lanemap.ini"))
        lanes = dict(line.split(":") for line in
                     (labs[name].parent / bind.split(":")[0]).read_text().splitlines())
        assert set(lanes) == set(topo.interfaces(node.name))
        config = json.loads(node.config_path.read_text())
        by_lanes = {e["lanes"]: p for p, e in config["PORT"].items()}
        ports = [by_lanes[lanes[iface]] for iface in sorted(lanes)]
        assert len(set(ports)) == len(ports)
        assert all(config["PORT"][p].get("speed") for p in ports)
        assert all(config["PORT"][p]["admin_status"] == "up" for p in ports)


def _wired_ports(lab, topo, node) -> dict[str, str]:
    """iface -> PORT name, by the node's lanemap.ini."""
    config = json.loads(node.config_path.read_text())
    by_lanes = {e["lanes"]: p for p, e in config["PORT"].items()}
    text = (lab.parent / "configs" / node.name / "lanemap.ini").read_text()
    return {i: by_lanes[lanes] for i, lanes in (ln.split(":") for ln in text.splitlines())}


@pytest.mark.parametrize("name", PLATFORMS)
def test_the_hosts_class_is_one_the_maps_agree_on_at_every_wired_port(labs, name):
    plat = _platform(name)
    nic = yaml.safe_load((labs[name].parent / "nic" / "default.yml").read_text())
    topo = topology.load(labs[name], configs=False)
    qos = plat.tables["PORT_QOS_MAP"]
    for node in topo.switches:
        for port in _wired_ports(labs[name], topo, node).values():
            dscp_map = plat.tables["DSCP_TO_TC_MAP"][qos[port]["dscp_to_tc_map"]]
            paused = qos[port].get("pfc_enable", "").split(",")
            assert dscp_map[str(nic["roce"]["dscp"])] == str(nic["roce"]["priority"])
            assert str(nic["roce"]["priority"]) in paused
            assert dscp_map[str(nic["cnp"]["dscp"])] == str(nic["cnp"]["priority"])
            assert str(nic["cnp"]["priority"]) not in paused


@pytest.mark.parametrize("name", PLATFORMS)
def test_leaves_wire_uplinks_and_hosts_to_their_roles_ports(labs, name):
    ups, downs = _platform(name).port_roles()
    if not set(ups).isdisjoint(downs):
        pytest.skip(f"{name} binds one set of maps on every port: no port roles to wire by")
    topo = topology.load(labs[name], configs=False)
    for node in topo.switches:
        if node.name.startswith("leaf"):
            for iface, port in _wired_ports(labs[name], topo, node).items():
                to_spine = topo.peer(node.name, iface).node.startswith("spine")
                assert port in (ups if to_spine else downs), f"{node.name}:{iface}"


@pytest.mark.parametrize("name", PLATFORMS)
def test_both_ends_of_a_fabric_wire_run_one_speed(labs, name):
    topo = topology.load(labs[name], configs=False)
    speeds = {}
    for node in topo.switches:
        config = json.loads(node.config_path.read_text())
        for iface, port in _wired_ports(labs[name], topo, node).items():
            speeds[(node.name, iface)] = config["PORT"][port]["speed"]
    for link in topo.links:
        a, b = (link.a.node, link.a.iface), (link.b.node, link.b.iface)
        if a in speeds and b in speeds:
            assert speeds[a] == speeds[b], f"{link.a} - {link.b}"


def _ports_without_lookup_row(lab) -> set[str]:
    """Wired ports whose (speed, cable length) the SKU's pg_profile_lookup.ini has no row
    for: buffermgrd derives no lossless PG there, so RoCE is lossy by the platform's own
    files (Nokia-IXR7250E-36x400G renders 5m cables, its lookup starts at 300m)."""
    rows = {tuple(line.split()[:2]) for line in
            (lab.parent / "configs" / "pg_profile_lookup.ini").read_text().splitlines()
            if line.split() and not line.lstrip().startswith("#")}
    topo = topology.load(lab, configs=False)
    missing = set()
    for node in topo.switches:
        config = json.loads(node.config_path.read_text())
        cables = next(iter(config["CABLE_LENGTH"].values()))
        for port in _wired_ports(lab, topo, node).values():
            if (config["PORT"][port].get("speed"), cables.get(port)) not in rows:
                missing.add(port)
    return missing


@pytest.mark.parametrize("name", PLATFORMS)
def test_the_lab_loads_with_every_table_in_force(labs, name):
    topo = topology.load(labs[name])
    for node in topo.switches:
        assert node.config is not None and node.config.skipped == (), node.name


@pytest.mark.parametrize("name", PLATFORMS)
def test_lint_finds_no_error_the_platform_files_do_not_cause(labs, name):
    findings = lint.lint(lint.load_lab(labs[name]))
    errors = [f for f in findings if f.severity == "error"]
    lossy = _ports_without_lookup_row(labs[name])
    if not lossy:
        assert errors == [], [f"{f.rule} {f.file} {f.where}: {f.why}" for f in errors]
        return
    assert errors, "a lossless priority without a PG lookup row must be an error"
    for f in errors:
        assert any(re.search(rf"\b{p}\b", f"{f.where} {f.why}") for p in lossy), f


@pytest.mark.parametrize("name", PLATFORMS)
def test_classification_checks_neither_fail_nor_error_in_the_simulator(labs, tmp_path, name):
    """Where the platform's own files leave the wired ports without a lossless PG (no lookup
    row), the lossless classes' dscp_lands checks must FAIL, and nothing else."""
    code, folder = checks.run(str(labs[name]), k="dscp_lands or stays_in",
                              results=tmp_path / "results", runtime="sim",
                              say=lambda line: None)
    summary = json.loads((folder / "summary.json").read_text())
    outcomes = {c["name"]: c["outcome"] for c in summary["checks"]}
    assert "passed" in outcomes.values(), outcomes
    bad = {n: o for n, o in outcomes.items() if o in ("failed", "error")}
    if not _ports_without_lookup_row(labs[name]):
        assert not bad and code == 0, outcomes
        return
    assert bad, "a lossless class with no lossless PG must fail its dscp_lands check"
    assert all(o == "failed" and "dscp_lands" in n and "-lossless]" in n
               for n, o in bad.items()), bad
