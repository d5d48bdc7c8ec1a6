"""Helpers shared by the group handlers (not a handler: it declares no API)."""

from __future__ import annotations

import asyncio
from typing import Callable

from protocol.errors import ErrorCode


def answer_when_called(start: Callable[[Callable[[dict], None]], None], shape: Callable[[dict], dict]):
    """Run ``start(respond)``; the response dict if it answered at once, else a future of it.

    Coordinators answer JoinGroup and SyncGroup when the rebalance reaches
    the member, which may be long after the handler returns.
    """
    future = asyncio.get_running_loop().create_future()

    def respond(result: dict) -> None:
        if not future.done():
            future.set_result(shape(result))

    start(respond)
    return future.result() if future.done() else future


def coordinator_error(ctx, group_id: str) -> ErrorCode:
    return ctx.broker.group_coordinator_error(group_id)


def client_host(ctx) -> str:
    """Kafka reports a member's host as ``/address``."""
    return "/" + ctx.peer.rsplit(":", 1)[0]


def partition_exists(ctx):
    """A predicate: does this topic-partition exist (for offset commits)?"""
    topics = ctx.broker.metadata.topics

    def exists(topic: str, partition: int) -> bool:
        meta = topics.get(topic)
        return meta is not None and 0 <= partition < meta.partitions

    return exists
