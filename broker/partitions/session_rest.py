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
without a look. A follower's fetch of them is still caught up, as ``at_rest``
notes it, but noted once per round for them all (``round_ms``), each of their
``ReplicaState``s reading it through its ``rest`` while it is here.

Invariants: a partition is in ``partitions`` only while the session listens
on it, and its follower's ``ReplicaState`` (if a follower's) points here
exactly as long; ``round_ms`` is the last round that took the partitions
here as at rest; a marked one is looked at in full by the next round; every
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
        self.round_ms = 0   # the last round that took the partitions here as at rest: each follower caught up then
        self.parked = None   # the session's fetch parked now, woken by an event on a partition at rest
        self._quiet: list | None = None   # (request, cached) of every partition at rest, made once per change

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
        self.round_ms = now_ms
        return self._quiet

    def quiet_except(self, looked: set) -> list:
        """The (request, cached) of every partition at rest but those in ``looked`` (which the round looks at
        itself): a round with a few marked partitions among many at rest takes the others in one pass."""
        return [(req, cached) for tp, (req, cached, _) in self.partitions.items() if tp not in looked]

    def keep(self, tp: tuple[str, int]) -> bool:
        """Whether ``tp`` is at rest and unmarked (taken as at rest without a look)."""
        return tp in self.partitions and tp not in self.marked

    def rested(self, now_ms: int) -> None:
        """The round ends: the partitions here were at rest at ``now_ms`` (each follower's fetch caught up)."""
        self.round_ms = now_ms

    def enter(self, tp: tuple[str, int], req, cached, state) -> None:
        entry = self.partitions.get(tp)
        if entry is None:
            self.purgatory.listen(tp, self.on_event)
        elif entry[0] is req and entry[1] is cached and entry[2] is state and (state is None or state.rest is self):
            return   # (a full look finding it at rest again, as it was: nothing to make anew)
        elif entry[2] is not state:   # (a new leadership's follower state: the old one is let go)
            _let_go(entry[2], self)
        self.partitions[tp] = (req, cached, state)
        if state is not None:
            if state.rest is not None and state.rest is not self:
                state.fold()   # (another session of the same follower held it: its rounds so far count)
            state.rest = self
        self._quiet = None

    def leave(self, tp: tuple[str, int]) -> None:
        entry = self.partitions.pop(tp, None)
        if entry is not None:
            self.purgatory.unlisten(tp, self.on_event)
            _let_go(entry[2], self)
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


def _let_go(state, rest: SessionRest) -> None:
    """A follower's state leaves ``rest`` with its rounds written in (None: a consumer's)."""
    if state is not None and state.rest is rest:
        state.fold()
        state.rest = None
