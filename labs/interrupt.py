"""SIGTERM and SIGHUP treated as Ctrl-C is: the program unwinds, and what it was building is
rolled back; while it rolls back (or takes a lab down) no signal cuts that short.

Python turns SIGINT into KeyboardInterrupt but lets SIGTERM and SIGHUP kill the process
where it stands: a ``lab.up`` stopped by a service manager, a CI timeout or a closed
terminal would leave namespaces and agents behind. Handlers are only installed from the
main thread (the only one Python delivers signals to); elsewhere the blocks run as they are.
A handler acts only in the process that installed it: pyroute2 forks helper children (no
exec, so they inherit the handlers) and stops them with SIGTERM, which must kill them.
"""
from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOPPING = (signal.SIGTERM, signal.SIGHUP)
ALL = (signal.SIGINT, *STOPPING)


class Interrupted(KeyboardInterrupt):
    """A SIGTERM or SIGHUP, raised where the program was, as Ctrl-C raises
    KeyboardInterrupt."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


Handler = Callable[[int, object], None]


def here_only(handler: Handler) -> Handler:
    """``handler`` in this process; in a forked child that inherited it, the signal's
    default action (a child stopped with SIGTERM dies, as its parent expects)."""
    owner = os.getpid()

    def handle(signum: int, frame) -> None:
        if os.getpid() != owner:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        handler(signum, frame)
    return handle


def _raise(signum: int, frame) -> None:
    raise Interrupted(signum)


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM and SIGHUP raise Interrupted inside the block."""
    if not _main_thread():
        yield
        return
    old = {s: signal.signal(s, here_only(_raise)) for s in STOPPING}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextmanager
def deferred() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait until the block is done (a rollback, a lab.down), then
    arrive as they would have."""
    if not _main_thread():
        yield
        return
    pending: list[int] = []
    old = {s: signal.signal(s, here_only(lambda signum, frame: pending.append(signum)))
           for s in ALL}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        if pending:
            signal.raise_signal(pending[0])
