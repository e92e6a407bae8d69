"""Run the benchmarks, print a table, keep the numbers in results/bench-<time>.json."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench import forwarding, lifecycle


def main() -> int:
    if os.geteuid() != 0:
        print("bench: needs root (it builds network namespaces)", file=sys.stderr)
        return 2
    console = Console()
    with console.status("lab.up / lab.down against bare iproute2"):
        life = lifecycle.measure()
    with console.status("forwarding rate against a bare relay"):
        fwd = forwarding.measure()
    table = Table(title="rocelab benchmarks (medians; ratios against baselines of this run)")
    for col in ("measure", "value", "baseline", "ratio", "target"):
        table.add_column(col)
    table.add_row("lab.up", f"{life['lab_up_s']:.3f} s",
                  f"{life['bare_iproute2_up_s']:.3f} s iproute2 + "
                  f"{life['bare_agent_start_s']:.3f} s agents",
                  f"{life['up_ratio']:.2f}x", "<= 2x")
    table.add_row("lab.down", f"{life['lab_down_s']:.3f} s", f"{life['bare_down_s']:.3f} s",
                  f"{life['lab_down_s'] / life['bare_down_s']:.2f}x", "< 1 s")
    for key, label in (("agent_bridged_pps", "agent, bridged"),
                       ("agent_routed_pps", "agent, routed"),
                       ("agent_full_pipeline_pps", "agent, routed + lossless pipeline")):
        table.add_row(f"forwarding 1 KB, {label}", f"{fwd[key]:,.0f} pps",
                      f"{fwd['bare_relay_pps']:,.0f} pps bare relay",
                      f"{fwd[key] / fwd['bare_relay_pps']:.2f}x",
                      ">= 0.5x" if key == "agent_full_pipeline_pps" else "report")
    console.print(table)
    out = Path("results") / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"lifecycle": life, "forwarding": fwd}, indent=2))
    console.print(f"numbers kept in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
