"""The error every lab operation raises, and the step wrapper that names where it failed.

Every module of ``labs`` and above raises ``LabError`` for what a user must hear in one
line (a bad topology, a missing tool, a dead agent); tasks print it and exit 1 or 2.
"""
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager


class LabError(RuntimeError):
    """A lab operation failed; the message says which step and why."""


class EndpointError(LabError):
    """A host's RoCE endpoint (or PFC storm) process failed, or said what it should not."""


@contextmanager
def step(name: str) -> Iterator[None]:
    """Any failure inside, from our code or from the system, as one line naming the step."""
    try:
        yield
    except (LabError, OSError, subprocess.SubprocessError, ValueError) as e:
        raise LabError(f"step '{name}' failed: {e}") from None
