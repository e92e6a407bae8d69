"""Running ``tune``'s tasks: on a local process pool (``concurrent.futures``, every core by
default) or on a Dask cluster (``dask.distributed``, given its address), resumable.

Each result is stored as ``runs/<key>.json`` in the results folder, the key a hash of the
lab's files (the clab file and every file it references), the code (``code_digest``: the
package's source, what simulates and measures a run), the point, the scenario and the
seed: a rerun skips what is stored, and a changed lab, point or code never reuses a stale
result. Why Dask and not Ray: docs/tune.md.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from functools import cache
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, \
    TimeElapsedColumn

from .tune_apply import lab_files
from .tune_run import Task, measure
from ..labs import topology

KEY_VERSION = 1  # bump when a measure changes meaning: stored results then run again

PACKAGE = Path(__file__).resolve().parent.parent  # the rocelab package (the repository root)
NOT_RUN = {"tests", "bench", "cli", "tasks.py"}  # top-level parts of it no run executes


@cache
def code_digest() -> str:
    """A hash of the code that decides a run's figures: every ``.py`` file of the package
    (names relative to it, with ``/``, sorted, and contents), walking its subpackages (folders
    with an ``__init__.py``, so not ``.venv``, ``results`` or ``__pycache__``) except
    ``NOT_RUN``: the tests, the benchmarks and the CLI, which a run never imports. That is
    the model, the simulator, the NIC, the traffic and the checks, a superset of what
    ``tune_run.measure`` loads (changing an unused check costs a re-measure, never a stale
    figure). Independent of where the package is (checkout or installed), of ``.pyc`` files
    and of git; computed once per process."""
    files = []
    for folder, dirs, names in os.walk(PACKAGE):
        here = Path(folder)
        if here == PACKAGE:
            dirs[:] = [d for d in dirs if d not in NOT_RUN]
            names = [n for n in names if n not in NOT_RUN]
        dirs[:] = [d for d in dirs if (here / d / "__init__.py").is_file()]
        files += [here / n for n in names if n.endswith(".py")]
    h = hashlib.sha256()
    for rel, path in sorted((p.relative_to(PACKAGE).as_posix(), p) for p in files):
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def lab_digest(clab: str | Path) -> str:
    """A hash of the lab's files (``tune_apply.lab_files``: names relative to its folder,
    and contents), what a task's copy of the lab is made of."""
    topo = topology.load(str(clab))
    folder = topo.path.resolve().parent
    h = hashlib.sha256()
    for path in lab_files(topo):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def key(task: Task, digest: str) -> str:
    """The stored result's key: the lab's files, the code (``code_digest``), the point, the
    scenario, the seed (and the fraction of the scenario run, when not all of it)."""
    what = {"v": KEY_VERSION, "lab": digest, "code": code_digest(), "point": task.point,
            "scenario": task.scenario, "seed": task.seed}
    if task.fraction != 1:  # a quick look is another measurement (whole ones keep their key)
        what["fraction"] = task.fraction
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:20]


class Store:
    """Results on disk, one JSON file per key, written whole (a killed run leaves none
    half-written)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder / "runs"
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, k: str) -> Path:
        return self.folder / f"{k}.json"

    def get(self, k: str) -> dict | None:
        path = self.path(k)
        return json.loads(path.read_text())["figures"] if path.is_file() else None

    def put(self, k: str, task: Task, figures: dict) -> None:
        tmp = self.path(k).with_suffix(".tmp")
        tmp.write_text(json.dumps({"task": asdict(task), "figures": figures}, indent=1) + "\n")
        tmp.replace(self.path(k))


def _pool(tasks: list[Task], workers: int | None) -> Iterable[tuple[Task, dict]]:
    with ProcessPoolExecutor(max_workers=workers or os.cpu_count()) as pool:
        futures = {pool.submit(measure, t): t for t in tasks}
        for done in as_completed(futures):
            yield futures[done], done.result()


def _dask(tasks: list[Task], cluster: str | object) -> Iterable[tuple[Task, dict]]:
    """On a Dask cluster: ``cluster`` is a scheduler address or a cluster object (a
    ``LocalCluster`` in tests). ``distributed`` is an optional extra, imported here only."""
    try:
        from distributed import Client, as_completed as dask_completed
    except ImportError:
        raise RuntimeError("--cluster needs dask.distributed: pip install "
                           "'rocelab[cluster]'") from None
    with Client(cluster) as client:
        futures = client.map(measure, tasks, pure=False)
        which = dict(zip((f.key for f in futures), tasks))
        for done in dask_completed(futures):
            yield which[done.key], done.result()


def run(tasks: list[Task], folder: Path, *, workers: int | None = None,
        cluster: str | object | None = None, progress: bool = True,
        on_result: Callable[[Task, dict], None] | None = None) -> list[tuple[Task, dict]]:
    """Every task's figures, in ``tasks``' order: stored ones read back, the rest measured
    on the pool (``workers`` processes, default every core) or on ``cluster``, each stored
    as it completes, with a progress bar."""
    store = Store(folder)
    digests = {clab: lab_digest(clab) for clab in {t.clab for t in tasks}}
    keys = [key(t, digests[t.clab]) for t in tasks]
    results: dict[str, dict] = {k: r for k in keys if (r := store.get(k)) is not None}
    todo = [t for t, k in zip(tasks, keys) if k not in results]
    columns = (TextColumn("tune"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, disable=not progress, transient=False) as bar:
        job = bar.add_task("runs", total=len(tasks), completed=len(tasks) - len(todo))
        if todo:
            source = _dask(todo, cluster) if cluster is not None else _pool(todo, workers)
            for task, figures in source:
                k = key(task, digests[task.clab])
                store.put(k, task, figures)
                results[k] = figures
                bar.advance(job)
                if on_result:
                    on_result(task, figures)
    return [(t, results[k]) for t, k in zip(tasks, keys)]
