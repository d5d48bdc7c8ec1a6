"""Incremental fetch sessions (KIP-227): a client fetching many partitions sends, after its first full fetch,
only the partitions whose fetch position changed, and is answered only for those with something new.

A request's ``(session_id, session_epoch)`` says what it is:

* ``(0, -1)``: a full fetch with no session (what kbroker's own followers send);
* ``(0, 0)``: a full fetch that opens a session; the answer carries its id;
* ``(id, -1)``: close the session, then a full fetch with none; ``(id, 0)``: close it and open a new one;
* ``(id, n > 0)``: an incremental fetch: ``n`` must be the session's next epoch (else
  INVALID_FETCH_SESSION_EPOCH; an unknown id is FETCH_SESSION_ID_NOT_FOUND). Its partitions are added or
  updated, ``forgotten_topics_data`` removed, and the fetch covers every partition of the session. One that
  leaves the session without partitions closes it and is answered as a fetch with none (session id 0), and
  one whose version names topics otherwise than the request that opened the session (by id from v13) is
  FETCH_SESSION_TOPIC_ID_ERROR, as Kafka's.

Invariants: a session answers a partition whenever it has records, an error, or a high watermark, last
stable offset or log start offset other than the one last sent, so that a client never misses a change;
at most ``max.incremental.fetch.session.cache.slots`` sessions live. When a new one needs room, Kafka's
FetchSessionCache rules decide which goes, if any: the least recently used session, if it has been idle
``min.incremental.fetch.session.eviction.ms``; else the least valuable session that the new one outranks, a
follower's outranking a consumer's and a session of more partitions one of fewer, where a follower's session
may take any consumer's, and any session one created that long ago (so that a follower keeps its session
beside many consumers, and a large session is not starved by small ones that fetch all the time).
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from dataclasses import dataclass, field

FULL_EPOCH, CLOSE_EPOCH = 0, -1


def next_epoch(epoch: int) -> int:
    """The session epoch after ``epoch`` (KIP-227: past the int32 maximum it wraps to 1, 0 being a full fetch's)."""
    return epoch + 1 if epoch < 0x7FFFFFFF else 1


@dataclass(slots=True)
class CachedPartition:
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    high_watermark: int = -2   # what the client was last told (-2: nothing yet, so the first answer includes it)
    last_stable_offset: int = -2
    log_start_offset: int = -2
    topic_id: bytes | None = None   # the id the client named it by (Fetch v13+): checked again at every fetch
    request: object = None   # the FetchPartitionRequest of this position, made once (None: not made yet)


@dataclass
class FetchSession:
    session_id: int
    is_follower: bool
    partitions: "OrderedDict[tuple[str, int], CachedPartition]" = field(default_factory=OrderedDict)
    epoch: int = 1          # the epoch the next incremental request must carry
    last_used: float = 0.0
    created: float = 0.0
    uses_topic_ids: bool = False   # opened by Fetch v13+: every request in it must name topics by id
    rest: object = None   # its partitions at rest (a SessionRest, made by the fetch handler's first round)
    _topic_ids: dict | None = None   # topic_ids(), made once per change of the partitions (None: not made yet)

    def update(self, topics, forgotten, by_id: bool = False) -> None:
        """``by_id`` (Fetch v13+): each topic carries ``topic_id`` beside the name it was resolved to, and a
        forgotten topic is named by id alone (its name may be another topic's by now)."""
        if topics or forgotten:
            self._topic_ids = None
        for t in topics:
            topic_id = bytes(t.topic_id) if by_id else None
            for p in t.partitions:
                key = (t.topic, p.partition)
                known = self.partitions.get(key)
                if known is None:
                    self.partitions[key] = CachedPartition(p.fetch_offset, p.partition_max_bytes,
                                                           p.current_leader_epoch, p.last_fetched_epoch,
                                                           topic_id=topic_id)
                else:
                    known.fetch_offset, known.max_bytes = p.fetch_offset, p.partition_max_bytes
                    known.current_leader_epoch, known.last_fetched_epoch = p.current_leader_epoch, \
                        p.last_fetched_epoch
                    known.topic_id = topic_id
                    known.request = None
        for t in forgotten or []:
            if by_id:
                gone = {bytes(t.topic_id)}
                for key in [k for k, c in self.partitions.items() if c.topic_id in gone and k[1] in t.partitions]:
                    self._forget(key)
                continue
            for index in t.partitions:
                self._forget((t.topic, index))

    def topic_ids(self) -> dict:
        """Topic name -> the id the client names it by (Fetch v13+; None before), kept from round to round: an
        idle session's round would otherwise make it anew from every partition."""
        if self._topic_ids is None:
            self._topic_ids = {t: c.topic_id for (t, _), c in self.partitions.items()}
        return self._topic_ids

    def _forget(self, key) -> None:
        self.partitions.pop(key, None)
        if self.rest is not None:
            self.rest.leave(key)

    def close(self) -> None:
        """Gone from the cache: its partitions at rest are no longer listened on."""
        if self.rest is not None:
            self.rest.close()

    def answer(self, results, incremental: bool) -> list:
        """The results to send: in an incremental answer only the partitions with something new. Records what
        the client now knows (and, past records sent, where it will fetch next). A partition an incremental
        answer sends records of moves to the end of the session, as in Kafka: the next round reads the others
        first, so a response's byte bound cannot keep serving the same partitions."""
        kept = []
        served = []
        for r in results:
            cached = self.partitions.get((r.topic, r.partition))
            if cached is None:
                kept.append(r)
                continue
            has_records = r.records is not None and r.records.length > 0
            changed = (cached.high_watermark != r.high_watermark or cached.last_stable_offset != r.last_stable_offset
                       or cached.log_start_offset != r.log_start_offset)
            cached.high_watermark, cached.last_stable_offset = r.high_watermark, r.last_stable_offset
            cached.log_start_offset = r.log_start_offset
            if not incremental or has_records or changed or r.error or r.diverging_epoch is not None:
                kept.append(r)
            if incremental and has_records:
                served.append((r.topic, r.partition))
        for key in served:
            self.partitions.move_to_end(key)
        return kept


class FetchSessionCache:
    def __init__(self, slots: int = 1000, min_eviction_ms: int = 120000, clock=time.monotonic) -> None:
        self.slots = slots
        self.min_eviction_s = min_eviction_ms / 1000
        self.clock = clock
        self.sessions: "OrderedDict[int, FetchSession]" = OrderedDict()   # least recently used first
        self.created = self.evicted = 0   # (metrics)

    def get(self, session_id: int) -> FetchSession | None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.last_used = self.clock()
            self.sessions.move_to_end(session_id)
        return session

    def remove(self, session_id: int) -> None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.close()

    def create(self, is_follower: bool, size: int = 0) -> FetchSession | None:
        """A new session of ``size`` partitions, or None when every slot is taken by a session it may not evict
        (the client then goes on with full fetches, session id 0, as Kafka answers)."""
        if self.slots <= 0:
            return None
        if len(self.sessions) >= self.slots and not self._evict_one(is_follower, size):
            return None
        session_id = random.randint(1, 0x7FFFFFFF)
        while session_id in self.sessions:
            session_id = random.randint(1, 0x7FFFFFFF)
        now = self.clock()
        session = FetchSession(session_id, is_follower, last_used=now, created=now)
        self.sessions[session_id] = session
        self.created += 1
        return session

    def _evict_one(self, for_follower: bool, size: int) -> bool:
        now = self.clock()
        least_recent = next(iter(self.sessions.values()))
        if now - least_recent.last_used >= self.min_eviction_s:
            return self._evict(least_recent)
        settled = [s for s in self.sessions.values() if now - s.created >= self.min_eviction_s
                   or (for_follower and not s.is_follower)]
        if not settled:
            return False
        least = min(settled, key=lambda s: (s.is_follower, len(s.partitions), s.session_id))
        if (for_follower, size) <= (least.is_follower, len(least.partitions)):
            return False
        return self._evict(least)

    def _evict(self, session: FetchSession) -> bool:
        del self.sessions[session.session_id]
        session.close()
        self.evicted += 1
        return True
