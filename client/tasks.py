"""Stopping asyncio tasks for sure.

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
