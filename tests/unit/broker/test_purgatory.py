import asyncio

from kbroker.broker.partitions.purgatory import DelayedOperation, Purgatory


class WaitFor(DelayedOperation):
    def __init__(self, state, needed, timeout_ms):
        super().__init__(timeout_ms)
        self.state, self.needed, self.expired = state, needed, False

    def try_complete(self):
        return self.state["value"] >= self.needed and self.force_complete()

    def on_complete(self):
        return ("expired" if self.expired else "done", self.state["value"])

    def on_expiration(self):
        self.expired = True


async def test_completes_when_the_watched_key_fires():
    purgatory = Purgatory("test")
    state = {"value": 0}
    op = WaitFor(state, 2, timeout_ms=10_000)
    assert not purgatory.try_complete_else_watch(op, ["k"])
    state["value"] = 1
    assert purgatory.check_and_complete("k") == 0
    state["value"] = 2
    assert purgatory.check_and_complete("k") == 1
    assert await op.future == ("done", 2)
    assert purgatory.watched() == 0


async def test_expires_and_leaves_every_watch_list():
    purgatory = Purgatory("test")
    op = WaitFor({"value": 0}, 1, timeout_ms=20)
    purgatory.try_complete_else_watch(op, ["a", "b"])
    assert purgatory.watched() == 2
    assert await asyncio.wait_for(op.future, 2) == ("expired", 0)
    assert purgatory.watched() == 0


async def test_already_satisfied_completes_without_watching():
    purgatory = Purgatory("test")
    op = WaitFor({"value": 5}, 1, timeout_ms=10_000)
    assert purgatory.try_complete_else_watch(op, ["k"])
    assert purgatory.watched() == 0


async def test_an_abandoned_operation_leaves_at_once_and_never_completes():
    purgatory = Purgatory("test")
    state = {"value": 0}
    op = WaitFor(state, 1, timeout_ms=20)
    purgatory.try_complete_else_watch(op, ["a", "b"])
    op.future.cancel()          # the connection that waited for it closed
    await asyncio.sleep(0)      # done callbacks run on the next pass
    assert purgatory.watched() == 0 and op.completed
    state["value"] = 1
    assert purgatory.check_and_complete("a") == 0
    await asyncio.sleep(0.05)   # past the timeout: the timer was cancelled with it
    assert op.future.cancelled() and not op.expired


async def test_watch_parks_without_trying_then_completes_on_its_key_or_expires():
    """``watch``: for a caller that has just found the operation incomplete (a long poll whose read found
    nothing): no try at parking; the key's event or the timer completes it as with try_complete_else_watch."""
    purgatory = Purgatory("test")
    state = {"value": 0}
    tries = []
    op = WaitFor(state, 1, timeout_ms=10_000)
    op.try_complete = lambda original=op.try_complete: tries.append(1) or original()
    purgatory.watch(op, ["a", "b"])
    assert tries == [] and purgatory.watched() == 2 and not op.future.done()
    state["value"] = 1
    assert purgatory.check_and_complete("b") == 1
    assert await op.future == ("done", 1) and purgatory.watched() == 0
    late = WaitFor({"value": 0}, 1, timeout_ms=20)
    purgatory.watch(late, ["a"])
    assert await asyncio.wait_for(late.future, 2) == ("expired", 0)
    assert purgatory.watched() == 0


async def test_a_listener_hears_every_event_on_its_key_before_the_operations_until_it_stops():
    """``listen``: what outlives one operation (a fetch session's partitions at rest) hears each event on its
    key, before the operations watching it are tried, and nothing once it stops listening."""
    purgatory = Purgatory("test")
    heard, state = [], {"value": 0}
    op = WaitFor(state, 1, timeout_ms=10_000)
    purgatory.watch(op, ["k"])
    purgatory.listen("k", lambda key: heard.append((key, op.completed)))
    purgatory.listen("other", heard.append)
    assert purgatory.check_and_complete("k") == 0 and heard == [("k", False)]
    state["value"] = 1
    assert purgatory.check_and_complete("k") == 1 and heard == [("k", False), ("k", False)]
    assert purgatory.check_and_complete("k") == 0 and len(heard) == 3   # (still listening, no operation left)
    assert purgatory.watched() == 2   # the two listeners
    purgatory.unlisten("other", heard.append)
    assert purgatory.check_and_complete("other") == 0 and len(heard) == 3 and "other" not in purgatory.listeners
    purgatory.shutdown()
    assert purgatory.listeners == {} and purgatory.watched() == 0


class PerKey(DelayedOperation):
    """Completes when any of its keys holds a value: an event is looked at on its own key."""

    def __init__(self, state, keys):
        super().__init__(10_000)
        self.state, self.keys, self.looked = state, keys, []

    def try_complete(self):
        self.looked.append(None)
        return any(self.state.get(k) for k in self.keys) and self.force_complete()

    def try_complete_on(self, key):
        self.looked.append(key)
        return bool(self.state.get(key)) and self.force_complete()

    def on_complete(self):
        return "done"


async def test_an_event_is_tried_on_its_own_key():
    """Each watching operation is told which key fired (a fetch parked on thousands of partitions then looks at
    the one an append moved, not at all of them)."""
    purgatory = Purgatory("test")
    state = {}
    op = PerKey(state, ["a", "b", "c"])
    assert not purgatory.try_complete_else_watch(op, op.keys)
    assert op.looked == [None, None]   # (the two full tries around watching)
    assert purgatory.check_and_complete("b") == 0
    state["c"] = 1
    assert purgatory.check_and_complete("c") == 1
    assert op.looked[2:] == ["b", "c"]
    assert await op.future == "done"
