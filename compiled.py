"""The compiled build: the simulator's per-frame classes compiled by Cython from their
unchanged ``.py`` files, typed by the ``.pxd`` files beside them, loaded in their place.

``scripts/compile.py`` (run by ``scripts/install.sh``) writes the extension modules into
``.compiled/`` with a manifest of what they were built from. ``rocelab/__init__`` calls
``install`` first thing: the import system then takes a module of ``MODULES`` from the
build, and only when every source of the build is unchanged since (a stale module would
run code that is no longer in the checkout, and the compiled modules share their typed
classes, so it is all of them or none). Everything else, and everything when the build is
absent or stale or ``ROCELAB_PURE=1`` is set, is the pure-Python reference: the results
are the same (``tests/unit/test_compiled.py``), only faster compiled.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
BUILD = ROOT / ".compiled"
MANIFEST = BUILD / "manifest.json"
PURE_ENV = "ROCELAB_PURE"

# the per-frame path of every runtime, each with a .pxd beside it (docs/runtimes.md,
# "The compiled build")
MODULES = (
    "rocelab.labs.sim.engine",
    "rocelab.labs.sim.link",
    "rocelab.labs.sim.switch",
    "rocelab.labs.sim.host",
    "rocelab.fabric.model.frames",
    "rocelab.fabric.model.cable",
    "rocelab.fabric.model.bridge",
    "rocelab.fabric.model.interfaces",
    "rocelab.fabric.model.neighbors",
    "rocelab.fabric.model.scheduler",
    "rocelab.fabric.model.pause",
    "rocelab.fabric.model.pools",
    "rocelab.fabric.model.egress_buffers",
    "rocelab.fabric.model.buffers",
    "rocelab.fabric.model.counters",
    "rocelab.fabric.model.wred",
    "rocelab.fabric.model.egress",
    "rocelab.fabric.model.ports",
    "rocelab.fabric.model.ecmp",
    "rocelab.fabric.model.router_base",
    "rocelab.fabric.model.router",
    "rocelab.fabric.model.router6",
    "rocelab.fabric.model.forwarding",
    "rocelab.nic.roce",
    "rocelab.nic.codec",
    "rocelab.nic.dcqcn",
    "rocelab.nic.pause",
    "rocelab.nic.rc",
    "rocelab.nic.qp",
    "rocelab.nic.ready",
    "rocelab.nic.core",
)


def source_files(module: str) -> list[Path]:
    """The ``.py`` and ``.pxd`` one module of the build is compiled from."""
    base = ROOT.joinpath(*module.split(".")[1:])
    return [base.with_suffix(".py"), base.with_suffix(".pxd")]


def fingerprint() -> str:
    """What the build must have been made from to be loaded: the sources of every module
    and the interpreter's ABI."""
    digest = hashlib.sha256(sys.implementation.cache_tag.encode())
    for module in MODULES:
        for path in source_files(module):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def extension_path(module: str) -> Path:
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return BUILD.joinpath(*module.split(".")[1:]).with_suffix(suffix)


def state() -> str:
    """Which build this process runs: ``compiled``, or ``pure`` and why."""
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return f"pure ({PURE_ENV} is set)"
    return build_state()


def build_state() -> str:
    """``compiled`` when the build is current (whatever ``ROCELAB_PURE`` says), or ``pure``
    and why not."""
    if not MANIFEST.exists():
        return "pure (no compiled build: scripts/install.sh builds it)"
    try:
        built = json.loads(MANIFEST.read_text())["fingerprint"]
        current = fingerprint()
    except (OSError, ValueError, KeyError, TypeError) as e:  # a source gone, a bad manifest
        return f"pure (the compiled build cannot be checked: {e})"
    if built != current:
        return "pure (the compiled build is older than its sources: run scripts/install.sh)"
    missing = [m for m in MODULES if not extension_path(m).exists()]
    if missing:
        return f"pure (the compiled build lacks {', '.join(missing)})"
    return "compiled"


class _Finder:
    """Finds the modules of the build in ``.compiled/`` before the path finder does."""

    @staticmethod
    def find_spec(name: str, path=None, target=None):
        if name not in MODULES:
            return None
        return importlib.util.spec_from_file_location(name, extension_path(name))


def install() -> None:
    """Load the build's modules from it from now on, when it is current (``state()``)."""
    if state() == "compiled" and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
