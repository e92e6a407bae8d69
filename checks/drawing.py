"""Where a check run's figures are drawn: in the check itself on a live lab, in a worker
process on a simulated one.

A simulated scenario runs in the checks' own process, on one core, and its results do not
depend on how busy the machine is; drawing its figures (a second or so each, much of it
matplotlib) in a worker process lets the next scenario run meanwhile, on the other core.
A live lab's switches and endpoints need every core they have (a busy machine costs them
their fidelity), so there the figures are drawn before the check ends, as before.

Either way the figures exist before the summary is written, and one that cannot be drawn
is an error: raised in the check live, reported against the check that asked for it
(``checks.report``) when drawn in the background, with the worker's traceback. A worker
that dies takes only the figures it held with it: the next ones get a fresh worker. The
worker dies with the checks' process, however that ends.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import traceback
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Protocol

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent exits


class Figures(Protocol):
    """What a check asks to have drawn (``checks.plots.RunFigures``): it pickles."""

    def outputs(self) -> list[Path]: ...

    def draw(self) -> list[Path]: ...


class DrawingError(Exception):
    """Why figures were not drawn: one line, and the traceback behind it as text (the
    worker's own exception may not survive the trip back; empty when there is none)."""

    def __init__(self, line: str, trace: str = "") -> None:
        super().__init__(line, trace)
        self.line, self.trace = line, trace


def _die_with(parent: int) -> None:
    """The worker's start: killed when the checks' process exits, even by SIGKILL (a
    worker left waiting on its queue would hold its files and memory for ever)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0 or os.getppid() != parent:
        os._exit(1)  # no watch could be set, or the parent is already gone


def _draw(figures: Figures) -> list[Path]:
    try:
        return figures.draw()
    except Exception as e:
        raise DrawingError(f"{type(e).__name__}: {e}".splitlines()[0],
                           traceback.format_exc()) from None


class Drawer:
    """Draws figures now (``background`` False) or in one worker process, and says at the
    end which checks' figures could not be drawn."""

    def __init__(self, background: bool) -> None:
        self.background = background
        self._pool: ProcessPoolExecutor | None = None
        self._pools: list[ProcessPoolExecutor] = []  # every worker started, to stop
        self._pending: list[tuple[str, Figures, Future]] = []

    def draw(self, key: str, figures: Figures) -> None:
        """Draw ``figures`` for the check ``key``: now, or queued for the worker (a fresh
        one if the last died)."""
        if not self.background:
            figures.draw()
            return
        if self._pool is None:
            self._pool = self._start()
        try:
            future = self._pool.submit(_draw, figures)
        except BrokenProcessPool:  # its worker died with earlier figures (they say so)
            self._pool = self._start()
            future = self._pool.submit(_draw, figures)
        self._pending.append((key, figures, future))

    def _start(self) -> ProcessPoolExecutor:
        """A worker process, spawned: a fork would copy the simulated fabric."""
        pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_die_with, initargs=(os.getpid(),))
        self._pools.append(pool)
        return pool

    def finish(self, cancel: bool = False) -> dict[str, DrawingError]:
        """Wait for every queued figure (or, ``cancel``, for those already begun) and stop
        the workers; per check key, why its figures could not be drawn. Figures that were
        queued on a worker when it died are drawn again, each by a fresh worker of its
        own: the one that killed it dies again, the others are drawn."""
        failed: dict[str, DrawingError] = {}
        for pool in self._pools:
            pool.shutdown(wait=True, cancel_futures=cancel)
        for key, figures, future in self._pending:
            if future.cancelled():
                failed.setdefault(key, DrawingError("the run was interrupted first"))
                continue
            error = future.exception()
            if isinstance(error, BrokenProcessPool) and not cancel:
                error = self._alone(figures)
            if error is not None and not isinstance(error, DrawingError):
                error = DrawingError(f"{type(error).__name__}: {error}")  # the worker died
            if error is not None:
                failed.setdefault(key, error)
        self._pool, self._pools, self._pending = None, [], []
        return failed

    def _alone(self, figures: Figures) -> BaseException | None:
        """Draw ``figures`` again in a worker of their own: what it raised, if anything."""
        pool = self._start()
        try:
            return pool.submit(_draw, figures).exception()
        finally:
            pool.shutdown(wait=True)
