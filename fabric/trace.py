"""The agent's time series (``Trace``) and where it may write one (``open_trace_file``).

The agent runs as root and writes the file itself, so the path a client names is held to a
few folders given on the agent's command line (the lab's results and state folders), walked
down from those folders without following a symbolic link at any step, and opened only if it
is a regular file with no other hard link: a link planted at a predictable trace path can
not make root truncate a file elsewhere. A trace is bounded in time and in bytes, and a
failed write (a full disk, an I/O error) ends it with the reason recorded instead of ending
the agent.
"""
from __future__ import annotations

import errno
import json
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from .model.switch import Switch

DEFAULT_MAX_SECONDS = 600.0  # a trace nobody stopped ends after 10 minutes of wall time
DEFAULT_MAX_BYTES = 256 << 20  # ... or 256 MiB: a few minutes of 1 ms samples of 8 ports
MIN_MAX_BYTES = 4096  # room for the header and a sample
MAX_PATH = 4096  # PATH_MAX
BUFFER = 1 << 20


class TracePathError(ValueError):
    """A trace path the agent will not write."""


def open_trace_file(path: str, roots: Sequence[Path]) -> BinaryIO:
    """``path`` (absolute, no ``..``) opened for writing, truncated, if it lies under one of
    ``roots``. Each folder below the root is opened without following links, as is the file
    (``O_NOFOLLOW``); the file must be absent or a regular file with a single link. The root
    itself may be reached through links (it comes from the agent's command line), so a path
    under the root's real location is accepted too."""
    if len(path) > MAX_PATH or "\0" in path:
        raise TracePathError("trace path: too long or contains a NUL byte")
    parts = PurePosixPath(path).parts
    if not PurePosixPath(path).is_absolute():
        raise TracePathError(f"trace path {path!r} is not absolute (the agent runs elsewhere)")
    if ".." in parts:
        raise TracePathError(f"trace path {path!r} contains '..'")
    for root in roots:
        for base in dict.fromkeys((root, Path(os.path.realpath(root)))):
            depth = len(base.parts)
            if len(parts) > depth and parts[:depth] == base.parts:
                return _open_beneath(base, parts[depth:], path)
    raise TracePathError(f"trace path {path!r} is outside the agent's trace folders "
                         f"({', '.join(str(r) for r in roots) or 'none'})")


def _open_beneath(base: Path, below: tuple[str, ...], path: str) -> BinaryIO:
    """Walk ``below`` down from ``base`` one folder at a time (``openat``, no links)."""
    try:
        folder = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise TracePathError(f"trace folder {base}: {e.strerror}") from None
    try:
        for name in below[:-1]:
            try:
                inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                | os.O_CLOEXEC, dir_fd=folder)
            except OSError as e:
                raise TracePathError(f"trace path {path!r}: folder {name!r}: "
                                     f"{_why(e)}") from None
            os.close(folder)
            folder = inner
        try:  # O_NONBLOCK: a FIFO planted here must not block the agent in open()
            fd = os.open(below[-1], os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                         | os.O_CLOEXEC, 0o644, dir_fd=folder)
        except OSError as e:
            raise TracePathError(f"trace path {path!r}: {_why(e)}") from None
    finally:
        os.close(folder)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise TracePathError(f"trace path {path!r}: not a regular file with a single link")
    os.ftruncate(fd, 0)
    return os.fdopen(fd, "wb", buffering=BUFFER)


def _why(error: OSError) -> str:
    if error.errno in (errno.ELOOP, errno.ENOTDIR):
        return "a symbolic link or not a folder (links are not followed)"
    return error.strerror or str(error)


@dataclass
class TraceEnd:
    """How a trace ended: ``reason`` is ``stopped`` (asked to), ``max_seconds``,
    ``max_bytes`` or ``write_error`` (then ``error`` says which)."""
    path: str
    samples: int
    bytes: int
    seconds: float
    reason: str
    error: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


