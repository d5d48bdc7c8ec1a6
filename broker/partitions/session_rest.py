"""A fetch session's partitions at rest, kept from one round to the next.

An idle replicated cluster pays per round, and an incremental fetch session
(KIP-227) covers every partition of the session at each round. A partition
found at rest (``delayed_fetch.at_rest``) stays at rest until something
happens to it, and whatever can change what ``at_rest`` compares comes
through the fetch purgatory's ``check_and_complete`` for that partition: an
append, a high watermark, last stable or log start offset that moved, a
leadership or ISR change, a topic deleted or a log dir lost (the replica
manager's events). So the session listens on the fetch purgatory for the
partitions at rest, once, not at every round, and a round looks again only
at those an event has marked since, the others being taken as at rest
without a look (a follower's fetch of them still noted as caught up, as
``at_rest`` notes it).

Invariants: a partition is in ``partitions`` only while the session listens
on it; a marked one is looked at in full by the next round; every
``REVALIDATE_MS`` a round looks at all of them again whatever it heard (a
change that no event announces is then seen within that bound, as before
this cache it was seen the next round); a closed session listens on nothing.
"""

from __future__ import annotations

REVALIDATE_MS = 5000


class SessionRest:
    def __init__(self, purgatory) -> None:
        self.purgatory = purgatory
        # tp -> (its FetchPartitionRequest, its CachedPartition, the follower's ReplicaState or None: a consumer)
        self.partitions: dict[tuple[str, int], tuple] = {}
        self.marked: set[tuple[str, int]] = set()
        self.validated_ms = 0
        self.parked = None   # the session's fetch parked now, woken by an event on a partition at rest
        self._quiet: list | None = None   # (request, cached) of every partition at rest, made once per change
        self._followers: list | None = None   # the follower's ReplicaState of each (None: a consumer's), likewise

    def begin_round(self, now_ms: int) -> None:
        """Mark every partition when the last full look is ``REVALIDATE_MS`` old."""
        if now_ms - self.validated_ms >= REVALIDATE_MS:
            self.marked.update(self.partitions)
            self.validated_ms = now_ms

    def all_quiet(self, session_size: int, now_ms: int) -> list | None:
        """When every partition of the session is at rest and unmarked: their (request, cached), a
        follower's fetch of each noted as caught up now. Else None (a round looks partition by partition)."""
        if self.marked or len(self.partitions) != session_size:
            return None
        if self._quiet is None:
            self._quiet = [(req, cached) for req, cached, _ in self.partitions.values()]
            self._followers = [state for _, _, state in self.partitions.values() if state is not None]
        for state in self._followers:   # (as _note, inline: an idle round's one pass over the partitions)
            state.last_caught_up_ms = state.last_fetch_ms = now_ms
        return self._quiet

    def quiet_except(self, looked: set, now_ms: int) -> list:
        """The (request, cached) of every partition at rest but those in ``looked`` (which the round looks at
        itself), their followers' fetches noted as caught up now: a round with a few marked partitions among
        many at rest takes the others in one pass."""
        quiet = []
        for tp, (req, cached, state) in self.partitions.items():
            if tp not in looked:
                quiet.append((req, cached))
                _note(state, now_ms)
        return quiet

    def keep(self, tp: tuple[str, int], now_ms: int) -> bool:
        """Whether ``tp`` is at rest and unmarked (taken as at rest without a look), a follower's fetch of it
        then noted as caught up now."""
        entry = self.partitions.get(tp)
        if entry is None or tp in self.marked:
            return False
        _note(entry[2], now_ms)
        return True

    def enter(self, tp: tuple[str, int], req, cached, state) -> None:
        if tp not in self.partitions:
            self.purgatory.listen(tp, self.on_event)
        self.partitions[tp] = (req, cached, state)
        self._quiet = None

    def leave(self, tp: tuple[str, int]) -> None:
        if self.partitions.pop(tp, _ABSENT) is not _ABSENT:
            self.purgatory.unlisten(tp, self.on_event)
            self._quiet = None

    def on_event(self, tp: tuple[str, int]) -> None:
        self.marked.add(tp)
        parked = self.parked
        if parked is not None and not parked.completed:
            parked.try_complete_on(tp)

    def close(self) -> None:
        for tp in list(self.partitions):
            self.leave(tp)
        self.marked.clear()
        self.parked = None


def _note(state, now_ms: int) -> None:
    """What ``at_rest`` notes of a follower's fetch at the leader's end: caught up now (None: a consumer)."""
    if state is not None:
        state.last_caught_up_ms = state.last_fetch_ms = now_ms


_ABSENT = object()
