"""The task collections, one module per collection, shared by the ``rocelab`` command
(``rocelab.cli``) and the repository's ``tasks.py``: one implementation of every task."""
from __future__ import annotations

from invoke import Collection

from rocelab.tasks import config, image, lab, topo, traffic
from rocelab.tasks.check import check
from rocelab.tasks.diff import diff

COLLECTIONS = (lab.ns, traffic.ns, config.ns, image.ns, topo.ns)


def namespace() -> Collection:
    """A fresh root collection: ``check``, ``diff`` and ``lint`` (the same task as
    ``config.lint``) at the top, and the ``lab``, ``traffic``, ``config``, ``image`` and
    ``topo`` collections. Fresh, so that tasks.py can add its dev-only tasks to its own."""
    ns = Collection(*COLLECTIONS, check, diff)
    ns.add_task(config.lint, name="lint")
    return ns
