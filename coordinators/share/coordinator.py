"""The share coordinator: the state of each share partition (group, topic id, partition), kept as the last
snapshot written to ``__share_group_state`` and rebuilt from it by replay.

A share-partition leader (the broker leading the data partition) initializes, reads and writes that state
here, directly when this broker holds the key's shard, or with InitializeShareGroupState,
ReadShareGroupState and WriteShareGroupState when another broker does. ``store(partition, records)``
appends to ``__share_group_state`` as ``__consumer_offsets`` is appended; the state changes only after it
returned NONE, and ``replay`` is the only way state enters a shard.

Invariants (as Kafka's share coordinator keeps them):
* ``leader_epochs`` holds the highest leader epoch any state of a key was stored with (a state's own is the
  epoch a leader last read it at, 0 after an initialization): a read at a higher epoch stores it before it is
  answered, and a read or write at a lower one is FENCED_LEADER_EPOCH, so a deposed share-partition leader
  cannot overwrite the state its successor has loaded; a write never changes either;
* the stored state epoch changes only by an initialization (a reset); a write at a lower one is
  FENCED_STATE_EPOCH; a write's -1 for either epoch skips that check;
* the delivery complete count is the writer's (-1 where it gave none), 0 after an initialization at an
  offset, -1 after one that leaves the start offset to the leader;
* a write's batches join those stored (``batches.combine``: what changed wins where it is further along)
  and nothing below the start offset is kept;
* state comes into being only by an initialization: a write to a key with none is INVALID_REQUEST (a leader
  still holding a share partition whose state was deleted cannot bring it back).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kbroker.coordinators.partitioning import partition_for
from kbroker.coordinators.share import records
from kbroker.coordinators.share.batches import combine
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.types import uuid_to_str

Key = tuple[str, bytes, int]          # group, topic id, partition
Batch = tuple[int, int, int, int]     # first offset, last offset, delivery state, delivery count
TOMBSTONES_PER_BATCH = 1000
UNINITIALIZED_EPOCH = 0   # an initialized state's leader epoch, as Kafka's


@dataclass
class ShareState:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: list[Batch] = field(default_factory=list)
    snapshot_epoch: int = 0
    delivery_complete_count: int = -1   # in-flight records that are done (acknowledged or archived)


def done_in(batches: list[Batch]) -> int:
    """How many records of ``batches`` are done (acknowledged or archived): a leader's delivery complete count."""
    return sum(last - first + 1 for first, last, state, _ in batches if state in (2, 4))


def shard_key(group: str, topic_id: bytes, partition: int) -> str:
    """Kafka's share coordinator key, ``group:topicId:partition``, with the topic id as Kafka prints it."""
    return f"{group}:{uuid_to_str(topic_id)}:{partition}"


