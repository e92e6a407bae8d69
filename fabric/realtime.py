"""Real-time scheduling for the live shells: the switch agents and the host endpoints.

A live lab is a handful of processes on a few cores, each waking when a frame is due and
working for tens of microseconds. Under the normal scheduler a woken process waits for the
one running to finish its slice unless it is far enough behind (the wakeup granularity,
about 2 ms on two cores), so a frame due now was taken up to a millisecond late: measured on
the default lab's DCQCN incast at S = 3000, the endpoints' p99 arrival lateness was 0.4-0.8
ms (one MTU frame is 1.0 ms there) and a busier scenario went past it. Under ``SCHED_FIFO``
a woken shell preempts every normal task at once: the same run gave 0.13-0.21 ms.

The lowest real-time priority is enough (the shells only need to beat normal tasks, and
stay below the kernel's own real-time threads), children do not inherit it
(``SCHED_RESET_ON_FORK``), and it is asked for only when the kernel throttles real-time
tasks (``sched_rt_runtime_us``, 95 % of each second by default): a shell that looped
without sleeping would then still leave the rest of the machine a share of every core.
Where the process may not (no ``CAP_SYS_NICE``, e.g. in a container), it runs as before
and says so; the fidelity verdict judges the run either way.
"""
from __future__ import annotations

import os
from pathlib import Path

PRIORITY = 1
RT_RUNTIME = Path("/proc/sys/kernel/sched_rt_runtime_us")


def realtime() -> str:
    """Put this process under ``SCHED_FIFO`` if it may and the kernel throttles real-time
    tasks; how it is scheduled now, in words, for its log."""
    try:
        throttled = int(RT_RUNTIME.read_text()) >= 0
    except (OSError, ValueError):
        throttled = False
    if not throttled:
        return (f"normal scheduling ({RT_RUNTIME} unreadable or -1: real-time tasks are not "
                "throttled here, so none is started)")
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK,
                              os.sched_param(PRIORITY))
    except OSError as e:
        return f"normal scheduling (SCHED_FIFO refused: {e.strerror})"
    return f"SCHED_FIFO priority {PRIORITY}"
