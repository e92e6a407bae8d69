"""The ``rocelab`` command: invoke's ``Program`` over ``rocelab.cli.tasks``, so it runs exactly
the tasks the repository's ``invoke`` runs, from any directory.

Sub-commands take invoke's ``collection.task`` form (``rocelab lab.up LAB``) and a spaced
form (``rocelab lab up LAB``), rewritten to the dotted one before parsing. A parse error (an
unknown task or option) exits 2, like every other usage error (docs/ci.md).
"""
from __future__ import annotations

from invoke import Config, Exit, Program
from invoke.exceptions import ParseError

from ..labs.project import version
from .tasks import COLLECTIONS, namespace
from .tasks.common import USAGE


class RocelabConfig(Config):
    """Config files ``rocelab.yaml`` and ``ROCELAB_*`` variables, not invoke's."""

    prefix = "rocelab"


def dotted(argv: list[str]) -> list[str]:
    """``rocelab lab up X`` -> ``rocelab lab.up X``: the first word that is not an option,
    when it names a collection and the next word one of its tasks."""
    tasks = {c.name: set(c.task_names) for c in COLLECTIONS}
    for i, word in enumerate(argv[1:], start=1):
        if word.startswith("-"):
            continue
        if word in tasks and i + 1 < len(argv) and argv[i + 1] in tasks[word]:
            return [*argv[:i], f"{word}.{argv[i + 1]}", *argv[i + 2:]]
        break
    return argv


class Rocelab(Program):
    """invoke's Program with the spaced form, and exit 2 on a parse error."""

    def run(self, argv: list[str] | str | None = None, exit: bool = True) -> None:
        self.normalize_argv(argv)
        super().run(dotted(list(self.argv)), exit)

    def parse_core(self, argv: list[str] | None) -> None:
        try:
            super().parse_core(argv)
        except ParseError as e:
            raise Exit(f"rocelab: {e}", code=USAGE) from None

    def parse_tasks(self) -> None:
        try:
            super().parse_tasks()
        except ParseError as e:
            raise Exit(f"rocelab: {e}", code=USAGE) from None


program = Rocelab(name="rocelab", binary="rocelab", version=version(),
                  namespace=namespace(), config_class=RocelabConfig)
