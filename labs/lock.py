"""One operation at a time per lab: ``flock`` on a per-lab lock file under the state root.

Exclusive for what changes a lab (up, down, cleanup, check and the variant labs a check
brings up), shared for what only looks at or uses it (status, exec, traffic). Refused at
once, never queued, in one line naming the holder. The lock files live in
``<state root>/.locks/``; each holder records its pid, start time and command in
``<lab>.lock.d/<pid>``, removed when it lets go. An exclusive holder removes the lock file
of a lab that no longer exists as it lets go; a taker that locked a file removed meanwhile
sees that its file is no longer the one at the path and tries again on the new one.

Re-entrant within a process: ``invoke check`` holds its lab exclusively and brings the lab
up and down inside that hold. A child process (pytest under ``invoke check``) does not
inherit the hold and must not try to take it.
"""
from __future__ import annotations

import fcntl
import os
import shlex
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import state as states
from .errors import LabError

LOCKS = ".locks"


class LabBusy(LabError):
    """Another process holds the lab's lock; the message names it."""


@dataclass
class _Held:
    fd: int
    exclusive: bool
    depth: int


_held: dict[str, _Held] = {}
_guard = threading.Lock()


def lock_path(lab: str) -> Path:
    return states.state_root() / LOCKS / f"{lab}.lock"


def holders(lab: str) -> list[str]:
    """'pid N (command)' for every live holder on record."""
    out = []
    folder = lock_path(lab).with_suffix(".lock.d")
    for record in sorted(folder.glob("*")) if folder.is_dir() else []:
        try:
            pid, started, command = record.read_text().split(" ", 2)
        except (OSError, ValueError):
            continue
        if states.pid_alive(int(pid), int(started)):
            out.append(f"pid {pid} ({command.strip()})")
    return out


@contextmanager
def hold(lab: str, exclusive: bool, command: str | None = None) -> Iterator[None]:
    """Hold ``lab``'s lock for the block, or raise LabBusy at once."""
    with _guard:
        held = _held.get(lab)
        if held is not None and (held.exclusive or not exclusive):
            held.depth += 1
            nested = True
        elif held is not None:
            raise LabBusy(f"lab {lab}: this process holds it shared and cannot take it "
                          "exclusively")
        else:
            nested = False
            _held[lab] = _acquire(lab, exclusive, command)
    try:
        yield
    finally:
        with _guard:
            if nested:
                _held[lab].depth -= 1
            else:
                _release(lab, _held.pop(lab))


def _acquire(lab: str, exclusive: bool, command: str | None) -> _Held:
    path = lock_path(lab)
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as e:
            raise LabError(f"cannot lock lab {lab}: {path}: {e.strerror}") from None
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            who = holders(lab)
            raise LabBusy(f"lab {lab} is busy: held by {', '.join(who) or 'another process'}"
                          "; try again when it ends") from None
        if _same_file(fd, path):
            break
        os.close(fd)  # removed by its last holder between our open and our flock
    record = path.with_suffix(".lock.d")
    record.mkdir(exist_ok=True)
    words = command or " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).name, *sys.argv[1:]])
    states.write_atomic(record / str(os.getpid()),
                        f"{os.getpid()} {states.process_start(os.getpid())} "
                        f"{' '.join(words.split())}\n")
    return _Held(fd, exclusive, 1)


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _release(lab: str, held: _Held) -> None:
    """Let go; the last word of an exclusive holder on a lab that is gone removes its lock
    file, so that labs made and removed by the thousand (tests) leave no files behind."""
    path = lock_path(lab)
    record = path.with_suffix(".lock.d")
    (record / str(os.getpid())).unlink(missing_ok=True)
    if held.exclusive and not states.lab_dir(lab).exists():
        path.unlink(missing_ok=True)
        try:
            record.rmdir()
        except OSError:  # another process is recording itself there: its to remove
            pass
    os.close(held.fd)  # closing the last descriptor releases the flock
