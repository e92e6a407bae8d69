"""Export a lab for clabernetes (c9s): the same topology on Kubernetes, when one machine is not
enough.

clabernetes runs a containerlab file from a ``Topology`` custom resource
(``clabernetes.containerlab.dev/v1alpha1``): ``spec.definition.containerlab`` holds the file
text, each node becomes a pod running a one-node containerlab, and links become tunnels between
pods. Files the topology binds are not on the cluster, so each one travels in a ConfigMap and
``spec.deployment.filesFromConfigMap`` maps it into the node's launcher pod at the path the file
names (``filePath``, relative to the topology), from the ConfigMap key ``configMapPath``.

What clabernetes does to the file, and what the export does about it (read against clabernetes
controllers/topology/definitioncontainerlab.go and launcher/connectivity/vxlan.go, and
containerlab v0.79.0 links/link_vxlan.go):

- Each node's sub-topology keeps ``defaults``, its ``kinds`` entry and the node, but no
  ``groups``: the export resolves every group into its nodes.
- Each link is rewritten to ``[node:ethN, host:node-ethN]`` without its ``mtu:``, so the node's
  ``ethN`` comes up at containerlab's default (9500) while the VXLAN tunnel behind it takes its
  parent interface's MTU minus 50. The export puts each link's MTU inside the nodes instead:
  ``ip link set ... mtu`` in a host's ``exec``, ``ROCELAB_MTUS`` for the rocelab switch's
  entrypoint, and for SONiC-VS its own ``PORT`` mtu (its virtual SAI sets ``ethN``'s MTU from
  it), which must therefore agree with the link.
- ``connectivity: slurpeeth`` (optional) carries links in TCP instead of VXLAN, which has no
  MTU ceiling below the links'.

The file exported is the same switch choice as ``--runtime containerlab`` (SONiC-VS, or the
project's switch image where labelled), with the commands that runtime would run handed to
containerlab's ``exec`` instead.
"""
from __future__ import annotations

import hashlib
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import sonic, topology
from .images import project_version
from .clabfile import (as_rocelab_switch, dump_document, node_spec, own_binds, read_document,
                       runs_rocelab_switch, set_binds, without_layered_settings)
from .runtimes.netns import HOST_OFFLOADS_OFF
from .errors import LabError
from .topology import SONIC_CONFIG_TARGET, SONIC_STAGED_CONFIG, Node, Topology

API_VERSION = "clabernetes.containerlab.dev/v1alpha1"
FORMATS = ("clabernetes",)
CONNECTIVITY = ("vxlan", "slurpeeth")  # the Topology CRD's spec.connectivity
DEFAULT_OUT = Path("build") / "clabernetes"
CONFIGMAP_MAX_BYTES = 1_000_000  # etcd keeps objects under ~1 MiB, metadata included
DNS_LABEL_MAX = 63
VXLAN_OVERHEAD = 50  # outer Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8
MTUS_ENV = "ROCELAB_MTUS"  # the rocelab switch's entrypoint sets these port MTUs
MERGED_MAPS = ("labels", "env")  # merged key by key across layers (labs/topology.py)


@dataclass(frozen=True)
class Exported:
    path: Path  # the manifests file, for kubectl apply -f
    topology: str  # the Topology resource's name
    config_maps: int
    largest_mtu: int  # under vxlan, the pod network must carry this plus VXLAN_OVERHEAD
    connectivity: str


def dns_label(text: str) -> str:
    """A Kubernetes name (DNS-1123 label): lower-case alphanumerics and '-', alphanumeric at
    both ends, at most 63 characters; a shortened name keeps a hash of the original so that two
    long names stay distinct."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "lab"
    if len(name) <= DNS_LABEL_MAX:
        return name
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{name[:DNS_LABEL_MAX - 9].rstrip('-')}-{digest}"


def config_map_key(source: str) -> str:
    """ConfigMap keys allow letters, digits, '-', '_' and '.': the file's own name, cleaned."""
    return re.sub(r"[^-._a-zA-Z0-9]", "-", Path(source).name)


def link_mtus(topo: Topology, node: str) -> dict[str, int]:
    """The node's wired interfaces and their links' MTUs, in link order."""
    return {end.iface: link.mtu for link in topo.links for end in (link.a, link.b)
            if end.node == node}


def portable_document(topo: Topology, raw: dict, version: str) -> dict:
    """The file for clabernetes, where containerlab runs in a pod per node and nothing of this
    machine exists: binds stay relative (served from ConfigMaps), groups are resolved into
    their nodes, and containerlab itself runs what this runtime would: on hosts the links' MTUs,
    offloads off, then their exec; on SONiC-VS a bounded wait for readiness, then BGP."""
    doc = without_layered_settings(raw)
    groups = doc["topology"].pop("groups", None) or {}
    for node in topo.nodes.values():
        spec = node_spec(doc, node.name)
        _resolve_group(spec, groups)
        mtus = link_mtus(topo, node.name)
        binds = list(own_binds(node))
        if not node.is_switch:
            commands = [shlex.join(["ip", "link", "set", "dev", iface, "mtu", str(mtu)])
                        for iface, mtu in mtus.items()]
            commands += [shlex.join(["ethtool", "-K", iface, *HOST_OFFLOADS_OFF])
                         for iface in mtus] + list(node.exec)
        elif runs_rocelab_switch(node):
            as_rocelab_switch(spec, node, version)
            spec["env"][MTUS_ENV] = ",".join(f"{iface}={mtu}" for iface, mtu in mtus.items())
            binds.append(f"{_relative_source(node, topo)}:{SONIC_CONFIG_TARGET}:ro")
            commands = []
        else:
            _require_port_mtus(topo, node, mtus)
            binds.append(f"{_relative_source(node, topo)}:{SONIC_STAGED_CONFIG}:ro")
            commands = [sonic.wait_command()]
        set_binds(spec, binds)
        if commands:
            spec["exec"] = commands
        else:
            spec.pop("exec", None)
    return doc


