"""Purgatory: requests that must wait (acks=all produce, long-poll fetch) park here.

A DelayedOperation is completed exactly once: by ``try_complete`` succeeding
when an event it watches fires (an append, a high-watermark move), or by its
timer expiring. Nothing polls; the timers are the event loop's.

Whoever waits may give up first: when the operation's future is cancelled
(its connection closed), the operation leaves every watch list and its timer
at once and never completes, so a closed connection leaves nothing parked.

A listener (``listen``) is told of every event on its key, before the operations
watching it are tried, until it stops listening: what outlives one operation
(a fetch session's partitions at rest, broker/partitions/session_rest.py).
"""

from __future__ import annotations

import asyncio
from typing import Any, Hashable


class DelayedOperation:
    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.completed = False
        self._timer: asyncio.TimerHandle | None = None
        self._watched: list[tuple["Purgatory", Hashable]] = []
        self.future.add_done_callback(self._abandoned)

    def try_complete(self) -> bool:
        """Complete if the condition holds (call ``force_complete``); return whether it did."""
        raise NotImplementedError

    def try_complete_on(self, key: Hashable) -> bool:
        """``try_complete`` after an event on ``key``: an operation that can tell what that event may have
        changed looks there alone."""
        return self.try_complete()

    def on_complete(self) -> Any:
        """The response, computed at completion time."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        pass

    def _leave(self) -> None:
        self.completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for purgatory, key in self._watched:
            purgatory._unwatch(key, self)
        self._watched = []

    def _abandoned(self, future: asyncio.Future) -> None:
        if future.cancelled() and not self.completed:
            self._leave()

    def force_complete(self) -> bool:
        if self.completed:
            return False
        self._leave()
        try:
            result = self.on_complete()
        except Exception as exc:  # the waiting request fails, not the broker
            if not self.future.done():
                self.future.set_exception(exc)
            return True
        if not self.future.done():
            self.future.set_result(result)
        return True

    def _expire(self) -> None:
        if not self.completed:
            self.on_expiration()
            self.force_complete()


class Purgatory:
    def __init__(self, name: str) -> None:
        self.name = name
        self.watchers: dict[Hashable, list[DelayedOperation]] = {}
        self.listeners: dict[Hashable, list] = {}

    def try_complete_else_watch(self, op: DelayedOperation, keys: list[Hashable]) -> bool:
        if op.try_complete():
            return True
        for key in keys:
            self.watchers.setdefault(key, []).append(op)
            op._watched.append((self, key))
        # The condition may have become true between the check and the watch.
        if op.try_complete():
            return True
        op._timer = asyncio.get_running_loop().call_later(op.timeout_ms / 1000, op._expire)
        return False

    def watch(self, op: DelayedOperation, keys: list[Hashable]) -> None:
        """Park ``op`` without trying it: for a caller that has just found it incomplete in the same
        synchronous step (nothing can have changed since: no other task ran), as a long poll whose first read
        found nothing. Saves the two passes of ``try_complete_else_watch`` over every key."""
        for key in keys:
            self.watchers.setdefault(key, []).append(op)
            op._watched.append((self, key))
        op._timer = asyncio.get_running_loop().call_later(op.timeout_ms / 1000, op._expire)

    def _unwatch(self, key: Hashable, op: DelayedOperation) -> None:
        _drop(self.watchers, key, op)

    def listen(self, key: Hashable, listener) -> None:
        """Call ``listener(key)`` at each event on ``key`` until ``unlisten``."""
        self.listeners.setdefault(key, []).append(listener)

    def unlisten(self, key: Hashable, listener) -> None:
        _drop(self.listeners, key, listener)

    def check_and_complete(self, key: Hashable) -> int:
        """Tell the listeners of ``key``, then try every operation watching it; completed ones leave every watch
        list."""
        listeners = self.listeners.get(key)
        if listeners:
            for listener in list(listeners):
                listener(key)
        ops = self.watchers.get(key)
        if not ops:
            return 0
        return sum(1 for op in list(ops) if not op.completed and op.try_complete_on(key))

    def watched(self) -> int:
        """Entries watching a key, listeners counted (Kafka's PurgatorySize: there an idle fetch session's
        parked fetch watches each of its partitions, here the session listens on them)."""
        return sum(len(v) for v in self.watchers.values()) + sum(len(v) for v in self.listeners.values())

    def shutdown(self) -> None:
        for ops in list(self.watchers.values()):
            for op in ops:
                op.force_complete()
        self.watchers.clear()
        self.listeners.clear()


def _drop(table: dict, key: Hashable, entry) -> None:
    """``entry`` leaves ``table[key]``'s list; an emptied list leaves the table."""
    entries = table.get(key)
    if entries is not None:
        try:
            entries.remove(entry)
        except ValueError:
            pass
        if not entries:
            del table[key]
