"""A ``tune`` point written into a copy of a lab: the WRED profiles of the queues its RoCE
class leaves by, in every switch's config_db.json, and the DCQCN section of every host's NIC
settings file (label ``rocelab.nic``), the two places a real fabric keeps them. The copy is
what a sweep simulates and what a recommendation hands over (``rocelab diff`` against the
lab shows it); the JSON patch (RFC 6902, per file) is the same change as data.

Only the fields the point names change, in the JSON tree, and no lossless PG is pinned into
the configs (unlike ``variants.edit_configs``): the switches derive the same buffers at
boot, and the patch holds the tuning and nothing else. The NIC files are rewritten by
PyYAML, which keeps their data but not their comments; the patch is the change to apply.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import jsonpatch
import yaml

from ..fabric.qos import queue_of_tc, tc_of_dscp
from ..labs import fingerprint
from ..labs.topology import Topology
from ..nic.settings import NicError, NicSettings
from ..nic.settings import load as load_nic

COLORS = ("green", "yellow", "red")


class ApplyError(ValueError):
    """A point the lab cannot take (one line naming the file and the field)."""


def lab_files(topology: Topology) -> list[Path]:
    """The files the lab is made of (``labs.fingerprint``: the clab file and every file it
    references) that lie in its folder, and only those: a clab file may share its folder
    with anything (other labs, results, a virtualenv), none of which a copy needs. A file
    outside the folder (label ``rocelab.allow-outside-paths``) stays where it is,
    referenced as written; ``apply`` refuses to edit one."""
    root = topology.path.resolve().parent
    return [p for p in fingerprint.files(topology) if p.is_relative_to(root)]


def copy_lab(topology: Topology, dest: Path) -> Path:
    """The lab's files (``lab_files``) copied to ``dest`` (replaced if there), each at its
    place relative to the clab file: the copy's topology file."""
    if dest.exists():
        shutil.rmtree(dest)
    root = topology.path.resolve().parent
    for path in lab_files(topology):
        target = dest / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return dest / topology.path.name


def check_points(topology: Topology, points: Iterable[dict]) -> None:
    """Every point written into one scratch copy of the lab: a point the lab cannot take
    is one line (``ApplyError``) before any run starts, not a worker's failure mid-sweep."""
    with tempfile.TemporaryDirectory(prefix="rocelab-tune-") as scratch:
        clab = copy_lab(topology, Path(scratch) / "lab")
        for point in points:
            apply(topology, clab, point)


def _inside(topology: Topology, path: Path, what: str) -> Path:
    """``path`` relative to the lab's folder, or the ApplyError saying it is not there."""
    root = topology.path.resolve().parent
    if not path.resolve().is_relative_to(root):
        raise ApplyError(f"{topology.path}: {what} {path} is outside the lab's folder "
                         f"{root}: tune edits a copy of the folder, so keep it there")
    return path.resolve().relative_to(root)


def roce_profiles(topology: Topology, node: str) -> set[str]:
    """The WRED profiles of the queues the hosts' RoCE DSCPs leave ``node`` by (its own
    maps, on each of its ports)."""
    config = topology.nodes[node].config
    dscps = {(h.nic or NicSettings()).roce.dscp for h in topology.hosts}
    names = set()
    for port in config.ports:
        for dscp in dscps:
            tc, _ = tc_of_dscp(config, port, dscp)
            queue, _ = queue_of_tc(config, port, tc)
            entry = config.qos.queues.get((port, queue))
            if entry is not None and entry.wred_profile:
                names.add(entry.wred_profile)
    return names


def wred_edit(data: dict, profiles: set[str], wred: dict) -> None:
    """Kmin, Kmax (bytes) and Pmax (%) into every colour of ``profiles``."""
    fields = {"min_threshold": wred.get("kmin"), "max_threshold": wred.get("kmax"),
              "drop_probability": wred.get("pmax")}
    for name in sorted(profiles):
        entry = data["WRED_PROFILE"][name]
        for color in COLORS:
            for field, value in fields.items():
                if value is not None:
                    entry[f"{color}_{field}"] = str(value)


def apply(topology: Topology, clab: Path, point: dict) -> dict[str, list[dict]]:
    """``point`` written into the copy ``clab`` of ``topology``: a JSON patch per changed
    file, keyed by its path relative to the lab's folder."""
    patches: dict[str, list[dict]] = {}
    if point["wred"]:
        for node in topology.switches:
            rel = _inside(topology, node.config_path, f"{node.name}'s config")
            profiles = roce_profiles(topology, node.name)
            if not profiles:
                raise ApplyError(f"{rel}: QUEUE: no queue the RoCE class leaves "
                                 f"{node.name} by has a wred_profile to tune")
            path = clab.parent / rel
            before = json.loads(path.read_text())
            after = json.loads(json.dumps(before))
            wred_edit(after, profiles, point["wred"])
            patches[str(rel)] = jsonpatch.make_patch(before, after).patch
            path.write_text(json.dumps(after, indent=2) + "\n")
    if point["dcqcn"]:
        nic_files = {h.nic_path for h in topology.hosts}
        if None in nic_files:
            host = next(h.name for h in topology.hosts if h.nic_path is None)
            raise ApplyError(f"{topology.path}: {host}: no NIC settings file (label "
                             "rocelab.nic), so its DCQCN cannot be tuned")
        for nic_path in sorted(nic_files):
            rel = _inside(topology, nic_path, "the NIC settings file")
            path = clab.parent / rel
            before = yaml.safe_load(path.read_text()) or {}
            after = json.loads(json.dumps(before))
            after.setdefault("dcqcn", {}).update(point["dcqcn"])
            patches[str(rel)] = jsonpatch.make_patch(before, after).patch
            path.write_text(yaml.safe_dump(after, sort_keys=False))
            try:
                load_nic(path)
            except NicError as e:  # named as the lab's own file, not the copy
                problem = str(e).removeprefix(f"{path}: ")
                raise ApplyError(f"{nic_path}: {problem} (tune writes dcqcn "
                                 f"{point['dcqcn']})") from None
    return patches
