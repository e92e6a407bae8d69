"""Shared fixtures: copies of the project's labs under new names, so tests never clash with a
lab a user has running, nor with each other."""
from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
TOPOLOGIES = ROOT / "topologies"


def copy_lab(dest: Path, lab: str = "roce-v2-leafspine", name: str | None = None,
             edit=None) -> Path:
    """Copy topologies/<lab> into dest under a fresh lab name; ``edit(doc)`` may change it.

    Returns the path of the copied clab file.
    """
    name = name or f"t{uuid.uuid4().hex[:6]}"
    folder = dest / name
    shutil.copytree(TOPOLOGIES / lab, folder)
    src = folder / f"{lab}.clab.yml"
    doc = yaml.safe_load(src.read_text())
    doc["name"] = name
    if edit:
        edit(doc)
    src.unlink()
    path = folder / f"{name}.clab.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture
def lab_copy(tmp_path):
    return lambda **kw: copy_lab(tmp_path, **kw)
