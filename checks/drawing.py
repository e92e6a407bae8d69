"""Where a check run's figures are drawn: in the check itself on a live lab, in a worker
process on a simulated one.

A simulated scenario runs in the checks' own process, on one core, and its results do not
depend on how busy the machine is; drawing its figures (a second or so each, much of it
matplotlib) in a worker process lets the next scenario run meanwhile, on the other core.
A live lab's switches and endpoints need every core they have (a busy machine costs them
their fidelity), so there the figures are drawn before the check ends, as before.

Either way the figures exist before the summary is written, and one that cannot be drawn
is an error: raised in the check live, reported against the check that asked for it
(``checks.report``) when drawn in the background.
"""
from __future__ import annotations

import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Protocol


class Figures(Protocol):
    """What a check asks to have drawn (``checks.plots.RunFigures``): it pickles."""

    def outputs(self) -> list[Path]: ...

    def draw(self) -> list[Path]: ...


class Drawer:
    """Draws figures now (``background`` False) or in one worker process, and says at the
    end which checks' figures could not be drawn."""

    def __init__(self, background: bool) -> None:
        self.background = background
        self._pool: ProcessPoolExecutor | None = None
        self._pending: list[tuple[str, Future]] = []

    def draw(self, key: str, figures: Figures) -> None:
        """Draw ``figures`` for the check ``key``: now, or queued for the worker."""
        if not self.background:
            figures.draw()
            return
        if self._pool is None:  # spawned: a fork would copy the simulated fabric
            self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        self._pending.append((key, self._pool.submit(figures.draw)))

    def finish(self, cancel: bool = False) -> dict[str, str]:
        """Wait for every queued figure (or, ``cancel``, for those already begun) and stop
        the worker; per check key, why its figures could not be drawn."""
        failed: dict[str, str] = {}
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=cancel)
        for key, future in self._pending:
            if future.cancelled():
                failed.setdefault(key, "not drawn: the run was interrupted")
                continue
            error = future.exception()
            if error is not None:
                failed.setdefault(key, f"{type(error).__name__}: {error}".splitlines()[0])
        self._pool, self._pending = None, []
        return failed
