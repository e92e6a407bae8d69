"""A PFC storm: a host that keeps pausing one priority of its link, as a NIC with a stuck
receive pipeline does, until ``--seconds`` have passed. Run inside a host's namespace:

    python -m rocelab.traffic.storm --iface eth1 --priority 3 --seconds 1.5

Each PFC frame carries the largest pause (65535 quanta) and the next follows well before it
could expire, so the link partner's queue of that priority never drains on its own: only its
PFC watchdog can end the storm. Prints one JSON line: frames sent and the monotonic times
of the first and last (the watchdog's detection and restoration are measured from them).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from ..fabric import afpacket
from ..nic import hostnet
from . import packets

MAX_QUANTA = 0xFFFF
INTERVAL_S = 0.02  # wall time between PFC frames: far below any pause they carry


def storm(iface: str, priority: int, seconds: float) -> dict:
    src_mac = hostnet.ip_json("link", "show", "dev", iface)[0]["address"]
    frame = bytes(packets.pfc_frame(src_mac, {priority: MAX_QUANTA}))
    sock = afpacket.open_socket(iface, ignore_outgoing=True)
    try:
        first = time.monotonic()
        end = first + seconds
        sent, last = 0, first
        while (now := time.monotonic()) < end:
            sock.send(frame)
            sent, last = sent + 1, now
            time.sleep(INTERVAL_S)  # a steady stream at a fixed rate is the storm itself
    finally:
        sock.close()
    return {"frames": sent, "first": first, "last": last, "priority": priority}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rocelab.traffic.storm", description=__doc__.split("\n")[0])
    parser.add_argument("--iface", default="eth1")
    parser.add_argument("--priority", type=int, default=3)
    parser.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args(argv)
    print(json.dumps(storm(args.iface, args.priority, args.seconds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
