"""The topology files rocelab derives from a lab's own: the one containerlab deploys on this
machine (``deploy_document``, labs/runtimes/containerlab.py) and the one clabernetes runs
(labs/export.py), and which switch each switch node runs in them.

Both start from the file as written and differ from it the same ways: settings rocelab
resolves per node are written per node, a switch's config is placed where the switch that
runs reads it, and switches labelled ``rocelab.switch: rocelab`` become the project's switch
image. A label, because containerlab's schema allows no keys of our own.
"""
from __future__ import annotations

import copy
from pathlib import Path

import yaml

from ..fabric.config import DEFAULT_ECN_MARKING
from .images import SWITCH_IMAGE
from .errors import LabError
from .sonic import LoadMode
from .topology import (SONIC_CONFIG_BINDS, SONIC_CONFIG_TARGET, SONIC_STAGED_CONFIG, Node,
                       Topology)

SWITCH_LABEL = "rocelab.switch"
SONIC_VS = "sonic-vs"  # the default: SONiC-VS, configuration-level checks only
ROCELAB_SWITCH = "rocelab"  # the project's switch image: full data plane
AGENT_DIR = "/run/rocelab"  # in the switch container: agent.sock and agent.log
PORTS_ENV = "ROCELAB_PORTS"  # the ports the switch container waits for before it starts
TIME_SCALE_ENV = "ROCELAB_TIME_SCALE"  # the agent's --time-scale (label rocelab.time-scale)
ECN_MARKING_ENV = "ROCELAB_ECN_MARKING"  # --ecn-marking (label rocelab.ecn-marking), if set

# Settings that rocelab resolves per node (topology.py merges node > group > kind > defaults)
# and writes at node level in the derived file, so containerlab cannot merge them differently.
NODE_RESOLVED_KEYS = ("exec", "binds", "startup-config")


# ---- which switch a node runs ---------------------------------------------------------------

def switch_implementation(node: Node) -> str:
    """``sonic-vs`` or ``rocelab``: what a switch node runs under containerlab and clabernetes."""
    value = node.labels.get(SWITCH_LABEL, SONIC_VS)
    if value not in (SONIC_VS, ROCELAB_SWITCH):
        raise LabError(f"node {node.name}: label {SWITCH_LABEL}: {value!r} is not one of "
                       f"{SONIC_VS} (SONiC-VS, configuration level) or {ROCELAB_SWITCH} "
                       "(the project's switch image, full data plane)")
    return value


def runs_rocelab_switch(node: Node) -> bool:
    return node.is_switch and switch_implementation(node) == ROCELAB_SWITCH


# ---- the derived topology files -------------------------------------------------------------

def read_document(topo: Topology) -> dict:
    """The topology file as written (``${VAR}`` left for containerlab to expand)."""
    return yaml.safe_load(topo.path.read_text())


def dump_document(doc: dict, header: str) -> str:
    """YAML text of a derived topology, its origin in a comment; wide lines, because folded
    long commands are valid but hard to read."""
    return f"# {header}\n" + yaml.safe_dump(doc, sort_keys=False, width=4096)


def deploy_document(topo: Topology, raw: dict, version: str, agent_dirs: dict[str, Path],
                    load_modes: dict[str, LoadMode]) -> dict:
    """The file containerlab deploys on this machine: absolute binds (it lives in the state
    folder), no exec (run and checked by this runtime), each SONiC-VS config bound read-only
    where its image's start.sh copies it from (``load_modes`` per switch; none for images that
    get it copied in), rocelab switches as the switch image with their agent's folder
    (``agent_dirs``) bound where the agent puts its socket and log."""
    doc = without_layered_settings(raw)
    base = topo.path.resolve().parent
    for node in topo.nodes.values():
        spec = node_spec(doc, node.name)
        spec.pop("exec", None)
        binds = [_absolute_bind(b, base) for b in own_binds(node)]
        if runs_rocelab_switch(node):
            as_rocelab_switch(spec, node, version)
            binds += [f"{node.config_path}:{SONIC_CONFIG_TARGET}:ro",
                      f"{agent_dirs[node.name]}:{AGENT_DIR}"]
        elif node.is_switch and load_modes[node.name] is LoadMode.BIND:
            binds.append(f"{node.config_path}:{SONIC_STAGED_CONFIG}:ro")
        set_binds(spec, binds)
    return doc


def without_layered_settings(raw: dict) -> dict:
    """A copy of the file without the settings rocelab resolves per node (written per node)."""
    doc = copy.deepcopy(raw)
    tree = doc.setdefault("topology", {})
    layers = [tree.get("defaults"), *(tree.get("kinds") or {}).values(),
              *(tree.get("groups") or {}).values()]
    for layer in layers:
        if isinstance(layer, dict):
            for key in NODE_RESOLVED_KEYS:
                layer.pop(key, None)
    return doc


def node_spec(doc: dict, name: str) -> dict:
    """The node's own mapping, with startup-config dropped: rocelab reads it only as a
    switch's config_db.json, which each runtime delivers its own way."""
    nodes = doc["topology"]["nodes"]
    spec = nodes[name] = dict(nodes.get(name) or {})
    spec.pop("startup-config", None)
    return spec


def own_binds(node: Node) -> tuple[str, ...]:
    """The node's binds without a switch's config_db.json bind (each runtime places it)."""
    def names_config(bind: str) -> bool:
        parts = bind.split(":")
        return len(parts) >= 2 and parts[1] in SONIC_CONFIG_BINDS

    return tuple(b for b in node.binds if not (node.is_switch and names_config(b)))


def _absolute_bind(bind: str, base: Path) -> str:
    source, sep, rest = bind.partition(":")
    return f"{(base / source).resolve()}{sep}{rest}"


def as_rocelab_switch(spec: dict, node: Node, version: str) -> None:
    """kind linux: containerlab's sonic-vs kind would replace the image's entrypoint and start
    SONiC's supervisord in it."""
    spec["kind"] = "linux"
    spec["image"] = f"{SWITCH_IMAGE}:{version}"
    spec["env"] = {**(spec.get("env") or {}), PORTS_ENV: str(node.ports),
                   TIME_SCALE_ENV: f"{node.time_scale:g}"}
    if node.ecn_marking != DEFAULT_ECN_MARKING:
        spec["env"][ECN_MARKING_ENV] = node.ecn_marking


def set_binds(spec: dict, binds: list[str]) -> None:
    if binds:
        spec["binds"] = binds
    else:
        spec.pop("binds", None)
