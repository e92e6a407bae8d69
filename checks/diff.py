"""``rocelab diff BASE HEAD``: what a config change did, not only whether it passes.

BASE and HEAD are two lab folders (or clab files, or lab names), or, with ``lab``, two git
revisions of one lab folder (``origin/main HEAD``; an existing path on either side is that
folder as it is on disk, e.g. the working tree). A revision's lab folder is extracted with
``git archive`` into a temporary folder, never a checkout of the user's tree.

The result (``compare``) is plain data, rendered by ``checks.diff_render`` as text, Markdown
or JSON:

- the effective lossless chain (``checks.chain``) of every switch port before and after, for
  the RoCE classes of either side, only the facts that changed;
- lint findings added and removed;
- given two check results folders, the metrics that moved (outcome, drops, pause time,
  marks, CNPs, completion times, fidelity).

Two labs whose nodes or links differ are refused: a chain compared port by port means
nothing across two fabrics. Every refusal is one line (``DiffError``).
"""
from __future__ import annotations

import io
import json
import statistics
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from . import lint as lints
from .chain import chain
from .classes import RoceClass, expectations
from ..labs.topology import Topology, TopologyError
from ..labs.topology import resolve as resolve_lab

SCENARIO_KEYS = ("complete", "elapsed_s", "delivered_bytes", "retransmitted", "naks",
                 "timeouts", "cnps", "ecn_marks", "pfc_sent", "pfc_frames_captured")


class DiffError(ValueError):
    """Bad input to diff, said in one line (exit 2)."""


@dataclass(frozen=True)
class Side:
    """One side of the diff: what the user named it, and its lab as lint loads it."""

    label: str
    lab: lints.Lab


# --------------------------------------------------------------------------- inputs


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    except FileNotFoundError:
        raise DiffError("git is not installed: give two lab folders instead") from None


def _repo_of(lab: Path) -> tuple[Path, Path]:
    """(repository root, the lab folder relative to it) for a lab folder in a git tree."""
    folder = lab if lab.is_dir() else lab.parent
    done = _git(folder, "rev-parse", "--show-toplevel")
    if done.returncode:
        raise DiffError(f"--lab {lab}: not inside a git repository")
    root = Path(done.stdout.decode().strip()).resolve()
    return root, folder.resolve().relative_to(root)


def _extract(repo: Path, rel: Path, rev: str, into: Path) -> Path:
    """The lab folder ``rel`` as it is at ``rev``, written under ``into``."""
    if _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").returncode:
        raise DiffError(f"{rev}: no such git revision in {repo}")
    done = _git(repo, "archive", "--format=tar", rev, "--", rel.as_posix() or ".")
    if done.returncode:
        raise DiffError(f"{rel}: not in revision {rev} of {repo}")
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
        for member in tar.getmembers():
            target = (into / member.name).resolve()
            if not target.is_relative_to(into.resolve()) or not (member.isfile()
                                                                 or member.isdir()):
                continue  # links and odd entries: a lab folder has none worth following
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())
    return into / rel


@contextmanager
def sides(base: str, head: str, lab: str | None = None) -> Iterator[tuple[Side, Side]]:
    """Both sides loaded; revisions live in a temporary folder for the block's duration."""
    with tempfile.TemporaryDirectory(prefix="rocelab-diff-") as tmp:
        repo = rel = None
        if lab:
            try:
                lab_path = resolve_lab(lab)
            except TopologyError as e:
                raise DiffError(f"--lab {e}") from None
            repo, rel = _repo_of(lab_path.parent)
        loaded = []
        for i, spec in enumerate((base, head)):
            if repo is not None and not Path(spec).exists():
                spec = str(_extract(repo, rel, spec, Path(tmp) / f"side{i}"))
                label = [base, head][i]
            else:
                label = spec
            try:
                loaded.append(Side(label, lints.load_lab(spec)))
            except TopologyError as e:
                raise DiffError(str(e)) from None
        problem = different_fabrics(loaded[0].lab.topology, loaded[1].lab.topology)
        if problem:
            raise DiffError(f"{base} and {head} are different topologies ({problem}): "
                            "diff compares one fabric's configs")
        yield loaded[0], loaded[1]


def different_fabrics(a: Topology, b: Topology) -> str | None:
    """Why two labs are not the same fabric (nodes, kinds or links differ), or None."""
    nodes_a = {n.name: n.kind for n in a.nodes.values()}
    nodes_b = {n.name: n.kind for n in b.nodes.values()}
    if nodes_a != nodes_b:
        only = sorted(set(nodes_a) ^ set(nodes_b)) or sorted(
            n for n in nodes_a if nodes_a[n] != nodes_b[n])
        return f"nodes differ: {', '.join(only[:5])}" + (" ..." if len(only) > 5 else "")
    links_a = {frozenset(((k.a.node, k.a.iface), (k.b.node, k.b.iface))) for k in a.links}
    links_b = {frozenset(((k.a.node, k.a.iface), (k.b.node, k.b.iface))) for k in b.links}
    if links_a != links_b:
        return f"{len(links_a ^ links_b)} links differ"
    return None


# --------------------------------------------------------------------------- comparing


def _classes(side: Side) -> tuple[RoceClass, ...]:
    lab = side.lab
    return expectations(lab.topology, lab.configs).classes


