"""rocelab as an installed tool: the ``rocelab`` command (``rocelab.cli``) and its tasks
(``rocelab.tasks``), the same ones the repository's ``invoke`` runs."""
from __future__ import annotations

from importlib import metadata
from pathlib import Path
import re


def version() -> str:
    """This code's version: pyproject.toml's when it runs from a source checkout (an
    editable install's metadata may be older than the file), else the installed package's."""
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if pyproject.is_file():
        match = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.M)
        if match:
            return match.group(1)
    try:
        return metadata.version("rocelab")
    except metadata.PackageNotFoundError:
        return "unknown"
