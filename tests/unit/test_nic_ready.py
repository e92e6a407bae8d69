"""The NIC's heaps (nic.ready): both forms give entries in (at, index, token) order,
ties in ``at`` and in index included, past an ArrayReady's first room, pushes and pops
interleaved; the order is checked against sorting the entries."""
from __future__ import annotations

import random
import weakref

import pytest

from rocelab.nic.ready import START, ArrayReady, TupleReady


@pytest.mark.parametrize("form", [TupleReady, ArrayReady])
@pytest.mark.parametrize("seed", range(20))
def test_entries_come_out_in_at_index_token_order(form, seed):
    rng = random.Random(seed)
    ready, pending, token = form(), [], 0
    for _ in range(rng.choice([10, START + 1, 6 * START])):
        for _ in range(rng.randint(0, 4)):
            token += 1
            # few distinct times and indices: ties on both keys
            entry = (rng.choice([0.0, 1e-6, 2.5e-6, rng.random()]), rng.randint(0, 5), token)
            ready.push(*entry, f"qp{token}")
            pending.append(entry)
        for _ in range(rng.randint(0, 3)):
            if not pending:
                assert len(ready) == 0
                break
            first = min(pending)
            assert (ready.first(), ready.first_token(), ready.first_at()) == (
                f"qp{first[2]}", first[2], first[0])
            ready.pop()
            pending.remove(first)
        assert len(ready) == len(pending)
    while pending:
        first = min(pending)
        assert ready.first_token() == first[2]
        ready.pop()
        pending.remove(first)
    assert len(ready) == 0


class _Item:
    pass


@pytest.mark.parametrize("form", [TupleReady, ArrayReady])
def test_a_popped_item_is_let_go(form):
    """The queue keeps no reference to what it no longer holds (a finished QP's objects
    are freed)."""
    ready, item, other = form(), _Item(), _Item()
    gone = weakref.ref(item)
    ready.push(1.0, 0, 1, item)
    ready.push(2.0, 0, 2, other)
    ready.pop()
    del item
    assert gone() is None and ready.first() is other
