"""The task collections, one module per collection, shared by the ``rocelab`` command
(``rocelab.cli.program``) and the repository's ``tasks.py``: one implementation of every task."""
from __future__ import annotations

from invoke import Collection

from . import action, config, exercise, image, lab, show, sim, topo, traffic
from .check import check
from .diff import diff
from .tune import tune

COLLECTIONS = (lab.ns, traffic.ns, config.ns, image.ns, topo.ns, sim.ns, show.ns,
               show.clear_ns, action.ns, exercise.ns)


def namespace() -> Collection:
    """A fresh root collection: ``check``, ``diff``, ``tune`` and ``lint`` (the same task as
    ``config.lint``) at the top, and the ``lab``, ``traffic``, ``config``, ``image``,
    ``topo``, ``sim``, ``show``, ``clear``, ``action`` and ``exercise`` collections. Fresh,
    so that tasks.py can add its dev-only tasks to its own."""
    ns = Collection(*COLLECTIONS, check, diff, tune)
    ns.add_task(config.lint, name="lint")
    return ns
