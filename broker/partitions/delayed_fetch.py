"""A long-polling fetch parked in the fetch purgatory, and what lets an idle session's round skip reading.

An idle replicated cluster pays per fetch round, and an incremental fetch
session (KIP-227) covers every partition of the session at each round: a
follower's, every partition it follows from this leader; a consumer's, every
partition it reads here. A partition *at rest* for the fetcher (it is at its
bound, nothing the session last told it has moved, the leader epoch is the
one it fetches at, and a follower is in the ISR) needs no read: a follower's
fetch is noted (caught up now, for the ISR's lag check) and the partition is
only listened on by its session (broker/partitions/session_rest.py), so that
an append or a leadership change still completes the parked fetch. Any doubt
takes the full read path.
"""

from __future__ import annotations

import itertools
from typing import Callable

from kbroker.broker.partitions.purgatory import DelayedOperation
from kbroker.broker.partitions.replica_manager import FetchPartitionRequest, FetchPartitionResult, ReplicaManager


def at_rest(manager: ReplicaManager, req: FetchPartitionRequest, replica_id: int, isolation_level: int,
            now_ms: int, told) -> bool:
    """Whether the partition is at rest for this fetcher (a read would answer nothing it does not know), a
    follower's fetch then noted as the read would note it.

    ``told``: what the fetcher's session last sent it (``high_watermark``, ``last_stable_offset``,
    ``log_start_offset``). The caller passes only a partition whose position the request did not change (a
    follower's last fetched epoch was checked for divergence by the read that answered that position, at
    this same leader epoch). At rest: this broker leads it at the epoch the fetcher names (or it names
    none), the fetcher is at its bound (a follower at the log end, with the high watermark there too and in
    the ISR; a consumer at the high watermark, or the last stable offset reading committed), and none of
    those offsets moved."""
    partition = manager.partitions.get((req.topic, req.partition))
    if not _unmoved(partition, req, replica_id, isolation_level, told):
        return False
    if replica_id >= 0:
        end = partition.log.log_end_offset
        state = partition.followers.get(replica_id)
        if told.high_watermark != end or state is None or state.log_end_offset != end or \
                replica_id not in partition.isr:
            return False
        # What update_follower records for a fetch at the leader's end: caught up now.
        state.last_caught_up_ms = state.last_fetch_ms = now_ms
        state.last_fetch_leader_leo = end
    return True


def _unmoved(partition, req: FetchPartitionRequest, replica_id: int, isolation_level: int, told) -> bool:
    """Led here at the epoch the fetcher names (or it names none), the fetcher at its bound, and the offsets
    it was told (a session's ``CachedPartition``, or a first read's result) still the partition's. (A
    consumer past its bound is not: a read answers it, with OFFSET_OUT_OF_RANGE past the log end.)"""
    if partition is None or not partition.is_leader or req.current_leader_epoch not in (-1, partition.leader_epoch):
        return False
    plog = partition.log
    return (req.fetch_offset == partition.fetch_bound(replica_id, isolation_level)
            and plog.high_watermark == told.high_watermark and plog.log_start_offset == told.log_start_offset
            and plog.last_stable_offset == told.last_stable_offset)


