"""The share partitions of the partitions this broker leads, and the share sessions of the members fetching.

A share partition is loaded on first use from its state at the share coordinator, which the group coordinator
initialized before it assigned the partition (``group_state.py``; none at all is UNKNOWN_SERVER_ERROR, as
Kafka's; the start offset is picked by ``share.auto.offset.reset`` at the first load). It is acquired from
by ShareFetch, changed by acknowledgements and expired locks, and written back to the coordinator before the
change is answered. It belongs to the partition's leadership: a leader epoch other than the one it was loaded
at makes it load again, so a new leader resumes from the last written state (records acquired then are handed
out again).

Invariants:
* a state change is answered only after the snapshot that holds it was written (one write at a time per
  share partition, each the latest snapshot);
* every acquisition has one lock timer; an expiry that releases records wakes the fetches waiting on the
  partition (the fetch purgatory, as an append does).
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field

import structlog

from kbroker.broker.configuration.group_configs import duration_ms
from kbroker.broker.shares.group_state import UNINITIALIZED_START, ShareStateInitializer
from kbroker.broker.shares.partition import SharePartition
from kbroker.broker.shares.persister import SharePersister
from kbroker.broker.shares.sessions import ShareSession, ShareSessions
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.types import FileRegion, read_region

log = structlog.get_logger("broker.shares")

Key = tuple[str, str, int]   # group, topic, partition
_HEADER = struct.Struct(">qi")          # base offset, batch length
_ATTRIBUTES, _LAST_DELTA, _PRODUCER_ID = 21, 23, 43
_CONTROL, _TRANSACTIONAL = 0x20, 0x10
HEADER_SIZE = 61


@dataclass
class Loaded:
    sp: SharePartition
    leader_epoch: int
    topic_id: bytes
    write_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def log_batches(region: FileRegion, aborted):
    """The whole batches of a log region, from their headers alone (one small read each, as they are asked
    for: the records go out as the file holds them): (base, last, hidden, start, end), ``start`` and ``end``
    their bytes in the region. Markers are hidden, and so is a transactional batch inside one of ``aborted``
    (AbortedTxn: its producer, from its first offset to its marker's)."""
    aborted_by = {}
    for a in aborted:
        aborted_by.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))
    pos = 0
    while pos + HEADER_SIZE <= region.length:
        header = read_region(region.file, region.position + pos, HEADER_SIZE)
        base, length = _HEADER.unpack_from(header)
        if pos + 12 + length > region.length:
            return
        (attributes,) = struct.unpack_from(">h", header, _ATTRIBUTES)
        (delta,) = struct.unpack_from(">i", header, _LAST_DELTA)
        (producer_id,) = struct.unpack_from(">q", header, _PRODUCER_ID)
        hidden = bool(attributes & _CONTROL) or (bool(attributes & _TRANSACTIONAL) and any(
            first <= base <= last for first, last in aborted_by.get(producer_id, ())))
        yield base, base + delta, hidden, pos, pos + 12 + length
        pos += 12 + length


def acquired_slice(batches: list[tuple[int, int, int]], first: int, last: int) -> tuple[int, int]:
    """(start, end) in the region of the batches that hold the acquired offsets ``first`` to ``last``, from
    the last batch beginning at or before ``first`` to the last beginning at or before ``last``
    (``batches``: (base, start, end) in log order), as Kafka slices a share fetch's records: the records
    read past what the member acquired do not go out."""
    start = next((s for base, s, _ in reversed(batches) if base <= first), batches[0][1])
    end = next(e for base, _, e in reversed(batches) if base <= last)
    return start, end


