"""Static lint of a lab's switch configs: does the lossless RoCE path hold together?

No root and no running lab: it reads the topology and every switch's config_db.json and
reports findings (severity, file, ``TABLE|key|field``, why it matters, the fix). Each rule is
a small function with a stable id taking a ``Lab`` and yielding ``Finding``s: those along
each port's lossless chain in ``lint_chain``, those on the lab as a whole in ``lint_whole``,
what they work on in ``lint_model``; this module runs them. The host rule
reads each host's NIC settings file (nic.settings) against the switch port it is wired to, and
its findings name the NIC file and field (``roce.dscp``). What the lab means to carry (RoCE
DSCP and priority, CNP DSCP, lossless priorities) comes from its own files
(``checks.classes``); a lab with two lossless priorities has its chain checked on both.
See docs/lint.md.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from ..fabric import tables
from ..fabric.config import ConfigError, SwitchConfig
from ..fabric.config_load import load as load_config
from .classes import expectations
from ..labs.topology import Node, Topology
from ..labs.topology import load as load_topology
from .lint_model import SEVERITIES, Finding, Lab, Rule, Settings
from .lint_chain import (cnp_queue, ecn_below_xoff, ecn_probability, headroom, lossless_chain,
                         pfcwd_coverage)
from .lint_whole import (consistency, dcqcn_byte_counter, derived_pgs, host_dscp,
                         not_emulated, references, wiring)

RULES: dict[str, Rule] = {
    "references": references,
    "wiring": wiring,
    "lossless-chain": lossless_chain,
    "headroom": headroom,
    "ecn-below-xoff": ecn_below_xoff,
    "ecn-probability": ecn_probability,
    "dcqcn-byte-counter": dcqcn_byte_counter,
    "cnp-queue": cnp_queue,
    "pfcwd-coverage": pfcwd_coverage,
    "consistency": consistency,
    "host-dscp": host_dscp,
    "not-emulated": not_emulated,
    "derived-pgs": derived_pgs,
}


def load_lab(spec: str | Path, priority: int | None = None, dscp: int | None = None,
             cnp_dscp: int | None = None) -> Lab:
    """The topology and every switch config; a config that fails to load is kept as its
    error. What the lab carries comes from its own files (``checks.classes``); ``priority``,
    ``dscp`` and ``cnp_dscp`` override it."""
    topology = load_topology(spec, configs=False)
    configs: dict[str, SwitchConfig | None] = {}
    errors: dict[str, ConfigError] = {}
    for node in topology.switches:
        try:
            configs[node.name] = load_config(node.config_path, _unemulated(topology, node),
                                             node.pg_lookup_path)
        except ConfigError as e:
            configs[node.name] = None
            errors[node.name] = e
    return Lab(topology, settings_of(topology, configs, priority, dscp, cnp_dscp),
               configs, errors)


def settings_of(topology: Topology, configs: Mapping[str, SwitchConfig | None],
                priority: int | None = None, dscp: int | None = None,
                cnp_dscp: int | None = None) -> Settings:
    """Lint settings from the lab's expectations (``checks.classes.expectations``)."""
    e = expectations(topology, configs, dscp, priority, cnp_dscp)
    return Settings(e.roce.priority, e.roce.dscp, e.cnp_dscp, more=e.classes[1:],
                    source=e.source)


def _unemulated(topology: Topology, node: Node) -> tables.UnemulatedPolicy:
    """The node's rocelab.unemulated-tables label; a bad value is a finding like a bad config."""
    try:
        return tables.policy(node.labels.get(tables.UNEMULATED_LABEL))
    except ValueError as e:
        raise ConfigError(f"{topology.path}: topology.nodes.{node.name}.labels."
                          f"{tables.UNEMULATED_LABEL}: {e}") from None


def lint(lab: Lab) -> list[Finding]:
    """Every rule's findings, each reported once, errors first."""
    unique = {}
    for rule in RULES.values():
        for f in rule(lab):
            unique.setdefault((f.rule, f.file, f.where, f.severity), f)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(unique.values(), key=lambda f: (order[f.severity], f.file, f.rule, f.where))


def counts(findings: list[Finding]) -> dict[str, int]:
    return {s: sum(f.severity == s for f in findings) for s in SEVERITIES}


def as_json(lab: Lab, findings: list[Finding]) -> str:
    return json.dumps({"lab": lab.topology.name, "topology": str(lab.topology.path),
                       "settings": {"priority": lab.settings.priority,
                                    "dscp": lab.settings.dscp,
                                    "cnp_dscp": lab.settings.cnp_dscp,
                                    "lossless_priorities": sorted(lab.settings.lossless),
                                    "classes": [asdict(c) for c in lab.settings.classes],
                                    "source": lab.settings.source},
                       "counts": counts(findings),
                       "findings": [asdict(f) for f in findings]}, indent=2)
