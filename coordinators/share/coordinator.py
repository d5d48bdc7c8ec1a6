"""The share coordinator: the state of each share partition (group, topic id, partition), kept as the last
snapshot written to ``__share_group_state`` and rebuilt from it by replay.

A share-partition leader (the broker leading the data partition) initializes, reads and writes that state
here, directly when this broker holds the key's shard, or with InitializeShareGroupState,
ReadShareGroupState and WriteShareGroupState when another broker does. ``store(partition, records)``
appends to ``__share_group_state`` as ``__consumer_offsets`` is appended; the state changes only after it
returned NONE, and ``replay`` is the only way state enters a shard.

Invariants:
* a write carries the leader epoch of the data partition's leader: a write from an older leader than the
  last accepted one is FENCED_LEADER_EPOCH, so a deposed share-partition leader cannot overwrite its
  successor's state;
* a write with an older state epoch than the stored one is FENCED_STATE_EPOCH (the state was reset);
* state comes into being only by an initialization: a write to a key with none is INVALID_REQUEST (a leader
  still holding a share partition whose state was deleted cannot bring it back).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kbroker.coordinators.partitioning import partition_for
from kbroker.coordinators.share import records
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.types import uuid_to_str

Key = tuple[str, bytes, int]          # group, topic id, partition
Batch = tuple[int, int, int, int]     # first offset, last offset, delivery state, delivery count
TOMBSTONES_PER_BATCH = 1000


@dataclass
class ShareState:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: list[Batch] = field(default_factory=list)
    snapshot_epoch: int = 0

    def delivery_complete_count(self) -> int:
        """In-flight records that are done (acknowledged or archived)."""
        return sum(last - first + 1 for first, last, state, _ in self.batches if state in (2, 4))


def shard_key(group: str, topic_id: bytes, partition: int) -> str:
    """Kafka's share coordinator key, ``group:topicId:partition``, with the topic id as Kafka prints it."""
    return f"{group}:{uuid_to_str(topic_id)}:{partition}"


class ShareCoordinator:
    def __init__(self, partitions: int, store: Callable[[int, list], ErrorCode]) -> None:
        self.partitions = partitions
        self.store = store
        self.states: dict[Key, ShareState] = {}

    def partition_for(self, group: str, topic_id: bytes, partition: int) -> int:
        return self.partition_for_key(shard_key(group, topic_id, partition))

    def partition_for_key(self, key: str) -> int:
        """The shard of a key as FindCoordinator v6 names it (``group:topicId:partition``)."""
        return partition_for(key, self.partitions)

    # ------------------------------------------------------------------ the operations
    def read(self, key: Key, leader_epoch: int) -> tuple[ErrorCode, ShareState | None]:
        """The state of ``key``, None if it was never initialized (the leader initializes it)."""
        state = self.states.get(key)
        if state is not None and leader_epoch >= 0 and leader_epoch < state.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, None
        return ErrorCode.NONE, state

    def initialize(self, key: Key, state_epoch: int, start_offset: int) -> ErrorCode:
        state = self.states.get(key)
        if state is not None and state_epoch < state.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        return self._put(key, ShareState(state_epoch, state.leader_epoch if state else -1, start_offset, []))

    def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: list[Batch]) -> ErrorCode:
        state = self.states.get(key)
        if state is None:   # (never initialized, or deleted since: a write does not make one up, as Kafka's)
            return ErrorCode.INVALID_REQUEST
        if state_epoch < state.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        if leader_epoch < state.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return self._put(key, ShareState(state_epoch, leader_epoch,
                                         start_offset if start_offset >= 0 else state.start_offset,
                                         list(batches), state.snapshot_epoch + 1))

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
            state.delivery_complete_count()))
        error = self.store(self.partition_for(*key), [entry])
        if not error:
            self.replay(*entry)
        return error

    # ------------------------------------------------------------------ replay and shards
    def replay(self, key: bytes, value: bytes | None) -> None:
        k = records.decode_key(key)
        if value is None:
            self.states.pop(k, None)
            return
        v = records.decode_value(value)
        self.states[k] = ShareState(v.state_epoch, v.leader_epoch, v.start_offset,
                                    [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                     for b in v.state_batches], v.snapshot_epoch)

    def replay_stored(self, partition: int, stored) -> None:
        if stored.key is not None:
            self.replay(stored.key, stored.value)

    def loaded(self, partition: int | None = None) -> None:
        pass

    def unload_partition(self, partition: int) -> int:
        gone = [k for k in self.states if self.partition_for(*k) == partition]
        for k in gone:
            del self.states[k]
        return len(gone)