class ShareCoordinator:
    def __init__(self, partitions: int, store: Callable[[int, list], ErrorCode]) -> None:
        self.partitions = partitions
        self.store = store
        self.states: dict[Key, ShareState] = {}
        self.leader_epochs: dict[Key, int] = {}

    def partition_for(self, group: str, topic_id: bytes, partition: int) -> int:
        return self.partition_for_key(shard_key(group, topic_id, partition))

    def partition_for_key(self, key: str) -> int:
        """The shard of a key as FindCoordinator v6 names it (``group:topicId:partition``)."""
        return partition_for(key, self.partitions)

    # ------------------------------------------------------------------ the operations
    def read_refusal(self, key: Key, leader_epoch: int) -> ErrorCode:
        """Why a read at ``leader_epoch`` is refused: an older leader than one that has read it (-1 included)."""
        return ErrorCode.FENCED_LEADER_EPOCH if self.leader_epochs.get(key, -1) > leader_epoch else ErrorCode.NONE

    def read(self, key: Key, leader_epoch: int) -> tuple[ErrorCode, ShareState | None]:
        """The state of ``key`` for its leader at ``leader_epoch`` (None if it was never initialized: the
        leader initializes it). A higher leader epoch than the stored one is stored first, fencing the
        leaders before it."""
        state = self.states.get(key)
        if state is None:
            return ErrorCode.NONE, None
        if error := self.read_refusal(key, leader_epoch):
            return error, None
        if leader_epoch != -1 and leader_epoch != self.leader_epochs.get(key):
            if error := self._put(key, ShareState(state.state_epoch, leader_epoch, state.start_offset, state.batches,
                                                  state.snapshot_epoch + 1, state.delivery_complete_count)):
                return error, None
        return ErrorCode.NONE, state

    def initialize(self, key: Key, state_epoch: int, start_offset: int) -> ErrorCode:
        state = self.states.get(key)
        if state is not None and state_epoch < state.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        return self._put(key, ShareState(state_epoch, UNINITIALIZED_EPOCH, start_offset, [],
                                         state.snapshot_epoch + 1 if state else 0, -1 if start_offset == -1 else 0))

    def write_refusal(self, key: Key, state_epoch: int, leader_epoch: int) -> ErrorCode:
        """Why a write is refused, in Kafka's order: no state (INVALID_REQUEST), an older leader epoch, an older
        state epoch (-1 skips either check)."""
        state = self.states.get(key)
        if state is None:   # (never initialized, or deleted since: a write does not make one up, as Kafka's)
            return ErrorCode.INVALID_REQUEST
        if leader_epoch != -1 and self.leader_epochs.get(key, -1) > leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if state_epoch != -1 and state.state_epoch > state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        return ErrorCode.NONE

    def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int, batches: list[Batch],
              delivery_complete_count: int = -1) -> ErrorCode:
        if error := self.write_refusal(key, state_epoch, leader_epoch):
            return error
        state = self.states[key]
        start = start_offset if start_offset != -1 else state.start_offset
        return self._put(key, ShareState(state.state_epoch, state.leader_epoch, start,
                                         combine(state.batches, batches, start), state.snapshot_epoch + 1,
                                         delivery_complete_count))

    def delete(self, key: Key) -> ErrorCode:
        return self._remove(self.partition_for(*key), [key]) if key in self.states else ErrorCode.NONE

    def remove_topic_states(self, topic_id: bytes) -> int:
        """A deleted topic's share partitions leave every shard held here (tombstones), as Kafka's share
        coordinator cleans up at a topic's deletion: how many did. A shard whose append fails keeps its own."""
        by_shard: dict[int, list[Key]] = {}
        for key in self.states:
            if key[1] == topic_id:
                by_shard.setdefault(self.partition_for(*key), []).append(key)
        removed = 0
        for shard, keys in by_shard.items():
            for i in range(0, len(keys), TOMBSTONES_PER_BATCH):   # (batches well under a record batch's limit)
                chunk = keys[i:i + TOMBSTONES_PER_BATCH]
                if self._remove(shard, chunk):
                    break
                removed += len(chunk)
        return removed

    def _remove(self, shard: int, keys: list[Key]) -> ErrorCode:
        """Tombstones for ``keys`` (all of ``shard``) in one append; their states go once it is stored."""
        entries = [(records.snapshot_key(*key), None) for key in keys]
        error = self.store(shard, entries)
        if not error:
            for entry in entries:
                self.replay(*entry)
        return error

    def _put(self, key: Key, state: ShareState) -> ErrorCode:
        entry = (records.snapshot_key(*key), records.snapshot_value(
            state.snapshot_epoch, state.state_epoch, state.leader_epoch, state.start_offset, state.batches,
            state.delivery_complete_count))
        error = self.store(self.partition_for(*key), [entry])
        if not error:
            self.replay(*entry)
        return error

    # ------------------------------------------------------------------ replay and shards
    def replay(self, key: bytes, value: bytes | None) -> None:
        k = records.decode_key(key)
        if value is None:
            self.states.pop(k, None)
            self.leader_epochs.pop(k, None)
            return
        v = records.decode_value(value)
        batches = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in v.state_batches]
        count = v.get("delivery_complete_count")
        if count is None:   # (kbroker's first records had no count: it was the count of their batches then)
            count = done_in(batches)
        self.states[k] = ShareState(v.state_epoch, v.leader_epoch, v.start_offset, batches, v.snapshot_epoch, count)
        self.leader_epochs[k] = max(self.leader_epochs.get(k, v.leader_epoch), v.leader_epoch)

    def replay_stored(self, partition: int, stored) -> None:
        if stored.key is not None:
            self.replay(stored.key, stored.value)

    def loaded(self, partition: int | None = None) -> None:
        pass

    def unload_partition(self, partition: int) -> int:
        gone = [k for k in self.states if self.partition_for(*k) == partition]
        for k in gone:
            del self.states[k]
            self.leader_epochs.pop(k, None)
        return len(gone)
