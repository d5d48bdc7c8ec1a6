"""The broker process's event loop at exit."""

import asyncio
import time

import structlog
import uvloop

from kbroker.broker.main import close_loop


def test_the_loop_closes_although_a_task_swallows_its_cancellation():
    """Tasks left once the broker stopped are cancelled; one that ignores it is named and left behind, so that
    the process exits instead of waiting on it for ever (asyncio.run's clean-up would)."""
    loop = uvloop.new_event_loop()

    async def stubborn():
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                continue

    async def started():
        return loop.create_task(stubborn(), name="stubborn"), loop.create_task(asyncio.sleep(3600), name="polite")

    stubborn_task, polite_task = loop.run_until_complete(started())
    began = time.monotonic()
    with structlog.testing.capture_logs() as logged:
        close_loop(loop, timeout=0.2)
    assert time.monotonic() - began < 5
    assert loop.is_closed() and polite_task.cancelled() and not stubborn_task.done()
    stuck = [e for e in logged if e["event"] == "shutdown_task_stuck"]
    assert [e["task"] for e in stuck] == ["stubborn"], logged
    assert any("stubborn" in frame for frame in stuck[0]["waiting_in"]), stuck
