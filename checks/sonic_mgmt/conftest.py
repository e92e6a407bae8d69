"""Fixtures of the sonic-mgmt suite (``rocelab check LAB --suite sonic-mgmt``): the lab's
files in virtual time, one DUT per case, cases parametrized from the lab's configs.

A case takes ``lossless`` (a ``cases.PortCase`` per switch, src port and lossless PG),
``lossy`` (per switch, src port and lossy queue), ``pair`` (a ``cases.PortPair`` per switch
and src port), ``watchdog`` (a ``cases.WatchdogCase`` per switch, port with a PFC watchdog
and lossless queue), ``wred`` (a ``cases.WredCase`` per switch, src port and dst
queue with a WRED profile) or ``switch`` (a lab switch with two wired ports or more), and builds its
DUT with ``dut_of`` (or ``dut_of_config``, reconfigured). Nothing about a lab is written in a
case.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from rocelab.checks.report import LAB_INFO
from rocelab.checks.sonic_mgmt import cases
from rocelab.checks.sonic_mgmt.dut import Dut
from rocelab.labs import fingerprint, topology
from rocelab.fabric.config import SwitchConfig
from rocelab.labs.topology import Topology, table_notes

_TOPOLOGY = pytest.StashKey[Topology]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("rocelab checks").addoption(
        "--frame-bytes", default=1024, type=int, metavar="B",
        help="sonic-mgmt suite: the size of the packets the cases send, on the wire with "
             "FCS (sonic-mgmt's packet_size; default 1024)")


def suite_topology(config: pytest.Config) -> Topology:
    if _TOPOLOGY not in config.stash:
        spec = config.getoption("lab")
        if not spec:
            raise pytest.UsageError("no lab to check: give --lab NAME")
        config.stash[_TOPOLOGY] = topology.load(spec)
    return config.stash[_TOPOLOGY]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    makers = {"lossless": cases.lossless_cases, "lossy": cases.lossy_cases,
              "pair": cases.port_pairs, "watchdog": cases.watchdog_cases,
              "wred": cases.wred_cases}
    for name, make in makers.items():
        if name in metafunc.fixturenames:
            found = make(suite_topology(metafunc.config))
            metafunc.parametrize(name, found, ids=[c.id for c in found])
    if "switch" in metafunc.fixturenames:
        nodes = cases.switches(suite_topology(metafunc.config))
        metafunc.parametrize("switch", nodes, ids=[n.name for n in nodes])


@pytest.fixture(scope="session", autouse=True)
def suite_lab(request) -> Topology:
    """The lab whose files the suite runs, named in the report as a virtual-time run."""
    topo = suite_topology(request.config)
    request.config.stash[LAB_INFO] = {
        "lab": topo.name, "runtime": "sim", "topology": str(topo.path), "time_scale": 1.0,
        "tables": table_notes(topo), "seed": request.config.getoption("seed"),
        "deployed": {"topology": str(topo.path), "fingerprint": fingerprint.of(topo),
                     "changed_since_up": []}}
    return topo


@pytest.fixture
def frame_bytes(request) -> int:
    return request.config.getoption("frame_bytes")


@pytest.fixture
def dut_of(request, suite_lab):
    """``dut_of(switch_name)``: a fresh DUT for that lab switch, seeded by ``--seed``."""
    seed = request.config.getoption("seed")
    return lambda name: Dut(suite_lab.nodes[name], seed)


@pytest.fixture
def dut_of_config(request, suite_lab):
    """``dut_of_config(switch_name, config)``: a fresh DUT for that lab switch running
    ``config`` (its own, changed as a sonic-mgmt case reconfigures its DUT), seeded by
    ``--seed``."""
    seed = request.config.getoption("seed")

    def build(name: str, config: SwitchConfig) -> Dut:
        return Dut(replace(suite_lab.nodes[name], config=config), seed)
    return build
