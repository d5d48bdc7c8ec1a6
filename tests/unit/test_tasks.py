"""cancel_and_wait against a task that drops a cancellation, as asyncio.wait_for does on Python 3.11 when its
future completes in the same turn (the controller queue that kept a broker from stopping); periodic tasks
that wake together (sleep_to_beat)."""

import asyncio

import uvloop

from kbroker.client.tasks import cancel_and_wait, sleep_to_beat


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


def test_periodic_tasks_whose_periods_divide_one_another_wake_together():
    """Two tasks sleeping to beats of 50 and 100 ms, started at different times: every wake of the slower one
    falls in the same turn of the loop as one of the faster one's, so a broker's periodic tasks cost one wake-up
    where they coincide. Turns are counted by a callback that runs once in each (uvloop's clock is read afresh
    on every call, so two tasks woken in one turn can read different milliseconds on a loaded machine)."""
    async def main():
        loop = asyncio.get_running_loop()
        turn = 0
        wakes: dict[float, list[int]] = {0.05: [], 0.1: []}

        def count_turns():
            nonlocal turn
            turn += 1
            ticker[0] = loop.call_soon(count_turns)

        ticker = [loop.call_soon(count_turns)]

        async def every(period: float, times: int, offset: float):
            await asyncio.sleep(offset)
            for _ in range(times):
                await sleep_to_beat(period)
                wakes[period].append(turn)

        await asyncio.gather(every(0.05, 12, 0.0), every(0.1, 4, 0.013))
        ticker[0].cancel()
        return wakes

    wakes = uvloop.run(main())
    assert len(wakes[0.1]) == 4 and all(t in wakes[0.05] for t in wakes[0.1]), wakes
