"""The rocelab command as a user gets it: the checkout installed
into a fresh virtualenv, then lint, check and diff run from a config repository that holds
only a lab the project has never seen, with the exit codes of the contract.

No network: the venv reaches the dependencies through a .pth file naming this interpreter's
site-packages, and the package is built without isolation (setuptools and wheel from here
or from the system). The checks run in virtual time (--runtime sim): no root needed."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rocelab.labs.images import PROJECT_FILES
from rocelab.labs.project import version
from tests import unseen_lab
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
SYSTEM_PACKAGES = Path("/usr/lib/python3/dist-packages")  # Debian's python3-wheel


def build_path() -> str | None:
    """Where the build finds ``wheel`` (setuptools' bdist_wheel), or None."""
    if importlib.util.find_spec("wheel") is not None:
        return ""
    if (SYSTEM_PACKAGES / "wheel").is_dir():
        return str(SYSTEM_PACKAGES)
    return None


@pytest.fixture(scope="module")
def rocelab_bin(tmp_path_factory) -> Path:
    extra = build_path()
    if extra is None or shutil.which("git") is None:
        pytest.skip("needs git and the wheel package to build rocelab offline")
    tmp = tmp_path_factory.mktemp("installed")
    # what the wheel is built from (the image build copies the same), not the shipped labs
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard",
                            "-z"], capture_output=True, check=True).stdout.split(b"\0")
    src = tmp / "src"
    for name in filter(None, files):
        path = ROOT / name.decode()
        if path.is_file() and name.decode().split("/")[0] in PROJECT_FILES:
            (src / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / name.decode())
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "rocelab-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {**os.environ, "PYTHONPATH": extra} if extra else dict(os.environ)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", "--no-build-isolation", "--no-index", str(src)],
                   check=True, env=env, capture_output=True)
    return venv / "bin" / "rocelab"


@pytest.fixture
def config_repo(tmp_path) -> Path:
    """A folder like a config repository: topologies/fabric-a, nothing of rocelab."""
    unseen_lab.make(tmp_path / "topologies", "fabric-a")
    return tmp_path


def run(rocelab: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(rocelab), *argv], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300)


def test_the_installed_command_is_this_code(rocelab_bin, config_repo):
    done = run(rocelab_bin, config_repo, "--version")
    assert done.returncode == 0 and done.stdout.strip() == f"rocelab {version()}"
    python = rocelab_bin.parent / "python"
    where = subprocess.run([str(python), "-c", "import rocelab.checks, rocelab; "
                            "print(rocelab.checks.__file__); print(rocelab.__file__)"],
                           cwd=config_repo, capture_output=True, text=True, check=True)
    for line in where.stdout.split():
        assert Path(line).is_relative_to(rocelab_bin.parent.parent), line  # not the checkout


def test_the_wheel_claims_only_the_rocelab_import_name(rocelab_bin, config_repo):
    """Installed beside Fabric (``fabric``) or the PyPI package ``traffic``, rocelab must
    not shadow them: its subpackages live under ``rocelab``, and nothing else is added."""
    python = rocelab_bin.parent / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; "
                                   "print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    added = {p.name for p in purelib.iterdir()
             if p.suffix not in (".pth", ".dist-info") and p.name != "__pycache__"}
    assert added == {"rocelab"}, added
    top_level = next(purelib.glob("rocelab-*.dist-info")) / "top_level.txt"
    if top_level.is_file():
        assert top_level.read_text().split() == ["rocelab"]
    for name in ("fabric", "labs", "traffic", "checks", "nic", "cli"):
        found = subprocess.run([str(python), "-c", f"import {name}"], cwd=config_repo,
                               capture_output=True, text=True)
        assert found.returncode != 0 and "No module named" in found.stderr, name
    done = subprocess.run([str(python), "-c", "import rocelab.fabric.agent, rocelab.nic.core, "
                           "rocelab.labs.lab, rocelab.traffic.patterns, rocelab.checks.lint, "
                           "rocelab.cli.program"], cwd=config_repo, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr


def test_lint_and_diff_from_a_config_repository(rocelab_bin, config_repo):
    done = run(rocelab_bin, config_repo, "lint", "fabric-a", "--junit", "results/lint.xml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 errors" in done.stdout
    assert ET.parse(config_repo / "results" / "lint.xml").getroot().tag == "testsuites"
    done = run(rocelab_bin, config_repo, "diff", "fabric-a", "topologies/fabric-a",
               "--format", "json")
    assert done.returncode == 0 and json.loads(done.stdout)["chain"] == []
    done = run(rocelab_bin, config_repo, "lint", "fabric-z")
    assert done.returncode == 2 and done.stderr.count("\n") == 1


def test_check_exit_codes_from_a_config_repository(rocelab_bin, config_repo):
    """0: the classification of both lossless classes and the lossy control holds; 1: lossy
    traffic shares a lossless queue; 2: no such lab. Results land in the config repository's
    results/. (3, inconclusive, has no case in virtual time since the storm check runs
    there too: tests/unit/test_cli.py and test_check_run.py test it from summaries.)"""
    k = "dscp_lands and gpu1"
    done = run(rocelab_bin, config_repo, "check", "fabric-a", "--runtime", "sim", "-k", k,
               "--results", "results/ok")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
    for name in ("junit.xml", "summary.json", "summary.md"):
        assert (config_repo / "results" / "ok" / name).is_file(), name
    config = config_repo / "topologies" / "fabric-a" / "configs" / "tor1" / "config_db.json"
    data = json.loads(config.read_text())
    data["TC_TO_QUEUE_MAP"]["AZURE"]["1"] = "3"  # DSCP 0 (TC 1) into RoCE's lossless queue
    config.write_text(json.dumps(data))
    done = run(rocelab_bin, config_repo, "check", "fabric-a", "--runtime", "sim", "-k",
               f"{k} and control")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "a lossless queue" in done.stdout
    assert list((config_repo / "results").glob("fabric-a-*/summary.json"))  # ./results/
    done = run(rocelab_bin, config_repo, "check", "nowhere", "--runtime", "sim")
    assert done.returncode == 2 and done.stderr.startswith("rocelab: nowhere")
