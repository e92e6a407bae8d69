"""The lab most integration tests share: a fresh copy of the default lab per module, always
taken down, and proven to leave nothing behind."""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from rocelab.labs import live
from tests.conftest import copy_lab
from tests.integration.test_lab import NOTHING, traces


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = live.up(str(copy_lab(tmp_path_factory.mktemp("lab"))))
    try:
        yield lab
    finally:
        lab.down()
    assert traces(lab.name) == NOTHING


BARE = """#!/bin/sh
# A fresh machine's python3: no site-packages, none of the project's packages.
exec {base} -I -S "$@"
"""


@pytest.fixture(scope="session", autouse=True)
def bare_python3_on_path(tmp_path_factory):
    """Put a bare ``python3`` first on PATH, so a namespace command that names it instead of
    ``sys.executable`` fails here as it would on a fresh machine."""
    folder = tmp_path_factory.mktemp("bare-python")
    base = Path(sys._base_executable).resolve()
    for name in ("python3", "python"):
        wrapper = folder / name
        wrapper.write_text(BARE.format(base=base))
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{folder}{os.pathsep}{old}"
    yield folder
    os.environ["PATH"] = old


@pytest.fixture(scope="session", autouse=True)
def private_state_root(tmp_path_factory):
    """The tests' labs keep their state, locks and kept agent logs in a folder of their own:
    nothing of theirs stays under /run/rocelab, and lab.cleanup in a test judges only the
    tests' labs, never a lab a user (or another run) has up."""
    from rocelab.labs import state as states
    old = os.environ.get(states.STATE_ENV)
    os.environ[states.STATE_ENV] = str(tmp_path_factory.mktemp("state"))
    yield
    if old is None:
        del os.environ[states.STATE_ENV]
    else:
        os.environ[states.STATE_ENV] = old
