"""The text a bench section's rows print, for the bench tests to read."""
from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.table import Table


def rendered(rows: Callable[[Table, dict], None], out: dict, width: int = 400) -> str:
    """``rows`` (a section's ``*_rows``) given ``out``, in the bench's five columns."""
    table = Table()
    for col in ("measure", "value", "baseline", "ratio", "target"):
        table.add_column(col)
    rows(table, out)
    console = Console(width=width, record=True)
    console.print(table)
    return console.export_text()
