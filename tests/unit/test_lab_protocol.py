"""labs.lab.Lab: the live and the simulated lab answer every call of the protocol, with the
same parameters, so a check written against it runs on either."""
from __future__ import annotations

import inspect

import pytest

from rocelab.labs.errors import LabError
from rocelab.labs.lab import Lab, NodeHandle
from rocelab.labs.live import LiveLab
from rocelab.labs.runtimes.sim import SimLab, simulated
from rocelab.labs.state import LabState
from rocelab.labs.topology import load
from tests.conftest import TOPOLOGIES

DEFAULT = TOPOLOGIES / "roce-v2-leafspine" / "roce-v2-leafspine.clab.yml"
MEMBERS = sorted(name for name in dir(Lab) if not name.startswith("_")) + ["topology"]


def parameters(function) -> list[tuple[str, object]]:
    """Names, kinds and defaults, without ``self`` and annotations (written per class)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()
            if p.name != "self"]


@pytest.fixture(scope="module")
def labs() -> dict[str, object]:
    topo = load(str(DEFAULT))
    live = LiveLab(LabState.new(topo.name, str(topo.path), "netns"), topo)  # nothing deployed
    return {"live": live, "sim": simulated(str(DEFAULT))}


@pytest.mark.parametrize("kind", ["live", "sim"])
def test_both_runtimes_answer_every_member_with_the_protocols_parameters(labs, kind):
    lab = labs[kind]
    for name in MEMBERS:
        assert hasattr(lab, name), f"{kind} lab has no {name}"
        declared = getattr(Lab, name, None)
        if inspect.isfunction(declared):
            assert parameters(getattr(type(lab), name)) == parameters(declared), name


def test_the_protocol_lists_what_checks_call_on_both():
    """Members the two have in common but the protocol leaves out would be a second,
    unwritten interface."""
    common = {n for n in dir(LiveLab) if not n.startswith("_")} \
        & {n for n in dir(SimLab) if not n.startswith("_")}
    assert common - set(MEMBERS) == set()


def test_a_node_handle_runs_through_its_lab(labs):
    sim = labs["sim"]
    handle = sim.node("h1")
    assert isinstance(handle, NodeHandle) and handle.name == "h1"
    with pytest.raises(LabError, match=r"runs no commands in nodes \(h1: ip -j addr\)"):
        handle.exec(["ip", "-j", "addr"])
    with pytest.raises(LabError, match=r"runs no commands in nodes \(h1: sleep 1\)"):
        handle.popen(["sleep", "1"])
    for lab in labs.values():
        with pytest.raises(LabError, match="has no node 'h9'"):
            lab.node("h9")


def test_a_live_node_runs_its_runtimes_command_line(labs, monkeypatch):
    live = labs["live"]
    live.state.namespaces["h1"] = "lab-h1"
    started = []
    monkeypatch.setattr("subprocess.Popen", lambda argv, **kw: started.append((argv, kw)))
    live.node("h1").popen(["ip", "link"], text=True)
    assert started == [(["ip", "netns", "exec", "lab-h1", "ip", "link"], {"text": True})]