class Trace:
    """A time series of ``Switch.sample`` written as JSON lines, for plots: a header line
    (node, time_scale, interval_ms, ports, started: epoch seconds, max_seconds, max_bytes),
    then one line per sample, ``{"t": seconds since start, "ports": ..., "pools": ...}``.
    A line holds only what changed since the line before: a port whose state is the same
    is left out of ``ports``, and ``pools`` is left out when no pool moved (the first line
    holds everything). Readers carry the last state forward (``checks.plots.load_trace``).
    Under congestion most ports of a switch hold still from one sample to the next, and a
    simulated check run writes a hundred thousand samples: this halves what is encoded,
    written and parsed again for the plots, with nothing lost. Nor are those ports read:
    each sample looks only at the ports the switch says may have moved
    (``Switch.sample_moved``).

    The event loop takes the samples (``poll``) between frames, so a sample never races
    the model; the file is written through a large buffer so a sample costs a ``json.dumps``
    and no system call. Intervals are wall time, while data-plane times are stretched by S:
    at S = 3000, 1 ms of wall time is ~0.33 us of emulated time. A loop late by more than an
    interval skips the missed samples rather than writing a burst of identical ones.
    ``poll`` ends the trace (``ended``) at ``max_seconds``, before a line would take the file
    past ``max_bytes`` (so a limit leaves whole lines), or on a failed write.
    """

    def __init__(self, switch: Switch, node: str, file: BinaryIO, path: str,
                 interval_s: float, ports: list[str], now: float, *,
                 max_seconds: float = DEFAULT_MAX_SECONDS,
                 max_bytes: int = DEFAULT_MAX_BYTES, virtual: bool = False) -> None:
        self.switch = switch
        self.file = file
        self.path = path
        self.interval_s = interval_s
        self.ports = ports
        self.started = now
        self.next_at = now
        self.max_seconds = max_seconds
        self.max_bytes = max_bytes
        self.count = 0
        self.bytes = 0
        self.last_ports: dict[str, dict] = {}  # each port's state as last written
        self.last_pools: dict | None = None
        self.ended: TraceEnd | None = None
        self.header = {"node": node, "time_scale": switch.time_scale,
                       "interval_ms": interval_s * 1e3, "ports": ports, "started": time.time(),
                       "max_seconds": max_seconds, "max_bytes": max_bytes}
        if virtual:  # the simulator's clock: a lab's switches line up on it exactly
            self.header["virtual_s"] = now
        self._write(json.dumps(self.header).encode() + b"\n", now)

    def poll(self, now: float) -> bool:
        """Write a sample if one is due at ``now``; False once the trace has ended (closed,
        ``ended`` says why)."""
        if self.ended is not None:
            return False
        if now < self.next_at:
            return True
        if now - self.started >= self.max_seconds:
            self.close(now, "max_seconds")
            return False
        last = self.last_ports
        state = self.switch.sample_moved(now, self.ports, everything=not last)
        changed = {name: entry for name, entry in state["ports"].items()
                   if last.get(name) != entry}
        line = {"t": round(now - self.started, 9), "ports": changed}
        if state["pools"] != self.last_pools:
            line["pools"] = state["pools"]
        if self._write(json.dumps(line, separators=(",", ":")).encode() + b"\n", now):
            self.count += 1
            last.update(changed)
            self.last_pools = state["pools"]
        self.next_at += self.interval_s
        if self.next_at <= now:
            self.next_at = now + self.interval_s
        return self.ended is None

    def _write(self, line: bytes, now: float) -> bool:
        if self.bytes + len(line) > self.max_bytes:
            self.close(now, "max_bytes")
            return False
        try:
            self.file.write(line)
        except OSError as e:
            self.close(now, "write_error", e)
            return False
        self.bytes += len(line)
        return True

    def close(self, now: float, reason: str = "stopped",
              error: OSError | None = None) -> TraceEnd:
        """Flush and close the file (once); how the trace ended."""
        if self.ended is not None:
            return self.ended
        try:
            self.file.close()  # closes the descriptor even when the flush fails
        except OSError as e:
            if error is None:
                reason, error = "write_error", e
        self.ended = TraceEnd(self.path, self.count, self.bytes, round(now - self.started, 3),
                              reason, None if error is None else
                              f"{error.strerror or error} ({errno.errorcode.get(error.errno, '?')})")
        return self.ended