class DelayedFetch(DelayedOperation):
    """A fetch waiting for ``min_bytes`` of data, or for ``max_wait_ms`` to pass.

    ``initial``: what the first read of the same partitions found. At completion a partition is read again
    only if it may answer otherwise now (records below its bound, another high watermark, last stable or
    log start offset, another leader); the others keep their first answer, as an idle follower's or
    consumer's long poll over many partitions then costs one read of each, not two. (Kafka likewise notes a
    follower's position at the first read only.)

    ``quiet``: partitions at rest for the fetcher (``at_rest``), each with what its session last told the
    fetcher. They complete the wait as the read ones do, and at completion only those that moved are read
    and answered: an unmoved one is in no answer of an incremental session.

    ``respond``: makes the response from the partitions' results, at completion; the operation's future
    then carries that response (the connection sends it as it is done, with no future in between)."""

    def __init__(self, manager: ReplicaManager, requests: list[FetchPartitionRequest], *, replica_id: int,
                 isolation_level: int, max_bytes: int, min_bytes: int, timeout_ms: int,
                 respond: Callable[[list[FetchPartitionResult]], dict], from_follower: bool = False,
                 initial: list[FetchPartitionResult] | None = None,
                 quiet: list[tuple[FetchPartitionRequest, object]] = (), quiet_index: dict | None = None) -> None:
        super().__init__(timeout_ms)
        self.respond = respond
        self.initial = initial
        self.manager = manager
        self.from_follower = from_follower
        self.requests = requests
        self.quiet = quiet
        self.replica_id = replica_id
        self.isolation_level = isolation_level
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes
        self.woken = False   # an event on a watched partition came (an append, a high watermark moved...)
        # ``quiet_index``: the quiet partitions by key, each entry's first two items the request and what the
        # session told (the session's own index, kept from round to round: none is made per fetch)
        self.quiet_index = quiet_index
        self._by_key: dict | None = None   # each read partition's request, made at the first event on one
        self._woken_on: set = set()   # the partitions whose events were looked at alone
        self._looked_all = False   # a walk over every partition came after the fetch parked

    def try_complete(self) -> bool:
        self.woken = True
        self._looked_all = self._looked_all or self._timer is not None   # (the timer is set once it parks)
        accumulated = 0
        for req in itertools.chain(self.requests, (q for q, _ in self.quiet)):
            found = self._found(req)
            if found is None:
                return self.force_complete()
            accumulated += found
            if accumulated >= self.min_bytes:
                return self.force_complete()
        return False

    def try_complete_on(self, key) -> bool:
        """An event on partition ``key``. A wait for one byte is looked at there alone: each other partition was
        found with nothing to send when the fetch parked or at its own last event, and whatever changes that
        comes as an event on it. A walk over all the fetch's partitions at each event made a produce to one
        partition cost a parked follower fetch of a 5,000-partition session a walk to it. A wait for more bytes
        adds up every partition's, and so does a follower's fetch under a replication throttle (a throttle
        that lifts announces nothing)."""
        quota = self.manager.leader_quota
        if self.min_bytes > 1 or (self.replica_id >= 0 and quota is not None and quota.limited) or \
                (self.quiet and self.quiet_index is None):
            return self.try_complete()
        if self._by_key is None:
            self._by_key = {(r.topic, r.partition): r for r in self.requests}
        req = self._by_key.get(key)
        if req is None:
            entry = self.quiet_index.get(key) if self.quiet_index is not None else None
            if entry is None:
                return self.try_complete()
            req = entry[0]
            self._woken_on.add(key)
        self.woken = True
        return self.force_complete() if self._found(req) != 0 else False

    def _found(self, req) -> int | None:
        """The bytes ``req``'s partition adds to the wait, or None when the fetch is to be answered now (the
        partition moved or went, its offset is out of range, or a record is there and one byte is enough)."""
        partition = self.manager.get(req.topic, req.partition)
        if partition is None or not (partition.is_leader or (self.from_follower and partition.leader_id >= 0)):
            return None   # the topic went away or moved: answer with the error now
        if self.manager.leader_throttled(partition, self.replica_id):
            return 0   # its bytes would not be sent: they do not complete the wait (Kafka's rule)
        plog = partition.log
        bound = partition.fetch_bound(self.replica_id, self.isolation_level)
        if req.fetch_offset > plog.log_end_offset or req.fetch_offset < plog.log_start_offset:
            return None
        if req.fetch_offset < bound:
            if self.min_bytes <= 1:
                return None   # a record below the bound is a byte: no need to read it twice
            found = plog.read(req.fetch_offset, req.max_bytes, bound, True)
            return found.length if found is not None else 0
        return 0

    def on_complete(self):
        results = self._read(self.requests) if self.initial is None else self._again(self.requests, self.initial)
        # Unwoken, no quiet partition moved (each move wakes the fetch its session parked); one that moved unseen
        # (a change that wakes nothing) is still unlike what its session was told, and is read once the session
        # looks at it again (at the latest session_rest.REVALIDATE_MS later).
        # Woken by events looked at alone, only their partitions can have moved.
        if not self.woken:
            looked = ()
        elif self._looked_all or self.quiet_index is None:
            looked = self.quiet
        else:
            looked = [self.quiet_index[key][:2] for key in self._woken_on if key in self.quiet_index]
        moved = [req for req, told in looked
                 if not _unmoved(self.manager.get(req.topic, req.partition), req, self.replica_id,
                                 self.isolation_level, told)]
        if moved:
            results = results + self._read(moved, _size(results))
        return self.respond(results)

    def _again(self, requests, initial) -> list[FetchPartitionResult]:
        again = [i for i, (req, found) in enumerate(zip(requests, initial)) if not self._holds(req, found)]
        results = list(initial)
        # (a kept answer has no records: what had records is read again, so the re-read starts from none)
        for i, result in zip(again, self._read([requests[i] for i in again])):
            results[i] = result
        return results

    def _read(self, requests, used: int = 0):
        """``used``: bytes the answer already carries (the response's ``max_bytes`` bounds them all)."""
        return self.manager.fetch(requests, replica_id=self.replica_id, isolation_level=self.isolation_level,
                                  max_bytes=self.max_bytes, from_follower=self.from_follower, used=used)

    def _holds(self, req: FetchPartitionRequest, found: FetchPartitionResult) -> bool:
        """The first read's answer is still the answer: it had nothing to send, and nothing moved since."""
        if found.error or found.records is not None or found.diverging_epoch is not None:
            return False
        return _unmoved(self.manager.get(req.topic, req.partition), req, self.replica_id, self.isolation_level,
                        found)


def _size(results) -> int:
    return sum(r.records.length for r in results if r.records is not None)
