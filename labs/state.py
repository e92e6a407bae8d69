"""What a running lab left on the machine, recorded so that status/down work from any process.

The state is written *before* anything is created and updated as resources appear, so a
crashed ``lab.up`` still leaves a record that ``lab.cleanup`` can act on.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

STATE_ENV = "ROCELAB_STATE_DIR"
DEFAULT_ROOT = Path("/run/rocelab")


def state_root() -> Path:
    return Path(os.environ.get(STATE_ENV, DEFAULT_ROOT))


class AgentState(BaseModel):
    node: str
    namespace: str
    pid: int
    control: str  # unix socket path
    log: str
    time_scale: float | None = None  # S: ports run at speed / S (None: unpaced)


class LabState(BaseModel):
    lab: str
    topology: str  # path of the clab file
    runtime: str = "netns"
    status: Literal["deploying", "up"] = "deploying"
    deployer_pid: int
    created: float
    namespaces: dict[str, str] = {}  # node -> namespace
    agents: dict[str, AgentState] = {}  # switch node -> its agent

    @classmethod
    def new(cls, lab: str, topology: str, runtime: str = "netns") -> "LabState":
        return cls(lab=lab, topology=topology, runtime=runtime, deployer_pid=os.getpid(),
                   created=time.time())

    @property
    def dir(self) -> Path:
        return lab_dir(self.lab)

    def save(self) -> None:
        """Write atomically: a reader never sees half a file."""
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / "state.json.tmp"
        tmp.write_text(self.model_dump_json(indent=2))
        tmp.replace(self.dir / "state.json")

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def lab_dir(lab: str) -> Path:
    return state_root() / lab


class StateError(ValueError):
    """A lab's state file that cannot be read: one line naming it and the way out."""


def load(lab: str) -> LabState | None:
    path = lab_dir(lab) / "state.json"
    try:
        return LabState.model_validate_json(path.read_bytes())  # bytes: pydantic names bad UTF-8
    except FileNotFoundError:
        return None
    except OSError as e:
        problem = e.strerror or str(e)
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(map(str, first["loc"]))[:80]  # keys of a corrupt file: any length
        problem = (f"{field}: " if field else "") + first["msg"].replace("\n", " ")[:200]
    raise StateError(f"{path}: unreadable lab state ({problem}); its namespaces and agents "
                     "are unknown: invoke lab.cleanup --all removes it, with every other lab")


def all_labs() -> list[LabState]:
    """Every lab with a readable state (see unreadable() for the others)."""
    out = []
    for name in _recorded():
        try:
            if (s := load(name)) is not None:
                out.append(s)
        except ValueError:
            pass
    return out


def unreadable() -> list[str]:
    """Labs whose state file is missing or corrupt: only lab.cleanup --all touches those."""
    out = []
    for name in _recorded():
        try:
            if load(name) is None:
                out.append(name)
        except ValueError:
            out.append(name)
    return out


def _recorded() -> list[str]:
    root = state_root()
    return sorted(d.name for d in root.iterdir() if d.is_dir()) if root.is_dir() else []


def pid_alive(pid: int) -> bool:
    """Running, and not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
