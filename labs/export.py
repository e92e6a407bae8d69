"""Export a lab for clabernetes (c9s): the same topology on Kubernetes, when one machine is not
enough.

clabernetes runs a containerlab file from a ``Topology`` custom resource
(``clabernetes.containerlab.dev/v1alpha1``): ``spec.definition.containerlab`` holds the file
text, each node becomes a pod running a one-node containerlab, and links become VXLAN tunnels
between pods. Files the topology binds are not on the cluster, so each one travels in a
ConfigMap and ``spec.deployment.filesFromConfigMap`` maps it into the node's launcher pod at
the path the file names (``filePath``, relative to the topology), from the ConfigMap key
``configMapPath``.

The file exported is ``containerlab.portable_document``: the same switch choice as
``--runtime containerlab`` (SONiC-VS, or the project's switch image where labelled), with the
commands that runtime would run handed to containerlab's ``exec`` instead.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from labs import topology
from labs.runtimes.containerlab import (dump_document, portable_document, project_version,
                                        read_document)
from labs.runtimes.netns import LabError
from labs.topology import Topology

API_VERSION = "clabernetes.containerlab.dev/v1alpha1"
FORMATS = ("clabernetes",)
DEFAULT_OUT = Path("build") / "clabernetes"
CONFIGMAP_MAX_BYTES = 1_000_000  # etcd keeps objects under ~1 MiB, metadata included
DNS_LABEL_MAX = 63
VXLAN_OVERHEAD = 50  # outer Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8


@dataclass(frozen=True)
class Exported:
    path: Path  # the manifests file, for kubectl apply -f
    topology: str  # the Topology resource's name
    config_maps: int
    largest_mtu: int  # the cluster network must carry this plus VXLAN_OVERHEAD


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


def clabernetes_manifests(topo: Topology, version: str) -> list[dict]:
    """One ConfigMap per file the topology binds, then the Topology that maps them in."""
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
    resource = {
        "apiVersion": API_VERSION,
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {
            "definition": {"containerlab": dump_document(
                doc, f"{topo.path.name}, exported by rocelab {version} (invoke lab.export)")},
            "deployment": {"filesFromConfigMap": files},
        },
    }
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


def export(spec: str, fmt: str = "clabernetes", out: Path | None = None) -> Exported:
    """Validate the lab as lab.up would, then write its manifests to ``out/<lab>.yaml``."""
    if fmt not in FORMATS:
        raise LabError(f"unknown export format {fmt!r} (available: {', '.join(FORMATS)})")
    topo = topology.load(spec)
    manifests = clabernetes_manifests(topo, project_version())
    folder = out or DEFAULT_OUT / topo.name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{topo.name}.yaml"
    path.write_text(dump(manifests))
    return Exported(path=path, topology=manifests[-1]["metadata"]["name"],
                    config_maps=len(manifests) - 1,
                    largest_mtu=max((link.mtu for link in topo.links), default=0))
