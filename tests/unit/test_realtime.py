"""fabric.realtime: when a live shell asks for SCHED_FIFO, and what it says when it may not
(no root needed: the kernel's answers are stood in for)."""
from __future__ import annotations

import os

import pytest

from rocelab.fabric import realtime


@pytest.fixture
def asked(monkeypatch):
    """What sched_setscheduler was asked for (nothing is changed for real)."""
    calls = []
    monkeypatch.setattr(os, "sched_setscheduler",
                        lambda pid, policy, param: calls.append((pid, policy,
                                                                 param.sched_priority)))
    return calls


def throttle(monkeypatch, tmp_path, value: str) -> None:
    path = tmp_path / "sched_rt_runtime_us"
    path.write_text(value + "\n")
    monkeypatch.setattr(realtime, "RT_RUNTIME", path)


def test_fifo_at_the_lowest_priority_not_inherited_when_throttled(monkeypatch, tmp_path, asked):
    throttle(monkeypatch, tmp_path, "950000")
    assert realtime.realtime() == "SCHED_FIFO priority 1"
    assert asked == [(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, 1)]


@pytest.mark.parametrize("value", ["-1", "garbage"])
def test_no_real_time_where_the_kernel_would_not_throttle_it(monkeypatch, tmp_path, asked,
                                                              value):
    throttle(monkeypatch, tmp_path, value)
    assert realtime.realtime().startswith("normal scheduling (")
    assert asked == []


def test_refused_runs_as_before_and_says_why(monkeypatch, tmp_path):
    throttle(monkeypatch, tmp_path, "950000")

    def refuse(pid, policy, param):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    assert realtime.realtime() == ("normal scheduling (SCHED_FIFO refused: Operation not "
                                   "permitted)")
