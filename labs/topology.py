"""A containerlab topology file, loaded and validated into a typed model before anything runs.

The clab file is the one source of truth and must stay valid for containerlab itself, whose
schema allows no extra keys: so unknown keys are errors here too, and rocelab's own settings
live in node ``labels``. Every error is one line naming the file and the key. Here: finding
a lab by name or path and loading it; the model is ``topology_model``, the reader
``topology_load``.
"""
from __future__ import annotations

import os
from pathlib import Path

from .topology_load import Loader, expand_env, read_document
from .topology_model import (
    ALLOW_OUTSIDE_LABEL, AUTO, DEFAULT_MTU, DEFAULT_TIME_SCALE, ECN_MARKING_LABEL, HOST_KINDS,
    LINK_KEYS, NAME_RE, NODE_KEYS, SONIC_CONFIG_BINDS, SONIC_CONFIG_TARGET, SONIC_STAGED_CONFIG,
    SWITCH_KINDS, TIME_SCALE_LABEL, TOP_KEYS, TOPOLOGY_KEYS, Endpoint, Link, Node, Topology,
    TopologyError, auto_floor,
)

# the model and the reader are modules of their own; the labs import them from here
__all__ = [
    "ALLOW_OUTSIDE_LABEL", "AUTO", "DEFAULT_MTU", "DEFAULT_TIME_SCALE", "ECN_MARKING_LABEL",
    "HOST_KINDS", "LINK_KEYS", "NAME_RE", "NODE_KEYS", "REPO_TOPOLOGIES", "SONIC_CONFIG_BINDS",
    "SONIC_CONFIG_TARGET", "SONIC_STAGED_CONFIG", "SWITCH_KINDS", "TIME_SCALE_LABEL",
    "TOP_KEYS", "TOPOLOGY_KEYS", "Endpoint", "Link", "Node", "Topology", "TopologyError",
    "auto_floor", "expand_env", "lab_folders", "load", "read_document", "read_name",
    "resolve", "table_notes",
]


REPO_TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"


def lab_folders(topologies_dir: Path | None = None) -> list[Path]:
    """Where a bare lab name is looked up: ``topologies_dir`` if given, else ./topologies
    (a config repository's) and then the rocelab repository's, when it is there (an
    installed package has none)."""
    if topologies_dir is not None:
        return [topologies_dir]
    return list(dict.fromkeys(p for p in (Path.cwd() / "topologies", REPO_TOPOLOGIES)
                              if p.is_dir()))


def resolve(spec: str | os.PathLike, topologies_dir: Path | None = None) -> Path:
    """A lab name (``roce-v2-leafspine``) or a path to a clab file or its folder -> the file."""
    p = Path(spec)
    if p.is_file():
        return p
    if p.is_dir():
        files = sorted(p.glob("*.clab.yml")) + sorted(p.glob("*.clab.yaml"))
        if len(files) != 1:
            raise TopologyError(f"{p}: expected exactly one *.clab.yml file, found {len(files)}")
        return files[0]
    folders = lab_folders(topologies_dir)
    if NAME_RE.match(str(spec)):
        for base in folders:
            candidate = base / str(spec) / f"{spec}.clab.yml"
            if candidate.is_file():
                return candidate
    where = f" (looked in {', '.join(map(str, folders))})" if NAME_RE.match(str(spec)) \
        and folders else ""
    raise TopologyError(f"{spec}: no such lab folder, topology file or lab name{where}")


def load(spec: str | os.PathLike, topologies_dir: Path | None = None,
         configs: bool = True) -> Topology:
    """Parse and validate a clab file, its nodes, links and every file they reference.

    ``configs=False`` leaves switch configs unparsed (``Node.config`` None, ``config_path``
    set): config.lint reports a broken config as a finding instead of stopping at it.
    """
    path = resolve(spec, topologies_dir)
    return Loader(path, configs).topology(read_document(path))


def read_name(spec: str | os.PathLike, topologies_dir: Path | None = None) -> str:
    """The lab's name alone (expanded and checked), for finding a running lab without
    validating the rest of its file."""
    path = resolve(spec, topologies_dir)
    doc = read_document(path)
    return Loader(path).name(doc.get("name") if isinstance(doc, dict) else None)


def table_notes(topology: Topology) -> dict[str, dict[str, list[str]]]:
    """Per switch, the config tables that are not in force here: ``not_emulated`` (no
    data-plane meaning) and ``skipped`` (their meaning is not emulated; the lab runs
    without them by its rocelab.unemulated-tables label), fabric/tables.py says why; and
    ``derived_pgs``, the lossless PGs the config left out that buffermgrd makes at boot
    from the platform's pg_profile_lookup.ini, or could not make (fabric/buffermgrd.py)."""
    out = {}
    for node in topology.switches:
        config = node.config
        if config is not None and (config.not_emulated or config.skipped
                                   or config.derived_pgs):
            out[node.name] = {"not_emulated": list(config.not_emulated),
                              "skipped": list(config.skipped),
                              "derived_pgs": [d.note for d in config.derived_pgs]}
    return out
