"""What a running lab left on the machine, recorded so that status/down work from any process.

The state is written *before* anything is created and updated as resources appear, so a
crashed ``lab.up`` still leaves a record that ``lab.cleanup`` can act on. The state root
also holds, in folders whose names no lab can have (they start with a dot), the per-lab lock
files (``labs.lock``) and the agent logs of labs already taken down.
"""
from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

STATE_ENV = "ROCELAB_STATE_DIR"
DEFAULT_ROOT = Path("/run/rocelab")
KEPT_LOGS = ".logs"  # under the state root: agent logs of labs taken down ...
KEPT_LABS = 20  # ... of the last labs taken down


def state_root() -> Path:
    return Path(os.environ.get(STATE_ENV, DEFAULT_ROOT))


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary name of this writer's own, then rename: a reader never
    sees half a file, and two writers never share (and clobber) a temporary file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def process_start(pid: int) -> int | None:
    """When the process started (clock ticks after boot, /proc/<pid>/stat field 22): with
    the pid, what identifies a process, since pids get reused. None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # fields after the command name (which may hold spaces and parentheses) start at 3
    return int(stat.rsplit(")", 1)[1].split()[19])


class AgentState(BaseModel):
    node: str
    namespace: str
    pid: int
    started: int | None = None  # process_start(pid) when launched (None: not recorded)
    control: str  # unix socket path
    log: str
    time_scale: float | None = None  # S: ports run at speed / S (None: unpaced)


class LabState(BaseModel):
    lab: str
    topology: str  # absolute path of the clab file
    runtime: str = "netns"
    status: Literal["deploying", "up"] = "deploying"
    deployer_pid: int
    deployer_started: int | None = None  # process_start(deployer_pid)
    created: float
    namespaces: dict[str, str] = {}  # node -> namespace
    agents: dict[str, AgentState] = {}  # switch node -> its agent
    # sha256 of the clab file and of every file it references, as deployed (labs.fingerprint)
    fingerprint: dict[str, str] = {}
    parent: str | None = None  # the lab whose check brought this variant up
    # BGP labs: seconds from FRR started to every session Established ("sessions") and to
    # every host pair reachable ("reachable"), measured by lab.up
    convergence: dict[str, float] = {}
    # the S every node that declares none runs at, chosen at lab.up for this machine, and how
    # (labs.calibrate.Calibration.as_record); None and {}: every node declares its own
    time_scale: float | None = None
    calibration: dict[str, float | int | bool] = {}

    @classmethod
    def new(cls, lab: str, topology: str, runtime: str = "netns") -> "LabState":
        return cls(lab=lab, topology=topology, runtime=runtime, deployer_pid=os.getpid(),
                   deployer_started=process_start(os.getpid()), created=time.time())

    @property
    def dir(self) -> Path:
        return lab_dir(self.lab)

    def save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.dir / "state.json", self.model_dump_json(indent=2))

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def lab_dir(lab: str) -> Path:
    return state_root() / lab


def kept_logs(lab: str) -> Path:
    """Where a lab's agent logs are kept once it is down, unless a caller names a folder."""
    return state_root() / KEPT_LOGS / lab


def keep_logs(state: LabState, dest: Path | None = None) -> Path | None:
    """Copy the agents' logs to ``dest`` (default ``kept_logs``) before the state folder
    goes: the reason an agent died must outlive the lab. The folder, or None if no log."""
    logs = [(a.node, Path(a.log)) for a in state.agents.values() if Path(a.log).is_file()]
    if not logs:
        return None
    default = dest is None
    dest = dest or kept_logs(state.lab)
    if default:
        shutil.rmtree(dest, ignore_errors=True)  # the previous run's logs of this name
    dest.mkdir(parents=True, exist_ok=True)
    for node, log in logs:
        shutil.copyfile(log, dest / f"{node}.log")
    if default:
        _prune_kept_logs()
    return dest


def _prune_kept_logs() -> None:
    """Only the last KEPT_LABS labs' logs stay: tests make and remove labs by the hundred."""
    kept = sorted((d for d in (state_root() / KEPT_LOGS).iterdir() if d.is_dir()),
                  key=lambda d: d.stat().st_mtime, reverse=True)
    for old in kept[KEPT_LABS:]:
        shutil.rmtree(old, ignore_errors=True)


def log_tail(path: str | Path, lines: int = 3) -> str:
    """The last lines of a log, on one line (' | ' between them): what an error quotes."""
    try:
        text = Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    tail = [line.strip() for line in text[-lines:] if line.strip()]
    return " | ".join(tail) if tail else "exited without output"


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
    """Lab folders; a lab name starts with a letter or digit, the root's own folders with
    a dot."""
    root = state_root()
    return sorted(d.name for d in root.iterdir()
                  if d.is_dir() and not d.name.startswith(".")) if root.is_dir() else []


def pid_alive(pid: int, started: int | None = None) -> bool:
    """Running, not a zombie waiting to be reaped, and (when ``started`` is given) the same
    process that started then, not a later one that got its pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0] != "Z" and (started is None or int(fields[19]) == started)
