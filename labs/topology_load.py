"""Reading a clab file into the model (``topology_model``): every key checked against
containerlab's schema, rocelab's labels parsed, every file a node references loaded (switch
configs, NIC settings, lane maps); each error one line naming the file and the key."""
from __future__ import annotations

import os
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..fabric import tables
from ..fabric.config import DEFAULT_ECN_MARKING, ECN_MARKING_POINTS, ConfigError
from ..fabric.config_load import load as load_switch_config
from ..fabric.buffermgrd import PG_LOOKUP_TARGET
from ..fabric.portmap import LANEMAP_TARGET, PortMap, PortMapError, read_lanemap
from ..fabric.model.pause import MIN_REFRESHABLE_PAUSE_S, min_refreshable_scale
from ..fabric.userinput import brief
from ..fabric import yamlfile
from ..nic.settings import NIC_LABEL, NicError, NicSettings
from ..nic.settings import load as load_nic
from .topology_model import (
    ALLOW_OUTSIDE_LABEL, AUTO, DEFAULT_MTU, DEFAULT_TIME_SCALE, ECN_MARKING_LABEL, ENV_RE,
    Endpoint, HOST_KINDS, IFACE_RE, LINK_KEYS, Link, NAME_RE, NODE_KEYS, Node,
    RESERVED_IFACES, SONIC_CONFIG_BINDS, SONIC_STAGED_CONFIG, SWITCH_IFACE_RE, SWITCH_KINDS,
    TIME_SCALE_LABEL, TOPOLOGY_KEYS, TOP_KEYS, Topology, TopologyError, auto_floor,
)


def read_document(path: Path) -> Any:
    """The clab file's YAML, environment expanded as containerlab does; every task reads a
    topology through here, so a ``${VAR}`` means the same to all of them."""
    try:
        return yamlfile.parse(expand_env(yamlfile.read_text(path)), path)
    except yamlfile.YamlError as e:
        raise TopologyError(str(e)) from None


def expand_env(text: str) -> str:
    """containerlab's ``${VAR}`` and ``${VAR:=default}`` (the default when VAR is unset or
    empty, as in the shell)."""
    return ENV_RE.sub(lambda m: os.environ.get(m.group(1)) or m.group(2) or "", text)


def _key(key: Any) -> str:
    """A key from the file as error messages show it: as written when it is a short name,
    else a bounded repr (a key may be a megabyte, or hold a newline)."""
    if isinstance(key, str) and len(key) <= 64 and key.isprintable():
        return key
    return brief(key)


