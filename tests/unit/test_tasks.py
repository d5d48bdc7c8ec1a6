"""cancel_and_wait against a task that drops a cancellation, as asyncio.wait_for does on Python 3.11 when its
future completes in the same turn (the controller queue that kept a broker from stopping)."""

import asyncio

from kbroker.client.tasks import cancel_and_wait


async def test_a_task_that_swallows_one_cancellation_still_ends():
    queue: asyncio.Queue = asyncio.Queue()
    rounds = []

    async def loop_forever():
        while True:
            try:
                await queue.get()
            except asyncio.CancelledError:
                rounds.append("swallowed")   # what a lost cancellation looks like from outside
                if len(rounds) > 1:
                    raise
                continue

    task = asyncio.create_task(loop_forever())
    await asyncio.sleep(0)
    assert await cancel_and_wait(task, timeout=2)
    assert task.cancelled() and rounds == ["swallowed", "swallowed"]


async def test_a_task_that_never_ends_is_given_up_on_after_the_timeout():
    released = False

    async def stubborn():
        while not released:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                continue

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    assert not await cancel_and_wait(task, timeout=0.3)
    released = True   # now it may end, so that the test's event loop can close
    assert await cancel_and_wait(task, timeout=2)
