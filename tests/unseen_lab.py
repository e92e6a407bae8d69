"""A lab the project has never seen, as a new user brings it: three racks on
Azure-standard QoS, RoCE on DSCP 3, lossless priorities 3 and 4 (PG and queue ranges
``3-4``), DSCP 0 in TC 1 and so queue 1, CNPs on DSCP 48, and other node names (tor, agg,
gpu). Made with labs.generate, then edited as an engineer would edit the copies."""
from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from rocelab.labs import generate as gen


from rocelab.labs.generate_spec import Spec
RENAME = ((r"\bleaf(\d+)\b", r"tor\1"), (r"\bspine(\d+)\b", r"agg\1"), (r"\bh(\d+)\b", r"gpu\1"))


def _renamed(text: str) -> str:
    for pattern, repl in RENAME:
        text = re.sub(pattern, repl, text)
    return text


def azure(config: dict) -> dict:
    """Azure's two lossless classes on one generated config_db.json."""
    config["DSCP_TO_TC_MAP"]["AZURE"].update({"0": "1", "4": "4"})
    config["TC_TO_PRIORITY_GROUP_MAP"]["AZURE"]["4"] = "4"
    for port in config["PORT_QOS_MAP"].values():
        port["pfc_enable"] = port["pfcwd_sw_enable"] = "3,4"
    for table in ("BUFFER_PG", "QUEUE", "BUFFER_QUEUE"):
        entries = {}
        for key, value in config[table].items():
            port, index = key.split("|")
            index = {"3": "3-4", "4-5": "5", "4-7": "5-7"}.get(index, index)
            entries[f"{port}|{index}"] = value
        config[table] = entries
    return config


def make(dest: Path, name: str | None = None, nic: bool = True) -> Path:
    """Write the lab under ``dest``; its clab file's path. ``nic=False``: no host has a NIC
    settings file (the classes then come from the switches' maps alone)."""
    name = name or f"az{uuid.uuid4().hex[:6]}"
    folder = gen.write(Spec(name, hosts_per_leaf=2, leaves=3, roce_dscp=3,
                                roce_priority=3), dest / name).path
    clab = folder / f"{name}.clab.yml"
    text = _renamed(clab.read_text())
    text = "\n".join(line for line in text.splitlines()
                     if "rocelab.roce-priority" not in line
                     and (nic or "rocelab.nic" not in line)) + "\n"
    clab.write_text(text)
    for config_dir in sorted((folder / "configs").iterdir()):
        path = config_dir / "config_db.json"
        config = azure(json.loads(_renamed(path.read_text())))
        target = folder / "configs" / _renamed(config_dir.name)
        target.mkdir(exist_ok=True)
        (target / "config_db.json").write_text(json.dumps(config, indent=2))
        if target != config_dir:
            path.unlink()
            config_dir.rmdir()
    return clab
