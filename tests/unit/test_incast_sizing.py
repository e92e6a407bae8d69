"""checks.congestion.Incast sizing: what the congestion checks write, from the lab's
numbers (no lab needed)."""
from __future__ import annotations

import dataclasses

from rocelab.checks import congestion as cg
from rocelab.traffic import patterns

MTU = 4096
POOL = 112_249_856  # ref-pfc-400g's ingress pool


def incast(senders: int, upstream: int) -> cg.Incast:
    return cg.Incast("h1", tuple(f"h{i}" for i in range(2, 2 + senders)), "leaf1",
                     "Ethernet0", tuple((f"eth{i}", "x", "eth1") for i in range(upstream)),
                     26, 3, 3, 3, POOL)


def test_an_oversubscribed_leaf_is_entered_by_fewer_ports_than_senders():
    assert incast(5, 3).inputs == 3  # two local senders and one shared uplink
    assert incast(3, 3).inputs == 3
    assert incast(1, 4).inputs == 2  # never fewer than two: one input cannot overflow


def test_sized_by_inputs_the_queue_can_outgrow_the_pool():
    """(inputs - 1) inputs' worth of excess, each a sender's whole volume, is OVERLOAD x the
    pool; by senders it is not, when remote senders share an uplink."""
    wide = incast(5, 3)
    qps, messages = 4, 3
    by_inputs = wide.message_size(qps, messages, MTU, inputs=wide.inputs) * qps * messages
    by_senders = wide.message_size(qps, messages, MTU) * qps * messages
    assert (wide.inputs - 1) * by_inputs >= cg.OVERLOAD * POOL
    assert (wide.inputs - 1) * by_senders < POOL


def test_enough_qps_to_have_the_pool_in_flight():
    wide = incast(5, 3)
    qps = wide.qps_to_overflow(4, MTU)
    in_flight = len(wide.senders) * qps * patterns.WINDOW * (MTU + patterns.FRAME_OVERHEAD)
    assert qps > 4 and in_flight >= cg.OVERLOAD * POOL
    assert in_flight - len(wide.senders) * patterns.WINDOW * (MTU + patterns.FRAME_OVERHEAD) \
        < cg.OVERLOAD * POOL  # the fewest that do
    small = dataclasses.replace(wide, pool=12_766_208)  # the default lab's pool
    assert small.qps_to_overflow(4, MTU) == 4  # four QPs already hold it in flight