class SharePartitionManager:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.persister = SharePersister(broker)
        self.state_initializer = ShareStateInitializer(broker)
        self.sessions = ShareSessions(broker.config["group.share.max.share.sessions"])
        self.partitions: dict[Key, Loaded] = {}
        self._loading: dict[Key, asyncio.Future] = {}
        # connection -> {(group, member): a session it opened that is still open}, and -> the groups of every
        # session it opened (looked at for eviction when it closes): a session's entry leaves at its end, so a
        # connection opening and closing sessions for ever new member ids holds no more than its open sessions
        self._opened_on: dict = {}
        self._groups_on: dict = {}
        self._background: set[asyncio.Task] = set()

    def spawn(self, coro) -> asyncio.Task:
        """A task of the share partitions' background work, kept referenced until it is done."""
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def now_ms(self) -> int:
        return int(self.broker.replica_manager.clock() * 1000)

    def group_config(self, group: str, name: str) -> str:
        return self.broker.admin.group_config(group, name)

    def lock_ms(self, group: str) -> int:
        return int(self.group_config(group, "share.record.lock.duration.ms"))

    # ------------------------------------------------------------------ loading
    def loaded_now(self, group: str, topic: str, topic_id: bytes, partition: int
                   ) -> tuple[ErrorCode, Loaded | None] | None:
        """What ``load`` would answer where that is known without waiting (this broker does not lead the
        partition, or its share partition is loaded at the current leader epoch); None where it must load."""
        leader = self.broker.replica_manager.get(topic, partition)
        if leader is None:   # (UNKNOWN_TOPIC_OR_PARTITION where the topic has no such partition, as Kafka's)
            return self.broker.replica_manager.missing_error(topic, partition), None
        if not leader.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        loaded = self.partitions.get((group, topic, partition))
        if loaded is not None and loaded.leader_epoch == leader.leader_epoch and loaded.topic_id == topic_id:
            return ErrorCode.NONE, loaded
        return None

    def load_in_background(self, group: str, topic: str, topic_id: bytes, partition: int) -> asyncio.Task:
        """``load`` as a task the manager keeps until it ends, for a caller that will not wait for it all."""
        return self.spawn(self.load(group, topic, topic_id, partition))

    async def load(self, group: str, topic: str, topic_id: bytes, partition: int
                   ) -> tuple[ErrorCode, Loaded | None]:
        key = (group, topic, partition)
        while True:
            known = self.loaded_now(group, topic, topic_id, partition)
            if known is not None:
                return known
            leader = self.broker.replica_manager.get(topic, partition)
            pending = self._loading.get(key)
            if pending is None:
                break
            await asyncio.shield(pending)
        future = self._loading[key] = asyncio.get_running_loop().create_future()
        try:
            error, loaded = await self._read(group, topic, topic_id, partition, leader)
            if loaded is not None:
                self.partitions[key] = loaded
            return error, loaded
        finally:
            del self._loading[key]
            future.set_result(None)

    async def _read(self, group, topic, topic_id, partition, leader) -> tuple[ErrorCode, Loaded | None]:
        epoch = leader.leader_epoch
        error, state = await self.persister.read(group, topic_id, partition, epoch)
        if error:
            return error, None
        limits = dict(delivery_limit=self.broker.config["group.share.delivery.count.limit"],
                      max_in_flight=self.broker.config["group.share.partition.max.record.locks"])
        if state is None:   # (never initialized: the group never joined, or was never assigned it)
            log.debug("share_partition_not_initialized", group=group, topic=topic, partition=partition)
            return ErrorCode.UNKNOWN_SERVER_ERROR, None
        if state.start_offset == UNINITIALIZED_START:   # (initialized by the group coordinator, never loaded)
            plog = leader.log
            reset = self.group_config(group, "share.auto.offset.reset")
            start = plog.log_start_offset if reset == "earliest" else \
                self._offset_by_duration(plog, reset) if reset.startswith("by_duration:") else plog.high_watermark
            error = await self.persister.initialize(group, topic_id, partition, state.state_epoch, start)
            if error:
                return error, None
            sp = SharePartition(start, state_epoch=state.state_epoch, **limits)
        else:
            sp = SharePartition.restore(state.start_offset, state.batches, state_epoch=state.state_epoch, **limits)
        log.info("share_partition_loaded", group=group, topic=topic, partition=partition, start=sp.start,
                 in_flight=len(sp.records), leader_epoch=epoch)
        return ErrorCode.NONE, Loaded(sp, epoch, bytes(topic_id))

    def _offset_by_duration(self, plog, reset: str) -> int:
        """``by_duration:<ISO-8601 duration>`` (checked when set, as java.time reads it): the first offset at or
        after now minus that duration."""
        ms = duration_ms(reset[len("by_duration:"):])
        if ms is None:
            return plog.high_watermark
        found = plog.offset_for_timestamp(self.now_ms() - ms)
        return found[0] if found else plog.high_watermark

    # ------------------------------------------------------------------ acquiring
    def acquire(self, group: str, topic: str, partition: int, loaded: Loaded, member: str, max_records: int,
                max_bytes: int, mode: int, read_committed: bool, batch_size: int = 0, min_one_batch: bool = True
                ) -> tuple[FileRegion | None, list, bool]:
        """(the log region of the batches holding the acquired records (sent from the file, as Fetch's), their
        ranges, whether the log had bytes to read): the log is read up to ``max_bytes``, or its first batch
        whole with ``min_one_batch``."""
        readable = self._readable(topic, partition, loaded, max_bytes, read_committed, min_one_batch)
        if readable is None:
            return None, [], False
        plog, offset, bound, found = readable
        region = FileRegion(found.segment, found.position, found.length)
        aborted = plog.aborted_transactions(offset, bound) if read_committed else []
        read: list[tuple[int, int, int]] = []   # (base, start, end) of each batch the acquisition looked at

        def batches():   # (read lazily: the acquisition stops at its record limit, not at the region's end)
            for base, last, hidden, start, end in log_batches(region, aborted):
                read.append((base, start, end))
                yield base, last, hidden
        lock_ms = self.lock_ms(group)
        lock, ranges = loaded.sp.acquire(member, batches(), max_records, self.now_ms(), lock_ms, mode, batch_size)
        if not ranges:
            return None, [], found.length > 0
        self._arm_lock((group, topic, partition), loaded, lock, lock_ms)
        start, end = acquired_slice(read, ranges[0][0], ranges[-1][1])
        return FileRegion(found.segment, found.position + start, end - start), ranges, True

    def available_bytes(self, topic: str, partition: int, loaded: Loaded, cap: int, read_committed: bool) -> int:
        """About how many bytes a fetch could acquire now, at most ``cap``: the log's bytes from the first
        acquirable offset to the high watermark (last stable offset), as Kafka's ``isMinBytesSatisfied``
        counts them (as if no other member held any of them); ``cap`` where they begin in an older segment."""
        readable = self._readable(topic, partition, loaded, cap, read_committed)
        if readable is None:
            return 0
        plog, _, _, found = readable
        return cap if found.segment is not plog.segments[-1] else min(found.length, cap)

    def _readable(self, topic: str, partition: int, loaded: Loaded, max_bytes: int, read_committed: bool,
                  min_one_batch: bool = True):
        """(log, first acquirable offset, the bound, the log's slice from there) of a share partition this
        broker still leads at the epoch it was loaded at, or None where nothing can be acquired."""
        leader = self.broker.replica_manager.get(topic, partition)
        if leader is None or not leader.is_leader or leader.leader_epoch != loaded.leader_epoch:
            return None
        plog, sp = leader.log, loaded.sp
        sp.move_start(plog.log_start_offset)
        bound = plog.last_stable_offset if read_committed else plog.high_watermark
        offset = sp.fetch_offset(bound)
        if offset is None:
            return None
        found = plog.read(offset, max(max_bytes, 1), bound, min_one_batch)
        return None if found is None else (plog, offset, bound, found)

    def _arm_lock(self, key: Key, loaded: Loaded, lock: int, delay_ms: int) -> None:
        asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, self._lock_ran_out, key, loaded, lock)

    def _lock_ran_out(self, key: Key, loaded: Loaded, lock: int) -> None:
        if self.partitions.get(key) is not loaded:
            return   # reloaded (leadership moved): the new state has these records available again
        now = self.now_ms()
        released = loaded.sp.expire(lock, now)
        later = loaded.sp.next_deadline(lock)
        if later is not None:   # renewed records keep their lock until the renewed deadline
            self._arm_lock(key, loaded, lock, later - now)
        if released:
            log.debug("share_locks_expired", group=key[0], topic=key[1], partition=key[2], records=released)
            self.spawn(self._persist_and_wake(key, loaded))

    # ------------------------------------------------------------------ changing and persisting
    async def acknowledge(self, key: Key, loaded: Loaded, member: str, batches: list) -> ErrorCode:
        error = loaded.sp.acknowledge(member, batches, self.now_ms(), self.lock_ms(key[0]))
        if error:
            return error
        return await self._persist_and_wake(key, loaded)

    def begin_session(self, ctx, group: str, member: str, epoch: int, acknowledge_only: bool = False):
        """The request's share session (``sessions.begin``); a new one closes with its connection."""
        replaced = self.sessions.sessions.get((group, member)) if epoch == 0 else None
        error, session = self.sessions.begin(group, member, epoch, acknowledge_only)
        if replaced is not None and replaced is not session:   # (ended by the member's new epoch 0)
            self._forget_opener(replaced)
        if session is not None and epoch == 0:
            conn = session.opened_on = ctx.connection   # (its end closes the session: _connection_closed)
            opened = self._opened_on.get(conn)
            if opened is None:   # (one callback a connection, however many sessions it opens)
                opened = self._opened_on[conn] = {}
                self._groups_on[conn] = set()
                if conn.on_close is None:
                    conn.on_close = []
                conn.on_close.append(lambda: self._connection_closed(conn))
            opened[(group, member)] = session
            self._groups_on[conn].add(group)
        return error, session

    def _forget_opener(self, session: ShareSession) -> None:
        """An ended session leaves its connection's open sessions; its group stays among the connection's while
        the group has share partitions here (loaded or loading), for the eviction at the connection's close."""
        conn, group = session.opened_on, session.group
        opened = self._opened_on.get(conn)
        if opened is not None and opened.get((group, session.member)) is session:
            del opened[(group, session.member)]
            if not any(g == group for g, _ in opened) and not any(k[0] == group for k in self._loaded_keys()):
                self._groups_on[conn].discard(group)   # (a group that loaded nothing, as one never joined)

    def _loaded_keys(self):
        yield from self.partitions
        yield from self._loading

    def _connection_closed(self, conn) -> None:
        """The sessions the connection opened and that are still open close with it; then each group it carried
        a session of and left with no session here is evicted, once."""
        closing = [s for s in self._opened_on.pop(conn, {}).values()
                   if self.sessions.sessions.get((s.group, s.member)) is s]   # (any end that bypassed the manager)
        for session in closing:
            self.sessions.close(session)
        self.spawn(self._release_then_evict(closing, self._groups_on.pop(conn, set())))

    async def _release_then_evict(self, sessions: list[ShareSession], groups: set[str]) -> None:
        for session in sessions:
            await self.release_session(session)
        for group in groups:
            self._evict_if_idle(group)

    def close_session(self, session: ShareSession) -> None:
        self.sessions.close(session)
        self._forget_opener(session)

    def _forget_group(self, group: str) -> None:
        """``group``'s share partitions leave memory: the next fetch loads what the share coordinator holds."""
        for key in [k for k in self.partitions if k[0] == group]:
            del self.partitions[key]

    def _evict_if_idle(self, group: str) -> None:
        """A connection that carried a session of ``group`` closed and no member of it has a session here any
        more: forget its share partitions, so that the next fetch sees what the coordinator holds then (an
        admin's reset of the start offsets). A session closed by its final epoch keeps them while its
        connection stays open, as Kafka's cache keeps them until a disconnect leaves the group empty."""
        if not any(g == group for g, _ in self.sessions.sessions):
            self._forget_group(group)

    async def release_session(self, session: ShareSession) -> None:
        """A closed session: what its member holds in the session's partitions goes back to the others."""
        for topic_id, partition in session.partitions:
            topic = self.broker.topic_ids.name_of(topic_id)
            loaded = self.partitions.get((session.group, topic, partition)) if topic else None
            if loaded is not None and loaded.sp.release_member(session.member):
                await self._persist_and_wake((session.group, topic, partition), loaded)

    async def _persist_and_wake(self, key: Key, loaded: Loaded) -> ErrorCode:
        group, topic, partition = key
        async with loaded.write_lock:
            sp = loaded.sp
            error = await self.persister.write(group, loaded.topic_id, partition, sp.state_epoch,
                                               loaded.leader_epoch, sp.start, sp.snapshot())
        if error:
            log.warning("share_state_write_failed", group=group, topic=topic, partition=partition, error=error.name)
            if error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH, ErrorCode.INVALID_REQUEST):
                self.partitions.pop(key, None)   # a newer leader or state, or none: load again before serving more
        self.broker.replica_manager.fetch_purgatory.check_and_complete((topic, partition))
        return error

    async def delete_group_state(self, group: str, partitions: dict) -> ErrorCode:
        """A share group is being deleted: the state of each of its share partitions goes from the share
        coordinator, and what this broker holds of them from memory."""
        self._forget_group(group)
        for topic_id, (_, indexes) in partitions.items():
            for index in sorted(indexes):
                error = await self.persister.delete(group, topic_id, index)
                if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self.broker.topic_ids.name_of(topic_id) is None:
                    continue   # (a topic deleted since: another broker's share coordinator refuses it, as Kafka's)
                if error:
                    return error
        return ErrorCode.NONE

    def topic_deleted(self, name: str) -> None:
        for key in [k for k in self.partitions if k[1] == name]:
            del self.partitions[key]
