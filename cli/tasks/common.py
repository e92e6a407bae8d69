"""What every task module shares: the console, one-line errors with the exit-code contract,
and the running lab under its lock."""
from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from invoke import Exit
from rich.console import Console

from ...fabric.client import AgentError
from ...fabric.config import ConfigError
from ...labs import live
from ...labs.lab import Lab
from ...labs import lock
from ...labs import state as states
from ...labs.errors import LabError
from ...labs.topology import TopologyError

console = Console(width=None if sys.stdout.isatty() else 110)
USER_ERRORS = (LabError, TopologyError, ConfigError, AgentError, states.StateError)
# a file that is not what it must be: nothing was done (exit 2, as for a bad argument)
BAD_INPUT = (TopologyError, ConfigError, states.StateError)

# The exit-code contract (docs/ci.md): what a CI job can tell apart.
PASSED, FAILED, USAGE, INCONCLUSIVE = 0, 1, 2, 3

REUSE_HELP = ("use a running lab whose files changed since lab.up, or that was brought up "
              "from another path (warns instead of refusing)")


def fail(e: Exception | str) -> Exit:
    """One line on stderr. Exit 2 for bad input (a file, an argument: nothing was done), 1
    for an operation that failed, so a CI job can tell a typo from a broken fabric."""
    return Exit(f"rocelab: {e}", code=USAGE if isinstance(e, (str, *BAD_INPUT)) else FAILED)


def checked_jitter_ns(value: str | float) -> float:
    """A ``--jitter-ns`` option (``check``, ``sim.compare``), refused before anything runs
    when negative."""
    ns = float(value)
    if ns < 0:
        raise fail(f"--jitter-ns {ns:g}: timing jitter cannot be negative")
    return ns


def interrupted(e: KeyboardInterrupt, what: str) -> Exit:
    """Ctrl-C, SIGTERM or SIGHUP: say what was undone; exit 128 + the signal, as a shell
    reports a process the signal stopped."""
    signum = getattr(e, "signum", 2)
    return Exit(f"rocelab: interrupted ({'SIGINT' if signum == 2 else str(e)}): {what}",
                code=128 + signum)


@contextmanager
def using(spec: str, reuse: bool | None = None) -> Iterator[Lab]:
    """The running lab ``spec`` names (the only one when empty) under a shared lock: no up,
    down or check of it meanwhile. With ``reuse`` given, it is refused when stale
    (labs.live.checked)."""
    name = live.name_of(spec)
    with lock.hold(name, exclusive=False):
        if reuse is None:
            yield live.running(name)
        else:
            yield live.checked(spec, reuse=reuse,
                               warn=lambda line: console.print(f"[yellow]{line}[/]"))
