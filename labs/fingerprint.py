"""What a lab was deployed from: the clab file and every file it references, hashed per file.

``lab.up`` records it in the lab's state; ``check``, ``traffic.*`` and ``lab.status`` compare
it with the files as they are now, so that a verdict is never given for a configuration
the switches do not run (an edited config_db.json under a lab still up from before), nor for
a lab of the same name brought up from another folder.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from .state import LabState
from .topology import Topology


def files(topo: Topology) -> list[Path]:
    """The clab file, every bound file (every file under a bound folder), each switch's
    config_db.json (bound or startup-config) and each host's NIC settings file."""
    found = {topo.path.resolve()}
    for node in topo.nodes.values():
        for bind in node.binds:
            source = (topo.path.parent / bind.split(":", 1)[0]).resolve()
            found |= ({p for p in source.rglob("*") if p.is_file()} if source.is_dir()
                      else {source})
        found |= {p.resolve() for p in (node.config_path, node.nic_path) if p is not None}
    return sorted(found)


def sha256(path: Path) -> str | None:
    """The file's hash, None when it cannot be read (gone, or not a file any more)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 16):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def of(topo: Topology) -> dict[str, str]:
    """{absolute path: sha256} for every file the lab is made from."""
    return {str(p): sha256(p) or "" for p in files(topo)}


def changed(recorded: dict[str, str]) -> list[str]:
    """Recorded files whose content is no longer what was deployed (or that are gone)."""
    return [path for path, digest in recorded.items() if sha256(Path(path)) != digest]


def added(recorded: dict[str, str], topo: Topology) -> list[str]:
    """Files the topology references now that it did not when the lab came up."""
    return [str(p) for p in files(topo) if str(p) not in recorded]


def shown(path: str, state: LabState) -> str:
    """A file named relative to the lab's folder when it is inside it."""
    base = Path(state.topology).parent
    return str(Path(path).relative_to(base)) if Path(path).is_relative_to(base) else path


def stale_reason(state: LabState, expected: Path | None, topo: Topology | None) -> str:
    """Why the running lab is not what the files say ('' when it is): brought up from
    another path, recorded without a fingerprint, or files changed since lab.up. ``topo``
    is the topology as it loads now (None when it no longer loads: the changed files say
    why)."""
    if expected is not None and expected.resolve() != Path(state.topology):
        return (f"lab {state.lab} was brought up from {state.topology}, not from "
                f"{expected.resolve()}")
    if not state.fingerprint:
        return f"lab {state.lab} has no record of the files it was brought up from"
    differ = changed(state.fingerprint) + (added(state.fingerprint, topo) if topo else [])
    if not differ:
        return ""
    more = f" (and {len(differ) - 1} more)" if len(differ) > 1 else ""
    verb = "is new" if differ[0] not in state.fingerprint else "changed"
    return (f"lab {state.lab} is stale: {shown(differ[0], state)} {verb} since lab.up"
            f"{more}")
