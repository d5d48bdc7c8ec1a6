"""cancel_and_wait against a task that drops a cancellation, as asyncio.wait_for does on Python 3.11 when its
future completes in the same turn (the controller queue that kept a broker from stopping); periodic tasks
that wake together (sleep_to_beat)."""

import asyncio
import time

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


def test_a_task_woken_late_just_before_anothers_beat_wakes_on_it_with_the_other():
    """The process held (as a loaded machine holds it) from a beat of the 50 ms task until about the next beat,
    which both tasks share: the 50 ms task, woken that late (just before that beat or just after it, the beat's
    timer not yet run), wakes on it in the same turn as the 100 ms one; neither wakes twice on a beat."""
    async def main():
        loop = asyncio.get_running_loop()
        turn = 0

        def count_turns():
            nonlocal turn
            turn += 1
            ticker[0] = loop.call_soon(count_turns)

        ticker = [loop.call_soon(count_turns)]
        now = round(loop.time() * 1000)
        shared = now - now % 100 + 300   # a beat of both, at least 200 ms away
        loop.call_at((shared - 50) / 1000, time.sleep, 0.049)   # (the loop held: no task runs meanwhile)
        wakes: dict[int, list[tuple[int, int]]] = {50: [], 100: []}

        async def every(period: int, until: int):
            while not wakes[period] or wakes[period][-1][1] < until:
                await sleep_to_beat(period / 1000)
                wakes[period].append((turn, round(loop.time() * 1000)))

        await asyncio.gather(every(50, shared + 50), every(100, shared))
        ticker[0].cancel()
        return shared, wakes

    shared, wakes = uvloop.run(main())
    together = [t for t, at in wakes[100] if at >= shared]
    assert len(together) == 1 and together[0] in [t for t, _ in wakes[50]], (shared, wakes)
    for period in (50, 100):
        turns = [t for t, _ in wakes[period]]
        assert len(set(turns)) == len(turns), wakes   # (never twice in one turn: once per beat)


def test_a_task_cancelled_asleep_leaves_the_others_on_its_beat_asleep_to_it():
    async def main():
        woken = []

        async def sleeper(name):
            await sleep_to_beat(0.05)
            woken.append(name)

        first, second = asyncio.create_task(sleeper("first")), asyncio.create_task(sleeper("second"))
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
        return first.cancelled(), woken

    assert uvloop.run(main()) == (True, ["second"])
