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
    broker's wake-ups each cost what they touch, cold: issue 30). A beat less than a twentieth of a period away
    is skipped for the next (a timer that fired a hair early does not run its task twice on one beat)."""
    period = round(seconds * 1000)
    if period <= 0:
        await asyncio.sleep(0)
        return
    # In whole milliseconds, the event loop's timer unit (uvloop's clock reads whole milliseconds): a beat
    # computed in floating point could land a millisecond off another task's same beat, a turn of its own.
    delay = period - round(asyncio.get_running_loop().time() * 1000) % period
    await asyncio.sleep((delay if delay * 20 >= period else delay + period) / 1000)
