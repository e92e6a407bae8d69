"""What a person reads after a traffic pattern: one row per flow, totals, and the verdict."""
from __future__ import annotations

from typing import Any

from rich.table import Table


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def flow_table(result: dict[str, Any]) -> Table:
    """Per flow: delivered, goodput (emulated and real-fabric equivalent), message
    completion times p50/p99, retransmissions, NAKs, timeouts, CNPs."""
    scale = result["time_scale"]
    table = Table(title=f"{result['pattern']} in {result['lab']} (S={scale:g}: rates x S "
                        f"for the real fabric, times / S)")
    for col in ("flow", "messages", "delivered MB", "goodput Mb/s", "real Gb/s",
                "p50 ms", "p99 ms", "retrans", "NAKs", "timeouts", "CNPs", ""):
        table.add_column(col, justify="left" if col in ("flow", "") else "right")
    for f in result["flows"]:
        table.add_row(f["name"], f"{f['messages_done']}/{f['messages']}",
                      f"{f['delivered_bytes'] / 1e6:.2f}", f"{f['goodput_bps'] / 1e6:.2f}",
                      f"{f['goodput_bps'] * scale / 1e9:.1f}",
                      _ms(f["completion_s"]["p50"]), _ms(f["completion_s"]["p99"]),
                      str(f["retransmitted"]), str(f["naks_received"]), str(f["timeouts"]),
                      str(f["cnps_received"]),
                      "[green]ok[/]" if f["complete"] else f"[red]{f['failed'] or 'incomplete'}[/]")
    flows = result["flows"]
    table.add_row("total", "", f"{sum(f['delivered_bytes'] for f in flows) / 1e6:.2f}",
                  f"{sum(f['goodput_bps'] for f in flows) / 1e6:.2f}",
                  f"{sum(f['goodput_bps'] for f in flows) * scale / 1e9:.1f}", "", "",
                  str(sum(f["retransmitted"] for f in flows)),
                  str(sum(f["naks_received"] for f in flows)),
                  str(sum(f["timeouts"] for f in flows)),
                  str(sum(f["cnps_received"] for f in flows)), "", style="bold")
    return table


def verdict(result: dict[str, Any]) -> str:
    flows = result["flows"]
    if result["complete"]:
        return (f"[green]every message delivered[/]: {len(flows)} flows, "
                f"{sum(f['delivered_bytes'] for f in flows):,} bytes in "
                f"{result['elapsed_s']:.3g} s")
    bad = [f["name"] for f in flows if not f["complete"]]
    return f"[red]{len(bad)} of {len(flows)} flows did not complete[/]: {', '.join(bad)}"