def chain_changes(base: Side, head: Side) -> list[dict]:
    """Every chain fact that differs, for the RoCE classes of either side."""
    classes = tuple(dict.fromkeys(_classes(base) + _classes(head)))
    before = chain(base.lab.configs, classes, {k: str(v) for k, v in base.lab.load_errors.items()})
    after = chain(head.lab.configs, classes, {k: str(v) for k, v in head.lab.load_errors.items()})
    out = []
    for switch in sorted(set(before) | set(after)):
        b, a = before.get(switch, {}), after.get(switch, {})
        for where in sorted(set(b) | set(a), key=_port_order):
            fb, fa = b.get(where, {}), a.get(where, {})
            for fact in dict.fromkeys([*fb, *fa]):
                if fb.get(fact) != fa.get(fact):
                    out.append({"switch": switch, "where": where, "fact": fact,
                                "before": fb.get(fact, "-"), "after": fa.get(fact, "-")})
    return out


def _port_order(where: str) -> tuple:
    port, _, label = where.partition(" ")
    digits = "".join(ch for ch in port if ch.isdigit())
    return (port.rstrip("0123456789"), int(digits) if digits else -1, label)


def lint_changes(base: Side, head: Side) -> dict[str, list[dict]]:
    """Lint findings added and removed, matched on rule, file (within the lab) and place."""
    def keyed(side: Side) -> dict[tuple, dict]:
        root = side.lab.topology.path.parent
        out = {}
        for f in lints.lint(side.lab):
            d = asdict(f)
            path = Path(f.file)
            d["file"] = str(path.relative_to(root)) if path.is_relative_to(root) else f.file
            out[(d["rule"], d["file"], d["where"], d["severity"])] = d
        return out
    b, a = keyed(base), keyed(head)
    return {"added": [a[k] for k in a if k not in b], "removed": [b[k] for k in b if k not in a]}


def metrics(folder: str | Path) -> dict[str, dict[str, object]]:
    """What a check results folder measured, per check and per congestion scenario."""
    folder = Path(folder)
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        raise DiffError(f"{folder}: not a check results folder (no readable summary.json)") \
            from None
    out: dict[str, dict[str, object]] = {}
    for c in summary.get("checks") or []:
        fidelity = c.get("fidelity")
        out[f"check {c.get('name')}"] = {
            "outcome": c.get("outcome"), "duration_s": c.get("duration"),
            "fidelity": None if fidelity is None else "ok" if fidelity.get("ok") else "lost"}
    for path in sorted(folder.glob("congestion/*/summary.json")):
        out[f"scenario {path.parent.name}"] = _scenario(path.parent)
    return out


def _scenario(folder: Path) -> dict[str, object]:
    s = json.loads((folder / "summary.json").read_text())
    m: dict[str, object] = {k: s.get(k) for k in SCENARIO_KEYS if k in s}
    drops = s.get("drops") or {}
    m["drops"] = sum(drops.values())
    m.update({f"drops {reason}": n for reason, n in sorted(drops.items())})
    m["fidelity"] = "ok" if (s.get("fidelity") or {}).get("ok", True) else "lost"
    try:
        flows = json.loads((folder / "flows.json").read_text())
        counters = json.loads((folder / "counters.json").read_text())
    except (OSError, ValueError):
        return m
    times = [f["elapsed_s"] for f in flows.get("flows", []) if "elapsed_s" in f]
    if times:
        m["completion p50 s"] = round(statistics.median(times), 6)
        m["completion max s"] = round(max(times), 6)
    m["paused s"] = round(_paused(counters) + sum(
        h.get("paused_s", 0) for h in (flows.get("hosts") or {}).values()), 6)
    return m


def _paused(counters: dict) -> float:
    """Seconds switch ports spent paused during the scenario, over every priority."""
    def total(side: dict) -> float:
        return sum(sum(port.get("paused_s") or []) for node in side.values()
                   for port in (node.get("ports") or {}).values())
    return total(counters.get("after", {})) - total(counters.get("before", {}))


def metric_changes(base: str | Path, head: str | Path) -> list[dict]:
    """The metrics that moved between two results folders."""
    b, a = metrics(base), metrics(head)
    out = []
    for subject in dict.fromkeys([*b, *a]):
        mb, ma = b.get(subject, {}), a.get(subject, {})
        for key in dict.fromkeys([*mb, *ma]):
            if key == "duration_s":
                continue  # wall time moves on every run: noise, not a result
            if mb.get(key) != ma.get(key):
                out.append({"subject": subject, "metric": key, "before": mb.get(key),
                            "after": ma.get(key)})
    return out


def compare(base: Side, head: Side, base_results: str | Path | None = None,
            head_results: str | Path | None = None) -> dict:
    """The whole diff as JSON-able data."""
    results = None
    if base_results and head_results:
        results = {"base": str(base_results), "head": str(head_results),
                   "moved": metric_changes(base_results, head_results)}
    elif base_results or head_results:
        raise DiffError("give both --base-results and --head-results, or neither")
    return {"lab": head.lab.topology.name,
            "base": {"label": base.label, "topology": str(base.lab.topology.path),
                     "classes": [c.label for c in _classes(base)]},
            "head": {"label": head.label, "topology": str(head.lab.topology.path),
                     "classes": [c.label for c in _classes(head)]},
            "chain": chain_changes(base, head), "lint": lint_changes(base, head),
            "results": results}
