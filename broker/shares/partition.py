"""One share partition: a share group's view of one topic partition, kept by the partition's leader.

Records from the share-partition start offset (SPSO) on are in flight: each has a state and a delivery
count. A member's ShareFetch acquires available records under a time-limited lock; it acknowledges each
as accepted, released (available again) or rejected (archived), or its lock runs out and the record is
released. A record released after ``delivery_limit`` deliveries is archived instead. The start offset moves
past every record at its front that is acknowledged or archived.

Pure state, no I/O and no clock of its own: the manager passes times, reads the log, persists snapshots and
runs the lock timers.

Invariants:
* an offset below ``start`` is done for good; an offset in [start, end) is in ``records`` or was never a
  record (a gap: archived when seen);
* a record is ACQUIRED by exactly one member at a time, under one lock (its acquisition's id);
* a record's delivery count grows by one at each acquisition and never falls;
* every offset in [start, ``_scan_from``) is in ``records`` and not AVAILABLE: the search for the next offset to
  fetch begins there. Only a release makes a record available again, and it lowers the bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.protocol.errors import ErrorCode

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1


@dataclass
class InFlight:
    state: int
    delivery_count: int
    member: str | None = None
    lock: int = 0            # the acquisition it belongs to while ACQUIRED
    deadline_ms: int = 0


class SharePartition:
    def __init__(self, start_offset: int, *, state_epoch: int = 0, delivery_limit: int = 5,
                 max_in_flight: int = 2000) -> None:
        self.start = start_offset
        self.end = start_offset                 # the first offset never acquired
        self.records: dict[int, InFlight] = {}
        self.state_epoch = state_epoch
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight
        self._locks = 0
        # The (first, last) ranges each acquisition took, until its lock's timer is done with them: a timer looks
        # at its own records, not at every record in flight (2,000 timers of one record each walked 2,000 records
        # apiece). Ranges, not offsets: a lock's timer outlives its acknowledgement by the lock's duration.
        self._held: dict[int, list[tuple[int, int]]] = {}
        # Where the search for an available record starts. A member waiting at the limit of records in flight is
        # asked again at every write to the partition; a search from the start each time walked every record in
        # flight (2,000 by default) per write and doubled a produce's cost.
        self._scan_from = start_offset
        self.refusal: str | None = None   # (Kafka's words for the last acknowledgement refused, if known)

    # ------------------------------------------------------------------ persistence
    @classmethod
    def restore(cls, start_offset: int, batches, **kw) -> "SharePartition":
        """From a snapshot: every listed record as it was; one acquired then is available again."""
        sp = cls(start_offset, **kw)
        for first, last, state, count in batches:
            for offset in range(max(first, start_offset), last + 1):
                sp.records[offset] = InFlight(AVAILABLE if state == ACQUIRED else state, count)
                sp.end = max(sp.end, offset + 1)
        sp._advance()
        return sp

    def snapshot(self) -> list[tuple[int, int, int, int]]:
        """(first, last, state, delivery count) runs of the records in flight; an acquired record is written
        as available with its count, so a new leader hands it out again."""
        runs: list[list[int]] = []
        for offset in sorted(self.records):
            r = self.records[offset]
            state = AVAILABLE if r.state == ACQUIRED else r.state
            if runs and runs[-1][1] == offset - 1 and runs[-1][2] == state and runs[-1][3] == r.delivery_count:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, state, r.delivery_count])
        return [tuple(r) for r in runs]

    # ------------------------------------------------------------------ acquiring
    def next_fetch_offset(self) -> int:
        """The first offset a fetch must read from: the first available record, else the end."""
        for offset in range(max(self.start, self._scan_from), self.end):
            r = self.records.get(offset)
            if r is None or r.state == AVAILABLE:
                self._scan_from = offset
                return offset
        self._scan_from = self.end
        return self.end

    def fetch_offset(self, high_watermark: int) -> int | None:
        """Where a fetch reads from, or None when nothing can be acquired: nothing available below the high
        watermark, or only new records while ``max_in_flight`` are in flight already."""
        offset = self.next_fetch_offset()
        if offset >= high_watermark or (offset >= self.end and self.end - self.start >= self.max_in_flight):
            return None
        return offset

    def can_acquire(self) -> bool:
        """Whether a fetch may acquire here at all (Kafka's ``canAcquireRecords``): an available record within
        the records in flight, or fewer than ``max_in_flight`` of them; a partition that cannot takes no share
        of a fetch's bytes. (The count first: under the limit, no look for an available record.)"""
        return self.end - self.start < self.max_in_flight or self.next_fetch_offset() < self.end

    def move_start(self, log_start: int) -> None:
        """Records removed from the log (retention, DeleteRecords) leave the share partition too."""
        if log_start > self.start:
            for offset in [o for o in self.records if o < log_start]:
                del self.records[offset]
            self.start = log_start
            self.end = max(self.end, log_start)

    def acquire(self, member: str, batches: list[tuple[int, int, bool]], max_records: int, now_ms: int,
                lock_ms: int, mode: int = BATCH_OPTIMIZED, batch_size: int = 0
                ) -> tuple[int, list[tuple[int, int, int]]]:
        """Acquire available records of the log batches read (their (base, last) offsets, in order, and whether
        no consumer may see them: transaction markers, aborted records) for ``member``: (lock id,
        [(first, last, delivery count)]). In batch-optimized mode a batch is taken whole once begun; in
        record-limit mode no more than ``max_records``. A range holds contiguous records of one delivery
        count, and from ``batch_size`` records on (ShareFetch's BatchSize) it ends where a log batch does, as
        Kafka's acquired records are grouped."""
        self._locks += 1
        lock = self._locks
        taken: list[int] = []
        starts: set[int] = set()   # where in ``taken`` each log batch's records begin
        previous_last = None
        for base, last, hidden in batches:
            if previous_last is not None and base > previous_last + 1:
                self._archive_gap(previous_last + 1, base - 1)
            previous_last = last
            if hidden:
                self._archive_gap(base, last)
                continue
            if len(taken) >= max_records:
                break
            starts.add(len(taken))
            for offset in range(max(base, self.start), last + 1):
                if mode == RECORD_LIMIT and len(taken) >= max_records:
                    break
                r = self.records.get(offset)
                if r is None:
                    if offset >= self.end and offset - self.start >= self.max_in_flight:
                        break
                    r = self.records[offset] = InFlight(AVAILABLE, 0)
                    self.end = max(self.end, offset + 1)
                if r.state != AVAILABLE:
                    continue
                r.state, r.member, r.lock, r.deadline_ms = ACQUIRED, member, lock, now_ms + lock_ms
                r.delivery_count += 1
                taken.append(offset)
        ranges = self._ranges(taken, starts, batch_size)
        if ranges:
            self._held[lock] = [(first, last) for first, last, _ in ranges]
        return lock, ranges

    def _archive_gap(self, first: int, last: int) -> None:
        for offset in range(max(first, self.start), last + 1):
            if offset not in self.records:
                self.records[offset] = InFlight(ARCHIVED, 0)
        self.end = max(self.end, last + 1)

    def _ranges(self, offsets: list[int], starts=(), batch_size: int = 0) -> list[tuple[int, int, int]]:
        """Contiguous offsets of one delivery count as ranges; ``starts``: the indexes in ``offsets`` where a
        log batch begins, at which a range of ``batch_size`` records or more ends."""
        out: list[list[int]] = []
        for i, offset in enumerate(offsets):
            count = self.records[offset].delivery_count
            if out and out[-1][1] == offset - 1 and out[-1][2] == count and not (
                    batch_size > 0 and i in starts and offset - out[-1][0] >= batch_size):
                out[-1][1] = offset
            else:
                out.append([offset, offset, count])
        return [tuple(r) for r in out]

    # ------------------------------------------------------------------ acknowledging and releasing
    def acknowledge(self, member: str, batches: list[tuple[int, int, list[int]]], now_ms: int = 0,
                    lock_ms: int = 0) -> ErrorCode:
        """Apply (first, last, types) batches, all or nothing: every offset at or after the start must be
        acquired by ``member`` (INVALID_RECORD_STATE otherwise); the batches in order without overlapping, every
        type known and, while records are in flight, no offset past the last of them (INVALID_REQUEST, as
        Kafka's). ``refusal`` then holds Kafka's words for it, where kbroker knows them."""
        changes = []
        previous_last = -1
        self.refusal = None
        for first, last, types in batches:
            if last < first or first <= previous_last or (len(types) != 1 and len(types) != last - first + 1):
                return ErrorCode.INVALID_REQUEST   # (batches in order and apart, one type or one per record)
            previous_last = last
            if self.records and last >= self.end:
                self.refusal = f"Batch record not found. The {'first' if first >= self.end else 'last'} offset in " \
                               f"request is past acquired records."
                return ErrorCode.INVALID_REQUEST
            for i, offset in enumerate(range(first, last + 1)):
                kind = types[0] if len(types) == 1 else types[i]
                if kind not in (GAP, ACCEPT, RELEASE, REJECT, RENEW):
                    return ErrorCode.INVALID_REQUEST
                if offset < self.start:
                    continue   # done already (the start moved past it): nothing to change, as Kafka answers
                r = self.records.get(offset)
                if r is None or r.state != ACQUIRED or r.member != member:
                    if kind == GAP and r is not None and r.state == ARCHIVED:
                        continue   # a gap we archived already
                    return ErrorCode.INVALID_RECORD_STATE
                changes.append((offset, r, kind))
        for offset, r, kind in changes:
            if kind == RENEW:
                r.deadline_ms = now_ms + lock_ms
            elif kind == ACCEPT:
                self._settle(r, ACKNOWLEDGED)
            elif kind in (GAP, REJECT):
                self._settle(r, ARCHIVED)
            else:
                self._release(offset, r)
        self._advance()
        return ErrorCode.NONE

    def expire(self, lock: int, now_ms: int) -> int:
        """The lock of acquisition ``lock`` ran out: its records still acquired (and not renewed) go back."""
        released = 0
        for offset, r in self._still_held(lock):
            if r.deadline_ms <= now_ms:
                self._release(offset, r)
                released += 1
        self._advance()
        return released

    def next_deadline(self, lock: int) -> int | None:
        """When the lock's last renewed record runs out, if any of its records is still acquired; a lock with none
        is forgotten (its timer is done)."""
        deadlines = [r.deadline_ms for _, r in self._still_held(lock)]
        if not deadlines:
            self._held.pop(lock, None)
            return None
        return max(deadlines)

    def _still_held(self, lock: int):
        """(offset, record) of the lock's records still acquired under it."""
        for first, last in self._held.get(lock, ()):
            for offset in range(max(first, self.start), last + 1):
                r = self.records.get(offset)
                if r is not None and r.state == ACQUIRED and r.lock == lock:
                    yield offset, r

    def release_member(self, member: str) -> int:
        """A member left (or its share session closed): what it holds goes back to the others."""
        held = [(offset, r) for offset, r in self.records.items() if r.state == ACQUIRED and r.member == member]
        for offset, r in held:
            self._release(offset, r)
        self._advance()
        return len(held)

    def _release(self, offset: int, r: InFlight) -> None:
        if r.delivery_count >= self.delivery_limit:
            self._settle(r, ARCHIVED)
        else:
            self._settle(r, AVAILABLE)
            self._scan_from = min(self._scan_from, offset)

    @staticmethod
    def _settle(r: InFlight, state: int) -> None:
        r.state, r.member, r.lock, r.deadline_ms = state, None, 0, 0

    def _advance(self) -> None:
        while self.start < self.end:
            r = self.records.get(self.start)
            if r is None or r.state not in (ACKNOWLEDGED, ARCHIVED):
                break
            del self.records[self.start]
            self.start += 1

    def acquired_by(self, member: str) -> int:
        return sum(1 for r in self.records.values() if r.state == ACQUIRED and r.member == member)
