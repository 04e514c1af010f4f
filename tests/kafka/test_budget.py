"""The request bytes budget (Kafka's queued.max.request.bytes, non-strict): a frame gets its bytes
while any are left, waiters are served in order as bytes come back, a cancelled waiter loses
nothing for the others."""

from __future__ import annotations

import asyncio

import pytest

from raftmeta.kafka.budget import RequestBytesBudget


@pytest.mark.asyncio
async def test_a_frame_is_granted_while_any_budget_is_left_so_the_total_exceeds_it_by_at_most_one_frame() -> None:
    budget = RequestBytesBudget(100)
    await budget.acquire(60)
    await budget.acquire(60)  # 40 were left: granted (Kafka's non-strict pool)
    assert budget.available_bytes == -20
    third = asyncio.create_task(budget.acquire(10))
    await asyncio.sleep(0)
    assert not third.done() and budget.waiting == 1
    budget.release(60)  # 40 left: the waiter gets its 10
    await third
    assert budget.available_bytes == 30 and budget.waiting == 0


@pytest.mark.asyncio
async def test_waiters_are_served_in_arrival_order() -> None:
    budget = RequestBytesBudget(10)
    await budget.acquire(10)
    order: list[str] = []

    async def take(name: str, size: int) -> None:
        await budget.acquire(size)
        order.append(name)

    first = asyncio.create_task(take("first", 10))
    second = asyncio.create_task(take("second", 1))
    await asyncio.sleep(0)
    budget.release(10)
    await first
    assert order == ["first"] and not second.done()  # first took all: second still waits
    budget.release(10)
    await second
    assert order == ["first", "second"]


@pytest.mark.asyncio
async def test_a_cancelled_waiter_gives_back_what_it_was_granted() -> None:
    budget = RequestBytesBudget(10)
    await budget.acquire(10)
    waiter = asyncio.create_task(budget.acquire(5))
    await asyncio.sleep(0)
    budget.release(10)  # granted to the waiter (5 taken) ...
    waiter.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert budget.available_bytes == 10 and budget.waiting == 0


def test_releasing_more_than_was_taken_is_a_bug() -> None:
    with pytest.raises(AssertionError):
        RequestBytesBudget(10).release(1)
