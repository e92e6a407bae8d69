"""The project's own files and version, wherever its code runs from: a source checkout (the
folder that holds ``labs/``, ``fabric/``, ``pyproject.toml``) or an installed package (the
``rocelab`` folder in site-packages, which holds the same subpackages)."""
from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def version() -> str:
    """This code's version: pyproject.toml's when it runs from a source checkout (an
    editable install's metadata may be older than the file), else the installed package's."""
    pyproject = PROJECT_ROOT / "pyproject.toml"
    if pyproject.is_file():
        match = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.M)
        if match:
            return match.group(1)
    try:
        return metadata.version("rocelab")
    except metadata.PackageNotFoundError:
        return "unknown"
