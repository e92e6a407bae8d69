"""Fixtures for checks against a live lab (sonic-mgmt style): ``pytest checks --lab NAME``.

- ``--lab NAME`` (a lab name or topology path) names a running lab; ``invoke check`` brings
  one up when needed and passes it here.
- ``--results DIR`` (from ``checks.report``) is where evidence goes; without it, a fresh
  ``results/<lab>-<YYYYmmdd-HHMMSS>/``.

Checks that send traffic "from each L2 domain" are parametrized here from the lab's own
topology and configs (``labs.domains``): mark a check ``@pytest.mark.per_domain("peers")``
and it gets one ``sender`` per domain. Nothing about a lab's hosts is written in a check.

Forwarding checks probe every pair on a fabric under ``--sample-from`` hosts (default 256),
and a stated, seeded sample on one that large or larger (``checks.sample``: the sender's own
domain and ``--sample-size`` others); ``--probe-all`` probes every pair whatever the size.
Each probe reads the counters of the switches on its path only (``checks.paths``).

Classification checks are parametrized from the lab's classes (``checks.classes``): a check
taking ``dscp_case`` runs once per lossless class's DSCP and once for a lossy control DSCP;
one taking ``pcp_case`` once per lossless priority.
"""
from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocelab.checks import classes
from rocelab.checks import sample
from rocelab.checks import incast as ic
from rocelab.checks.paths import Paths
from rocelab.checks.report import LAB_INFO, record_evidence, record_evidence_dir, results_dir
from rocelab.labs import domains as l2
from rocelab.labs import fingerprint
from rocelab.labs.live import lab_name, running
from rocelab.labs.lab import Lab
from rocelab.labs.runtimes.sim import simulated
from rocelab.labs.topology import table_notes
from rocelab.labs import state as states
from rocelab.labs import topology
from rocelab.labs.topology import Topology
from rocelab.checks.run import SONIC_MGMT_DIR, SUITES

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rocelab checks")
    group.addoption("--lab", default=None, metavar="NAME",
                    help="the running lab to check (name or topology path)")
    group.addoption("--runtime", default="live", choices=("live", "sim"),
                    help="live: a running lab (netns or containerlab); sim: the lab's files "
                         "run in virtual time in this process")
    group.addoption("--time-scale", default=1.0, type=float, metavar="S",
                    help="sim only: the time scale S (1: real line rate)")
    group.addoption("--seed", default=0, type=int, help="sim only: the run's seed")
    group.addoption("--suite", default="rocelab", choices=SUITES,
                    help="rocelab: the project's checks; sonic-mgmt: sonic-mgmt's QoS, PFC "
                         "watchdog and snappi cases on the lab's switches, in virtual time")
    group.addoption("--jitter-ns", default=0.0, type=float, metavar="NS",
                    help="sim only: mean timing jitter per frame per hop, fabric ns "
                         "(0: exact clocks; docs/runtimes.md)")
    group.addoption("--sample-from", default=sample.DEFAULT_THRESHOLD, type=_positive,
                    metavar="HOSTS", help="forwarding checks on a fabric of this many hosts or "
                    "more probe a sample of the pairs (default %(default)s; checks.sample)")
    group.addoption("--sample-size", default=sample.DEFAULT_SIZE, type=_positive, metavar="N",
                    help="sampled: destinations outside the sender's own L2 domain, per "
                         "sender (default %(default)s)")
    group.addoption("--probe-all", action="store_true",
                    help="forwarding checks probe every pair, whatever the fabric's size")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The sonic-mgmt suite's folder is collected only when that suite is asked for."""
    if collection_path.name == SONIC_MGMT_DIR and config.getoption("suite") != "sonic-mgmt":
        return True
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "per_domain(need): one run per L2 domain of the lab, with a `sender` "
        "host: need='peers' (domains with 2+ hosts), 'outsiders' (domains with hosts "
        "outside them), 'any'")


# --------------------------------------------------------------------------- the lab


_TOPOLOGY = pytest.StashKey[Topology | None]()


def _lab_topology(config: pytest.Config) -> Topology | None:
    """The running lab's topology at collection time (None: the `lab` fixture will say why),
    loaded once: every parametrized check asks, and sizing-256 took 4 s to load each time."""
    if _TOPOLOGY not in config.stash:
        config.stash[_TOPOLOGY] = _load_topology(config)
    return config.stash[_TOPOLOGY]


def _load_topology(config: pytest.Config) -> Topology | None:
    spec = config.getoption("lab")
    if not spec:
        return None
    try:
        if config.getoption("runtime") == "sim":
            return topology.load(spec)
        state = states.load(lab_name(spec))
        return topology.load(state.topology if state else spec)
    except Exception:  # noqa: BLE001 - reported by the lab fixture, with its real message
        return None


def senders(topo: Topology, need: str) -> list[tuple[str, l2.Domain]]:
    """One sender per domain (its first host by name) for the domains that qualify."""
    hosts = {h.name for h in topo.hosts}
    out = []
    for domain in l2.l2_domains(topo):
        plain = sorted(domain.untagged_hosts)
        if not plain:
            continue
        if need == "peers" and len(plain) < 2:
            continue
        if need == "outsiders" and not hosts - domain.hosts:
            continue
        out.append((plain[0], domain))
    return out


