"""Validation against the vendored upstream schemas (tests/data/schemas/README.md): containerlab's
topology schema and clabernetes' Topology CRD. Each function returns the problems as
``path: message`` lines, empty when the document is valid, so a failing test says where."""
from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import regex
import yaml
from jsonschema import ValidationError, validators

SCHEMAS = Path(__file__).resolve().parent / "data" / "schemas"
CLAB_SCHEMA = SCHEMAS / "clab.schema.json"
TOPOLOGY_CRD = SCHEMAS / "clabernetes.containerlab.dev_topologies.yaml"


def _go_pattern(validator, pattern: str, instance: Any, schema: dict):
    """``pattern`` with Go's syntax (``\\p{L}``...), which the schema is written in."""
    if validator.is_type(instance, "string") and not regex.search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def clab_schema() -> dict:
    return json.loads(CLAB_SCHEMA.read_text())


@cache
def _clab_validator():
    schema = clab_schema()
    base = validators.validator_for(schema)
    return validators.extend(base, {"pattern": _go_pattern})(schema)


@cache
def topology_schema() -> dict:
    """The Topology CRD's (only) version's openAPIV3Schema, made strict: an object that lists
    its properties accepts no others unless it says so (kubectl's strict field validation)."""
    crd = yaml.safe_load(TOPOLOGY_CRD.read_text())
    (version,) = crd["spec"]["versions"]
    schema = copy.deepcopy(version["schema"]["openAPIV3Schema"])
    _strict(schema)
    return schema


def _strict(node: Any) -> None:
    if isinstance(node, dict):
        if ("properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        for value in node.values():
            _strict(value)
    elif isinstance(node, list):
        for value in node:
            _strict(value)


def _defaulted(schema: dict, instance: Any) -> Any:
    """The API server's defaulting: a missing property with a ``default`` gets it, in every
    object present."""
    if not isinstance(instance, dict) or not isinstance(schema, dict):
        if isinstance(instance, list) and isinstance(schema.get("items"), dict):
            return [_defaulted(schema["items"], item) for item in instance]
        return instance
    out = dict(instance)
    for name, sub in (schema.get("properties") or {}).items():
        if name not in out and "default" in sub:
            out[name] = copy.deepcopy(sub["default"])
        if name in out:
            out[name] = _defaulted(sub, out[name])
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for name in out:
            if name not in (schema.get("properties") or {}):
                out[name] = _defaulted(extra, out[name])
    return out


def _cause(error: ValidationError) -> ValidationError:
    """The error that says why: inside a oneOf/anyOf, the branch with the fewest errors (the
    one the document nearly fits; one for another type of value altogether counts as
    furthest off), recursively."""
    if not error.context:
        return error
    branches: dict[Any, list[ValidationError]] = {}
    for sub in error.context:
        branches.setdefault(sub.schema_path[0], []).append(sub)

    def distance(subs: list[ValidationError]) -> tuple[bool, int]:
        other_type = any(s.validator == "type" and s.absolute_path == error.absolute_path
                         for s in subs)
        return other_type, len(subs)

    return _cause(min(branches.values(), key=distance)[0])


def _lines(errors) -> list[str]:
    """One line per top-level error, naming its cause."""
    out = []
    for error in errors:
        cause = _cause(error)
        path = ".".join(str(p) for p in cause.absolute_path) or "(top level)"
        out.append(f"{path}: {cause.message[:300]}")
    return out


def clab_problems(doc: Any) -> list[str]:
    """containerlab's schema problems with a topology document (a parsed clab file)."""
    return _lines(_clab_validator().iter_errors(doc))


def clab_file_problems(path: Path) -> list[str]:
    return clab_problems(yaml.safe_load(path.read_text()))


def topology_cr_problems(resource: dict) -> list[str]:
    """clabernetes' CRD problems with a Topology resource, and containerlab's with the topology
    it carries."""
    schema = topology_schema()
    validator = validators.validator_for(schema, default=validators.Draft7Validator)(schema)
    problems = _lines(validator.iter_errors(_defaulted(schema, resource)))
    definition = ((resource.get("spec") or {}).get("definition") or {}).get("containerlab")
    if isinstance(definition, str):
        problems += [f"spec.definition.containerlab: {p}"
                     for p in clab_problems(yaml.safe_load(definition))]
    return problems
