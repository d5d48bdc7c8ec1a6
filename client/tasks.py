"""Stopping asyncio tasks for sure, and periodic tasks that wake together.

On Python 3.11, ``asyncio.wait_for`` returns its future's result and drops a cancellation that arrives in
the same loop turn the future completes (fixed in 3.12). A task cancelled at that moment carries on: a
loop in it goes round again and ``await task`` never returns. A broker stuck at shutdown with an idle
event loop was this (a controller queue waiting on its next request).
"""

from __future__ import annotations

import asyncio


async def cancel_and_wait(task: asyncio.Task, timeout: float = 5.0) -> bool:
    """Cancel ``task`` until it ends, for at most ``timeout`` seconds; whether it ended."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not task.done():
        left = deadline - loop.time()
        if left <= 0:
            return False
        task.cancel()
        await asyncio.wait({task}, timeout=min(0.1, left))
    if not task.cancelled():
        task.exception()   # (retrieved, so asyncio does not log it as never retrieved)
    return True


async def sleep_to_beat(seconds: float) -> None:
    """Sleep until the event loop's clock is next at a multiple of ``seconds``: a process's periodic tasks whose
    periods divide one another then wake in the same turn of its loop instead of each at its own time (an idle
    broker's wake-ups each cost what they touch, cold: issue 30).

    Every task asleep until the same beat of a loop is woken by one timer, not each by its own: a timer is armed
    from the clock as read when it starts, so two timers aimed at one beat from readings a millisecond apart (a
    process descheduled between reading the clock and arming the timer) fire in two turns. A task woken late
    (a loaded machine can hold a process for tens of milliseconds) takes the next beat however near, or the
    beat just passed if it has not rung yet, so that it wakes with the tasks asleep until it rather than on a
    beat of its own. A beat rings once: a task never wakes twice on one."""
    period = round(seconds * 1000)
    if period <= 0:
        await asyncio.sleep(0)
        return
    loop = asyncio.get_running_loop()
    beats = _BEATS.get(loop)
    if beats is None:
        for closed in [other for other in _BEATS if other.is_closed()]:   # (closed with a task still asleep)
            del _BEATS[closed]
        beats = _BEATS[loop] = {}
    # In whole milliseconds, the event loop's timer unit (uvloop's clock reads whole milliseconds): a beat
    # computed in floating point could land a millisecond off another task's same beat. A beat rings at or
    # after its time, so one at or before now is either waiting to ring (this turn's timers not yet run) or gone.
    now = round(loop.time() * 1000)
    beat = now - now % period
    waiters = beats.get(beat)
    if waiters is None:
        beat += period
        waiters = beats.get(beat)
        if waiters is None:
            waiters = beats[beat] = []
            loop.call_at(beat / 1000, _ring, loop, beat)
    waiter = loop.create_future()
    waiters.append(waiter)
    await waiter


# Each event loop's beats (whole milliseconds of its clock) that tasks are asleep until: their futures.
_BEATS: dict = {}


def _ring(loop, beat: int) -> None:
    beats = _BEATS.get(loop, {})
    for waiter in beats.pop(beat, ()):
        if not waiter.done():   # (a task cancelled meanwhile)
            waiter.set_result(None)
    if not beats:
        _BEATS.pop(loop, None)