def _class_cases(metafunc: pytest.Metafunc) -> None:
    for name in ("dscp_case", "pcp_case"):
        if name not in metafunc.fixturenames:
            continue
        topo = _lab_topology(metafunc.config)
        if topo is None:
            metafunc.parametrize(name, [None], ids=["no-lab"])
            continue
        e = classes.of_topology(topo)
        cases = classes.dscp_cases(e, [n.config for n in topo.switches]) \
            if name == "dscp_case" else classes.pcp_cases(e)
        metafunc.parametrize(name, cases, ids=[c.id for c in cases])


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    _senders(metafunc)
    _class_cases(metafunc)  # after: ids read sender first, h1@Vlan100-dscp26-lossless


def _senders(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("per_domain")
    if marker is None or "sender" not in metafunc.fixturenames:
        return
    topo = _lab_topology(metafunc.config)
    if topo is None:
        metafunc.parametrize("sender", [None], ids=["no-lab"])
        return
    need = marker.args[0] if marker.args else "any"
    pairs = senders(topo, need)
    metafunc.parametrize("sender", [s for s, _ in pairs],
                         ids=[f"{s}@{d.name}" for s, d in pairs])


@pytest.fixture(scope="session")
def lab(request) -> Iterator[Lab]:
    spec = request.config.getoption("lab")
    if not spec:
        pytest.fail("no lab to check: give --lab NAME (or run `invoke check NAME`)",
                    pytrace=False)
    options = request.config.option
    try:
        lab = simulated(spec, options.time_scale, options.seed, options.jitter_ns * 1e-9) \
            if options.runtime == "sim" else running(spec)
    except Exception as e:  # noqa: BLE001 - LabError, TopologyError: one line either way
        pytest.fail(str(e), pytrace=False)
    nodes, _links = lab.status()
    dead = [f"{n.name} ({n.agent_error or 'dead'})" for n in nodes if n.agent_alive is False]
    missing = [n.name for n in nodes if not n.namespace_present]
    if dead or missing:
        pytest.fail(f"lab {lab.name} is degraded: "
                    + "; ".join(filter(None, [dead and f"agents dead: {', '.join(dead)}",
                                              missing and f"namespaces missing: "
                                                          f"{', '.join(missing)}"])),
                    pytrace=False)
    request.config.stash[LAB_INFO] = {
        "lab": lab.name, "runtime": lab.runtime_name, "topology": lab.topology_path,
        "tables": table_notes(lab.topology),
        "time_scale": max((lab.node_time_scale(n.name) for n in lab.topology.switches),
                          default=None),
        **({"seed": options.seed, "jitter_ns": options.jitter_ns,
            # what ran: the files as they are now, hashed
            "deployed": {"topology": lab.topology_path,
                         "fingerprint": fingerprint.of(lab.topology), "changed_since_up": [],
                         "calibration": {}}}
           if options.runtime == "sim" else {})}
    yield lab
    if options.runtime == "sim":
        lab.down()


@pytest.fixture(scope="session")
def incast(lab) -> ic.Incast:
    """The lab's incast (``checks.incast.incast_of``), found once for every check that
    congests it; skipped with the reason when the lab has none. Anything else it raises is
    the check's error, never a skip."""
    try:
        return ic.incast_of(lab)
    except ic.NoIncast as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def results(request) -> Path:
    folder = results_dir(request.config)
    if folder is None:
        name = lab_name(request.config.getoption("lab") or "lab")
        folder = Path.cwd() / "results" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def plan(request, lab) -> sample.Plan:
    """Which pairs the forwarding checks probe: every one, or a stated sample."""
    options = request.config.option
    return sample.Plan(len(lab.topology.hosts), options.sample_from, options.sample_size,
                       options.seed, options.probe_all)


@pytest.fixture(scope="session")
def paths(lab) -> Paths:
    """The switches each probe may cross, whose counters it reads."""
    return Paths(lab.topology)


@pytest.fixture(scope="session")
def domains(lab, results) -> list[l2.Domain]:
    """The lab's L2 domains, computed from its topology and configs; saved as evidence."""
    found = l2.l2_domains(lab.topology)
    (results / "domains.json").write_text(json.dumps([{
        "name": d.name, "vids": sorted(d.vids), "hosts": sorted(d.hosts),
        "ports": [f"{n}:{i}" for n, i in sorted(d.ports)],
        "segments": [f"{s}/Vlan{v}" for s, v in sorted(d.segments)],
        "gateways": {s: [str(a) for a in addrs] for s, addrs in d.gateways.items()},
        "tagged_hosts": sorted(a.host for a in d.attachments if a.tagged),
    } for d in found], indent=1) + "\n")
    return found


# --------------------------------------------------------------------------- evidence


class Evidence:
    """A check's evidence folder: ``<results>/<check name>/``. Everything written here is
    listed in summary.json (and the folder is named in junit.xml's properties)."""

    def __init__(self, folder: Path, request) -> None:
        self.dir = folder
        self.request = request
        self._n = 0

    def path(self, name: str) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        return self.dir / name

    def next(self, label: str) -> str:
        """A fresh, ordered, file-friendly prefix for one step of the check."""
        self._n += 1
        return f"{self._n:02d}-{_safe(label)}"

    def json(self, name: str, data) -> Path:
        path = self.path(name if name.endswith(".json") else f"{name}.json")
        path.write_text(json.dumps(data, indent=1, default=str) + "\n")
        record_evidence(self.request, path)
        return path


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@+-]+", "_", text).strip("_")[:120] or "check"


@pytest.fixture
def evidence(request, results) -> Evidence:
    folder = results / _safe(request.node.name.removeprefix("test_"))
    record_evidence_dir(request, folder)
    return Evidence(folder, request)