class Loader:
    """One clab file read into a ``Topology``; its methods check one part each."""

    def __init__(self, path: Path, configs: bool = True) -> None:
        self.path = path
        self.dir = path.parent
        self.configs = configs
        # NIC files read so far: a lab's hosts usually share one, and a 256-host lab spent
        # most of its load parsing the same file again (the settings are frozen: shareable)
        self.nics: dict[Path, NicSettings] = {}

    def error(self, where: str, problem: str) -> TopologyError:
        return TopologyError(f"{self.path}: {where}: {problem}")

    def mapping(self, value: Any, where: str, allowed: set[str] | None = None) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(where, f"expected a mapping, got {type(value).__name__}")
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    raise self.error(f"{where}.{_key(key)}", "unknown key (containerlab's schema "
                                     "allows no extra keys; put rocelab settings in labels)")
        return value

    def strings(self, value: Any, where: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(where, "expected a list of strings")
        return tuple(value)

    def string_map(self, value: Any, where: str) -> dict[str, str]:
        m = self.mapping(value, where)
        for k, v in m.items():
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                raise self.error(f"{where}.{_key(k)}", "expected a string or a number")
        return {str(k): str(v) for k, v in m.items()}

    def name(self, name: Any) -> str:
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise self.error("name", f"{brief(name)} is not a valid lab name "
                             "(letters, digits, - _ . ; at most 32; starts alphanumeric)")
        return name

    def topology(self, raw: Any) -> Topology:
        top = self.mapping(raw, "(top level)", TOP_KEYS)
        name = self.name(top.get("name"))
        body = self.mapping(top.get("topology"), "topology", TOPOLOGY_KEYS)
        raw_nodes = self.mapping(body.get("nodes"), "topology.nodes")
        if not raw_nodes:
            raise self.error("topology.nodes", "a topology needs at least one node")
        kinds = self.mapping(body.get("kinds"), "topology.kinds")
        groups = self.mapping(body.get("groups"), "topology.groups")
        defaults = self.mapping(body.get("defaults"), "topology.defaults", NODE_KEYS)
        for k, v in kinds.items():
            self.mapping(v, f"topology.kinds.{_key(k)}", NODE_KEYS)
        for g, v in groups.items():
            self.mapping(v, f"topology.groups.{_key(g)}", NODE_KEYS)
        nodes = {}
        for node_name, spec in raw_nodes.items():
            where = f"topology.nodes.{_key(node_name)}"
            if not isinstance(node_name, str) or not NAME_RE.match(node_name):
                raise self.error(where, "invalid node name (letters, digits, - _ . ; "
                                 "at most 32; starts alphanumeric)")
            spec = self.mapping(spec, where, NODE_KEYS)
            nodes[node_name] = self.node(node_name, spec, defaults, kinds, groups)
        links = self.links(body.get("links"), nodes)
        if self.configs:
            nodes = {n: self.with_config(node, links) for n, node in nodes.items()}
        return Topology(name=name, path=self.path.resolve(), nodes=nodes,
                        links=links).with_time_scale(None)

    def node(self, name: str, spec: dict, defaults: dict, kinds: dict, groups: dict) -> Node:
        """Merge node > group > kind > defaults, as containerlab does."""
        where = f"topology.nodes.{name}"
        group = spec.get("group")
        if group is not None and not isinstance(group, str):
            raise self.error(f"{where}.group", f"expected a group name, got {brief(group)}")
        group_spec = groups.get(group) or {}
        kind = spec.get("kind", group_spec.get("kind", defaults.get("kind")))
        if not isinstance(kind, str) or kind not in SWITCH_KINDS | HOST_KINDS:
            raise self.error(f"{where}.kind", f"unsupported kind {brief(kind)} (rocelab runs "
                             f"{', '.join(sorted(SWITCH_KINDS | HOST_KINDS))})")
        layers = [spec, group_spec, kinds.get(kind) or {}, defaults]

        def first(key: str) -> Any:
            return next((layer[key] for layer in layers if key in layer), None)

        def merged(key: str) -> dict[str, str]:
            out: dict[str, str] = {}
            for layer in reversed(layers):
                out.update(self.string_map(layer.get(key), f"{where}.{key}"))
            return out

        image = first("image") or ""
        if not isinstance(image, str):
            raise self.error(f"{where}.image", "expected a string")
        labels = merged("labels")
        outside = labels.get(ALLOW_OUTSIDE_LABEL, "false")
        if outside not in ("true", "false"):
            raise self.error(f"{where}.labels.{ALLOW_OUTSIDE_LABEL}",
                             f'must be "true" or "false" (got {brief(outside)})')
        allow_outside = outside == "true"
        binds = self.strings(first("binds"), f"{where}.binds")
        for i, bind in enumerate(binds):
            source = bind.split(":", 1)[0]
            self.inside(source, f"{where}.binds[{i}]", allow_outside)
            if not (self.dir / source).exists():
                raise self.error(f"{where}.binds[{i}]", f"{source}: no such file or folder "
                                 f"(relative paths resolve against {self.dir})")
        nic_path, nic = self.nic(kind, labels, f"{where}.labels", allow_outside)
        lanemap_path = self.bound(binds, LANEMAP_TARGET) if kind in SWITCH_KINDS else None
        try:
            lanemap = read_lanemap(lanemap_path) if lanemap_path is not None else None
        except PortMapError as e:
            raise self.error(f"{where}.binds", str(e)) from None
        declared = self.time_scale(labels, f"{where}.labels")
        return Node(name=name, kind=kind, image=image,
                    exec=self.commands(first("exec"), f"{where}.exec"), binds=binds,
                    labels=labels, env=merged("env"),
                    time_scale=declared or DEFAULT_TIME_SCALE, time_scale_auto=declared is None,
                    ecn_marking=self.ecn_marking(labels, f"{where}.labels"),
                    config_path=self.config_path(where, kind, binds, first("startup-config"),
                                                 allow_outside),
                    lanemap_path=lanemap_path, lanemap=lanemap,
                    pg_lookup_path=self.bound(binds, PG_LOOKUP_TARGET) if kind in SWITCH_KINDS
                    else None, nic_path=nic_path, nic=nic)

    def bound(self, binds: tuple[str, ...], target: str) -> Path | None:
        """The file a bind places at ``target`` in the node, if one does."""
        for bind in binds:
            parts = bind.split(":")
            if len(parts) >= 2 and parts[1] == target:
                return (self.dir / parts[0]).resolve()
        return None

    def commands(self, value: Any, where: str) -> tuple[str, ...]:
        """exec lines, each split now as deploy will split it, so a stray quote stops
        lab.up before anything exists rather than halfway through a deploy."""
        lines = self.strings(value, where)
        for i, line in enumerate(lines):
            try:
                argv = shlex.split(line)
            except ValueError as e:
                raise self.error(f"{where}[{i}]", f"{brief(line)}: {e} (quote as in a POSIX "
                                 "shell)") from None
            if not argv:
                raise self.error(f"{where}[{i}]", "empty command")
        return lines

    def inside(self, name: str, where: str, allow_outside: bool) -> None:
        """Refuse a path that leaves the topology's folder (absolute, ``..``, or through a
        symlink) unless the node's label allows it: labs are often shared, and run as root."""
        if allow_outside:
            return
        target = (self.dir / name).resolve()
        if not target.is_relative_to(self.dir.resolve()):
            raise self.error(where, f"{brief(name)} is outside the topology's folder "
                             f"{self.dir} (label {ALLOW_OUTSIDE_LABEL}: \"true\" allows it)")

    def config_path(self, where: str, kind: str, binds: tuple[str, ...],
                    startup: Any, allow_outside: bool) -> Path | None:
        """A switch's config_db.json: bound to where SONiC reads it, else its startup-config."""
        if kind not in SWITCH_KINDS:
            return None
        for bind in binds:
            parts = bind.split(":")
            if len(parts) >= 2 and parts[1] in SONIC_CONFIG_BINDS:
                return (self.dir / parts[0]).resolve()
        if isinstance(startup, str):
            self.inside(startup, f"{where}.startup-config", allow_outside)
            path = self.dir / startup
            if not path.is_file():
                raise self.error(f"{where}.startup-config", f"{startup}: no such file")
            return path.resolve()
        raise self.error(where, f"a {kind} switch needs its config_db.json: bind it to "
                         f"{SONIC_STAGED_CONFIG} (binds) or name it in startup-config")

    def nic(self, kind: str, labels: dict[str, str], where: str,
            allow_outside: bool) -> tuple[Path | None, NicSettings | None]:
        """A host's NIC settings file (label ``rocelab.nic``), loaded now so that a bad file
        stops ``lab.up`` before anything exists. Switches ignore the label, so a lab-wide one
        in ``topology.defaults.labels`` is fine."""
        name = labels.get(NIC_LABEL)
        if kind not in HOST_KINDS or name is None:
            return None, None
        self.inside(name, f"{where}.{NIC_LABEL}", allow_outside)
        path = self.dir / name
        if not path.is_file():
            raise self.error(f"{where}.{NIC_LABEL}", f"{name}: no such file (relative paths "
                             f"resolve against {self.dir})")
        path = path.resolve()
        if path not in self.nics:
            try:
                self.nics[path] = load_nic(path)
            except NicError as e:
                raise TopologyError(str(e)) from None
        return path, self.nics[path]

    def time_scale(self, labels: dict[str, str], where: str) -> float | None:
        """The S a node declares; None: none (``auto``, or no label), chosen at lab.up."""
        text = labels.get(TIME_SCALE_LABEL)
        if text is None or text == AUTO:
            return None
        try:
            value = float(text)
        except ValueError:
            value = 0.0
        if not 0 < value < float("inf"):
            raise self.error(f"{where}.{TIME_SCALE_LABEL}",
                             f"{brief(text)} is not a positive number (ports run at speed / S) "
                             f"nor {AUTO}")
        return value

    def ecn_marking(self, labels: dict[str, str], where: str) -> str:
        text = labels.get(ECN_MARKING_LABEL, DEFAULT_ECN_MARKING)
        if text not in ECN_MARKING_POINTS:
            raise self.error(f"{where}.{ECN_MARKING_LABEL}", f"{brief(text)} is not one of "
                             f"{', '.join(ECN_MARKING_POINTS)} (where WRED marks CE)")
        return text

    def links(self, raw: Any, nodes: dict[str, Node]) -> tuple[Link, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            raise self.error("topology.links", "expected a list")
        used: dict[Endpoint, int] = {}
        links = []
        for i, spec in enumerate(raw):
            where = f"topology.links[{i}]"
            spec = self.mapping(spec, where, LINK_KEYS)
            if spec.get("type", "veth") != "veth":
                raise self.error(f"{where}.type", f"unsupported link type {brief(spec['type'])} "
                                 "(rocelab wires veth links)")
            eps = self.strings(spec.get("endpoints"), f"{where}.endpoints")
            if len(eps) != 2:
                raise self.error(f"{where}.endpoints", "a link has exactly two endpoints")
            ends = [self.endpoint(ep, f"{where}.endpoints[{j}]", nodes)
                    for j, ep in enumerate(eps)]
            for j, ep in enumerate(ends):
                if ep in used:
                    raise self.error(f"{where}.endpoints[{j}]",
                                     f"{ep} is already used by topology.links[{used[ep]}]")
                used[ep] = i
            mtu = spec.get("mtu", DEFAULT_MTU)
            if not isinstance(mtu, int) or isinstance(mtu, bool) or not 68 <= mtu <= 65535:
                raise self.error(f"{where}.mtu", f"{brief(mtu)} is not an MTU (68..65535)")
            links.append(Link(ends[0], ends[1], mtu))
        return tuple(links)

    def endpoint(self, text: str, where: str, nodes: dict[str, Node]) -> Endpoint:
        node, sep, iface = text.partition(":")
        if not sep:
            raise self.error(where, f"{brief(text)} is not of the form node:interface")
        if node not in nodes:
            raise self.error(where, f"unknown node {brief(node)}")
        if not IFACE_RE.match(iface):
            raise self.error(where, f"{brief(iface)} is not a valid interface name (1-15 of "
                             "letters, digits, - _ .)")
        if iface in RESERVED_IFACES:
            raise self.error(where, f"{iface!r} is not a name a wire can take (reserved: "
                             f"{', '.join(sorted(RESERVED_IFACES))})")
        if iface == "eth0":
            raise self.error(where, "eth0 is the management interface in containerlab; "
                             "wire eth1 and up")
        if nodes[node].is_switch and not SWITCH_IFACE_RE.match(iface):
            raise self.error(where, f"{brief(iface)}: switch ports are named eth1, eth2, ...")
        return Endpoint(node, iface)

    def with_config(self, node: Node, links: tuple[Link, ...]) -> Node:
        """Parse a switch's config_db.json and check that every wired port exists in it."""
        if node.config_path is None:
            return node
        try:
            unemulated = tables.policy(node.labels.get(tables.UNEMULATED_LABEL))
        except ValueError as e:
            raise self.error(f"topology.nodes.{node.name}.labels.{tables.UNEMULATED_LABEL}",
                             str(e)) from None
        try:
            config = load_switch_config(node.config_path, unemulated, node.pg_lookup_path)
        except ConfigError as e:
            raise TopologyError(str(e)) from None
        ifaces = [ep.iface for link in links for ep in (link.a, link.b) if ep.node == node.name]
        try:
            ports = PortMap.build(config, ifaces, node.lanemap, node.lanemap_path, node.name)
        except PortMapError as e:
            raise self.error(f"topology.nodes.{node.name}", str(e)) from None
        wired = [config.ports[port] for port in ports.ports.values()]
        fastest = max(wired, key=lambda p: p.speed_mbps, default=None)
        if fastest is not None and node.time_scale_auto:
            return replace(node, config=config, ports=ports,
                           time_scale=auto_floor(fastest.speed_mbps))
        if fastest is not None and node.time_scale < min_refreshable_scale(fastest.speed_mbps):
            needed = min_refreshable_scale(fastest.speed_mbps)
            raise self.error(
                f"topology.nodes.{node.name}.labels.{TIME_SCALE_LABEL}",
                f"S = {node.time_scale:g} makes a PFC pause on {fastest.name} "
                f"({fastest.speed_mbps} Mb/s) shorter than {MIN_REFRESHABLE_PAUSE_S * 1e3:g} ms "
                f"of wall time, too short for the agent to refresh: use S >= {needed:.3g}")
        return replace(node, config=config, ports=ports)
