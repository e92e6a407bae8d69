"""The lab lifecycle under faults: a stale lab refused, signals during lab.up rolled back, an
interrupted check's variant labs taken down by its own teardown, a deleted host reported
missing (never recreated), a check's results folder with what was deployed.

Needs root. Each test works on a copy of a project lab under a fresh name and leaves nothing
behind.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pyroute2 import netns

from rocelab.labs import live
from rocelab.labs import state as states
from tests.conftest import ROOT, copy_lab
from tests.integration.test_lab import NOTHING, traces, wait_for

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces and veth"),
]


def invoke(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def name_of(path: Path) -> str:
    return path.name.removesuffix(".clab.yml")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_up_rolls_back_like_ctrl_c(tmp_path, sig):
    marker = tmp_path / "deploying"

    def slow_exec(doc):  # h4's exec runs while everything before it exists
        doc["topology"]["nodes"]["h4"]["exec"] += [f"touch {marker}", "sleep 60"]
    path = copy_lab(tmp_path, edit=slow_exec)
    proc = subprocess.Popen([sys.executable, "-m", "invoke", "lab.up", str(path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(marker.exists, timeout=60)
        assert states.load(name_of(path)).status == "deploying"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        live.down(name_of(path))
    assert proc.returncode == 128 + sig
    assert err.strip().endswith(f"interrupted ({sig.name}): lab {path} rolled back")
    assert traces(name_of(path)) == NOTHING


def test_a_deleted_host_is_reported_missing_and_never_recreated(tmp_path):
    lab = live.up(str(copy_lab(tmp_path)))
    try:
        gone = lab.state.namespaces["h2"]
        subprocess.run(["ip", "netns", "del", gone], check=True)
        nodes, _ = lab.status()
        assert [n.name for n in nodes if not n.namespace_present] == ["h2"]
        pings = lab.ping_all()
        assert len(pings) == 12  # every host of the topology, h2 included
        with_h2 = [p for p in pings if "h2" in (p.src, p.dst)]
        assert len(with_h2) == 6 and not any(p.ok for p in with_h2)
        assert {p.error for p in with_h2} == {f"host h2: namespace {gone} is missing "
                                              f"(invoke lab.status {lab.name})"}
        assert gone not in netns.listnetns()
    finally:
        lab.down()
    assert traces(lab.name) == NOTHING


def test_check_refuses_a_lab_whose_config_changed_since_up(tmp_path):
    path = copy_lab(tmp_path)
    lab = live.up(str(path))
    try:
        config = path.parent / "configs/leaf1/config_db.json"
        data = json.loads(config.read_text())
        for entry in data["PORT_QOS_MAP"].values():
            entry.pop("pfc_enable", None)
        config.write_text(json.dumps(data, indent=4))
        results = tmp_path / "results"
        done = invoke("check", str(path), "-k", "lossless_incast", "--results", str(results))
        assert done.returncode == 1
        assert done.stderr.strip() == (
            f"rocelab: lab {lab.name} is stale: configs/leaf1/config_db.json changed since "
            f"lab.up: invoke lab.down {lab.name} and lab.up again, or pass --reuse")
        assert not results.exists() and states.load(lab.name) is not None
        status = invoke("lab.status", "--name", lab.name, "--reuse")
        assert "warning: lab" in status.stdout and "--reuse" in status.stdout
    finally:
        lab.down()
    assert traces(lab.name) == NOTHING


def test_a_check_that_brings_the_lab_up_records_what_it_deployed(tmp_path):
    path = copy_lab(tmp_path)
    name, results = name_of(path), tmp_path / "results"
    try:
        done = invoke("check", str(path), "-k", "no_check_has_this_name", "--results",
                      str(results))
        # none ran: a usage error in the exit-code contract (checks/outcome.py, docs/ci.md)
        assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
        summary = json.loads((results / "summary.json").read_text())
        assert summary["status"] == "complete" and summary["topology"] == str(path)
        assert str(path.parent / "configs/spine2/config_db.json") in summary["fingerprint"]
        assert summary["changed_since_up"] == []
        assert "## Topology" in (results / "summary.md").read_text()
        assert sorted(p.name for p in (results / "agent-logs").iterdir()) == [
            "leaf1.log", "leaf2.log", "spine1.log", "spine2.log"]
        again = invoke("check", str(path), "--results", str(results))
        assert again.returncode == 1 and "is not empty" in again.stderr
    finally:
        live.down(name)
    assert traces(name) == NOTHING


# The check awaits its interrupt on the signal module's wakeup fd, not in a timed wait:
# CPython runs a signal's handler only between bytecodes, so a SIGINT that lands after the
# last check and before a blocking call (an Event's timed lock wait) has started is seen only
# when that call returns, 120 s later (under CPU load, a few in a thousand such waits). The
# handler writes the signal's byte into the pipe whenever the signal came, and select
# returns at once on it.
VARIANT_CHECK = """
import os
import select
import signal
from rocelab.checks import congestion as cg
from rocelab.checks import variants
from rocelab.labs import actions
from rocelab.labs import live

def test_variant(tmp_path):
    lab = live.running({lab!r})
    readable, writable = os.pipe()
    os.set_blocking(writable, False)
    with variants.variant(lab, "nopfc", tmp_path, actions.without_pfc) as other:
        signal.set_wakeup_fd(writable)
        print("VARIANT_UP", other.name, flush=True)
        select.select([readable], [], [], 120)
"""
RUNNER = """
import sys
from rocelab.checks.run import _pytest
from rocelab.labs.interrupt import Interrupted
try:
    _pytest(sys.argv[1:], lambda line: print(line, flush=True))
except Interrupted as e:
    print(f"interrupted by {{e.signum}}", flush=True)
"""


def test_an_interrupted_check_waits_for_its_teardown_and_leaves_no_variant_lab(tmp_path):
    lab = live.up(str(copy_lab(tmp_path)))
    check = tmp_path / "test_variant.py"
    check.write_text(VARIANT_CHECK.format(lab=lab.name))
    argv = [sys.executable, "-m", "pytest", str(check), "-s", "-q", "-p", "no:cacheprovider",
            "--rootdir", str(tmp_path)]
    proc = subprocess.Popen([sys.executable, "-c", RUNNER.format(), *argv], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    variant = None
    try:
        for line in proc.stdout:
            if "VARIANT_UP" in line:
                variant = line.split("VARIANT_UP", 1)[1].split()[0]
                break
        assert variant and states.load(variant).parent == lab.name
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
        assert out.splitlines()[-1] == f"interrupted by {int(signal.SIGTERM)}"
        assert states.load(variant) is None  # pytest's own teardown took it down
        assert traces(variant) == NOTHING
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        # the runner's pytest runs in its own session: a failed assertion above can leave
        # it holding the variant's lock; killed, it frees the lock (its lab stays for us)
        subprocess.run(["pkill", "-KILL", "-f", str(check)], check=False)
        try:
            for left in [s.lab for s in states.all_labs() if s.parent == lab.name]:
                live.down(left)
        finally:
            lab.down()
    assert traces(lab.name) == NOTHING


def test_cleanup_removes_a_variant_lab_whose_check_is_gone(tmp_path):
    lab = live.up(str(copy_lab(tmp_path)), parent="a-check-that-was-killed")
    try:
        assert live.cleanup().removed == [lab.name]
    finally:
        live.down(lab.name)
    assert traces(lab.name) == NOTHING
