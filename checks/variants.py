"""Copies of a lab, up for a block and down after it: with edited switch configs (the
checks' negative controls: no PFC, a small headroom...) or at a larger time scale (a
scenario rerun slower when the emulation lost fidelity). Each is recorded as its lab's
variant, so that ``invoke check`` and ``lab.cleanup`` remove one a killed run left."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from ..fabric.buffermgrd import pinned
from ..labs import lock
from ..labs.lab import Lab
from ..labs.topology import TIME_SCALE_LABEL, Topology


def keep_configs(config: dict) -> None:
    """The variant edit that changes no config (a copy that differs in time scale only)."""


def edit_configs(clab: Path, edit: Callable[[dict], None], topology: Topology) -> None:
    """``edit`` applied to each switch's config_db.json in the copy ``clab`` of
    ``topology``, after the lossless PGs buffermgrd made at boot are written into it
    (``fabric.buffermgrd.pinned``): the edit sees the config the switch runs."""
    for node in topology.switches:
        path = clab.parent / node.config_path.relative_to(topology.path.parent)
        data = json.loads(path.read_text())
        if node.config is not None:
            pinned(data, node.config)
        edit(data)
        path.write_text(json.dumps(data, indent=2) + "\n")


def scaled(doc: dict, topology: Topology, factor: float) -> None:
    """The clab document ``doc`` of ``topology`` with every node's time scale x ``factor``
    (a node label, which wins over the defaults and kinds it may have come from)."""
    for name, node in doc["topology"]["nodes"].items():
        labels = node.setdefault("labels", {}) or {}
        labels[TIME_SCALE_LABEL] = f"{topology.nodes[name].time_scale * factor:g}"
        node["labels"] = labels


def variant_name(lab: str, suffix: str) -> str:
    """``<lab>-<suffix>-<tag>``, the lab's part shortened so that the whole is a valid lab
    name (32 characters at most) whatever the lab's length. The tag hashes both: a variant
    never takes its lab's name, nor the name of another lab's variant with the same
    shortened prefix."""
    if not re.fullmatch(r"[a-z0-9]{1,12}", suffix):
        raise ValueError(f"variant suffix {suffix!r}: 1 to 12 lowercase letters or digits")
    tag = hashlib.sha256(f"{lab}/{suffix}".encode()).hexdigest()[:6]
    keep = 32 - len(suffix) - len(tag) - 2
    return f"{lab[:keep]}-{suffix}-{tag}"


@contextmanager
def variant(lab: Lab, suffix: str, folder: Path, edit: Callable[[dict], None],
            scale: float = 1.0) -> Iterator[Lab]:
    """A copy of ``lab`` with edited switch configs, up for the block (in ``lab``'s runtime)
    and down after it (its agent logs kept in its folder), holding its lock all along.
    Recorded as ``lab``'s variant, so that ``invoke check`` and ``lab.cleanup`` remove one a
    killed run left. Every node runs at its lab's S (as ``lab.up`` chose it for the machine,
    written as the node's label: a variant is not calibrated again) times ``scale``."""
    source = Path(lab.topology_path)
    name = variant_name(lab.name, suffix)
    with lock.hold(name, exclusive=True):
        copy = folder / name
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(source.parent, copy, ignore=shutil.ignore_patterns("*.clab.yml"))
        doc = yaml.safe_load(source.read_text())
        doc["name"] = name
        scaled(doc, lab.topology, scale)
        clab = copy / f"{name}.clab.yml"
        clab.write_text(yaml.safe_dump(doc, sort_keys=False))
        edit_configs(clab, edit, lab.topology)
        other = lab.variant(str(clab))
        try:
            yield other
        finally:
            other.down(logs=copy / "agent-logs")