def _resolve_group(spec: dict, groups: dict) -> None:
    """A group's settings written into its node (the node's own win; labels and env merge), as
    clabernetes' per-node topologies have no groups."""
    group = groups.get(spec.pop("group", None)) or {}
    for key, value in group.items():
        if key in MERGED_MAPS:
            spec[key] = {**(value or {}), **(spec.get(key) or {})}
        else:
            spec.setdefault(key, value)


def _require_port_mtus(topo: Topology, node: Node, mtus: dict[str, int]) -> None:
    """SONiC-VS's virtual SAI sets each ethN's MTU from its PORT entry, and on clabernetes
    nothing else does: the links must say the same, or hosts and switch disagree silently."""
    if node.config is None:
        raise LabError(f"{topo.path}: topology.nodes.{node.name}: config not loaded")
    for index, link in enumerate(topo.links):
        for end in (link.a, link.b):
            if end.node != node.name:
                continue
            port = node.config.ports[topo.port(node.name, end.iface)]
            if port.mtu != mtus[end.iface]:
                raise LabError(
                    f"{topo.path}: topology.links[{index}].mtu: {link.mtu}, but "
                    f"{node.config_path}: PORT|{port.name}: mtu {port.mtu}: on clabernetes "
                    f"SONiC-VS takes {end}'s MTU from PORT alone (links lose mtu:); make "
                    "them agree")


def _relative_source(node: Node, topo: Topology) -> str:
    """A switch config's path as the topology file would name it (ConfigMaps serve it there);
    absolute when it lies outside the topology's folder."""
    if node.config_path is None:
        raise LabError(f"{topo.path}: topology.nodes.{node.name}: no config_db.json")
    relative = os.path.relpath(node.config_path, topo.path.parent)
    return str(node.config_path) if relative.startswith("..") else Path(relative).as_posix()


def clabernetes_manifests(topo: Topology, version: str,
                          connectivity: str = "vxlan") -> list[dict]:
    """One ConfigMap per file the topology binds, then the Topology that maps them in."""
    if connectivity not in CONNECTIVITY:
        raise LabError(f"unknown connectivity {connectivity!r} (clabernetes has: "
                       f"{', '.join(CONNECTIVITY)})")
    doc = portable_document(topo, read_document(topo), version)
    name = dns_label(topo.name)
    config_maps: dict[str, dict] = {}  # bind source -> its ConfigMap
    files: dict[str, list[dict]] = {}
    for node, spec in doc["topology"]["nodes"].items():
        for bind in spec.get("binds") or []:
            source = bind.split(":", 1)[0]
            if source not in config_maps:
                config_maps[source] = _config_map(name, source, topo)
            files.setdefault(node, []).append({
                "filePath": source,
                "configMapName": config_maps[source]["metadata"]["name"],
                "configMapPath": config_map_key(source),
                "mode": "read",
            })
    spec = {
        "definition": {"containerlab": dump_document(
            doc, f"{topo.path.name}, exported by rocelab {version} (invoke lab.export)")},
        "deployment": {"filesFromConfigMap": files},
    }
    if connectivity != "vxlan":  # the CRD's default; older releases lack the field
        spec["connectivity"] = connectivity
    resource = {"apiVersion": API_VERSION, "kind": "Topology", "metadata": {"name": name},
                "spec": spec}
    return [*config_maps.values(), resource]


def _config_map(lab: str, source: str, topo: Topology) -> dict:
    path = Path(source) if Path(source).is_absolute() else topo.path.parent / source
    where = f"{topo.path}: bind source {source}"
    if not path.is_file():
        raise LabError(f"{where}: not a file (clabernetes maps files from ConfigMaps)")
    if path.stat().st_size > CONFIGMAP_MAX_BYTES:
        raise LabError(f"{where}: larger than a ConfigMap holds ({CONFIGMAP_MAX_BYTES} bytes)")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise LabError(f"{where}: not UTF-8 text (ConfigMap data is text)") from None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": dns_label(f"{lab}-{source}")},
        "data": {config_map_key(source): text},
    }


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the topology, config files) as literal blocks, readable in review."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value,
                                   style="|" if "\n" in value else None)


_Dumper.add_representer(str, _string)


def dump(manifests: list[dict]) -> str:
    return yaml.dump_all(manifests, Dumper=_Dumper, sort_keys=False)


def export(spec: str, fmt: str = "clabernetes", out: Path | None = None,
           connectivity: str = "vxlan") -> Exported:
    """Validate the lab as lab.up would, then write its manifests to ``out/<lab>.yaml``."""
    if fmt not in FORMATS:
        raise LabError(f"unknown export format {fmt!r} (available: {', '.join(FORMATS)})")
    topo = topology.load(spec)
    manifests = clabernetes_manifests(topo, project_version(), connectivity)
    folder = out or DEFAULT_OUT / topo.name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{topo.name}.yaml"
    path.write_text(dump(manifests))
    return Exported(path=path, topology=manifests[-1]["metadata"]["name"],
                    config_maps=len(manifests) - 1,
                    largest_mtu=max((link.mtu for link in topo.links), default=0),
                    connectivity=connectivity)
