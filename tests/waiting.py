"""Waiting for what a broker finishes after it answers, from async tests (sync ones: ``tests.cluster.wait_until``)."""

from __future__ import annotations

import asyncio


async def settled(ask, ready, timeout: float = 20.0):
    """``await ask()`` until ``ready(answer)``, and that answer (the last one once ``timeout`` passed: the test's
    own assertion then says what was wrong): for what Kafka's controller or a coordinator finishes after it
    answers (an auto-created topic, the offsets topic behind a first FindCoordinator, a group's shard loading)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        answer = await ask()
        if ready(answer) or loop.time() > deadline:
            return answer
        await asyncio.sleep(0.05)
