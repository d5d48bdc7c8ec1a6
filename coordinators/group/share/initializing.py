"""Which share partitions of a share group have their state at the share coordinator (KIP-932), kept as
Kafka's group coordinator keeps it: in the group's ShareGroupStatePartitionMetadata record (key version 15),
initializing and initialized topics.

A heartbeat that finds a subscribed partition neither initialized nor being initialized (or being initialized
for longer than ``group.share.initialize.retry.interval.ms``: its asking was lost) records it as initializing
in the same write as its own records, and hands it to ``initialize_share_state(group, epoch, partitions)``: the
broker initializes each at the share coordinator in the background (at the group's epoch, start offset -1)
and reports back through ``share_state_initialized`` (initializing -> initialized) or
``share_state_uninitialized`` (no longer initializing: the next heartbeat asks again). The heartbeat answers
without waiting. Only initialized partitions are assigned; the first heartbeat after they are moves the group's
epoch and assigns them, so a member hears of a partition once its state exists and a share-partition leader
never has to make one up.

Invariants:
* a partition recorded initialized is not initialized again (that would put back the start of a state its
  leaders have written);
* a partition is recorded initializing before the share coordinator is asked, so a group's deletion, even
  after a coordinator move, deletes every state it may have.
"""

from __future__ import annotations

from kbroker.coordinators.group import records
from kbroker.coordinators.group.share.model import ShareGroup
from kbroker.protocol.errors import ErrorCode

Partitions = dict[bytes, frozenset[int]]   # topic id -> partitions
UNKNOWN_TOPIC = "<UNKNOWN>"                  # (Kafka's name for a topic id no longer in the metadata)


class ShareInitialization:
    def _assignable(self, group: ShareGroup) -> Partitions:
        return {topic_id: partitions for topic_id, (_, partitions) in group.share_partitions.items()}

    def _initialized_assignment_pending(self, group: ShareGroup) -> bool:
        """Whether some subscribed topic's initialized partitions are not what the target assigns: the group's
        epoch then moves so that they are assigned (as Kafka's coordinator decides it, on the group as it was
        before this heartbeat)."""
        subscribed = group.subscribed_topic_names()
        if not group.members or not group.share_partitions or not subscribed:
            return False
        assigned: dict[bytes, set[int]] = {}
        for target in group.target.values():
            for topic_id, partitions in target.items():
                assigned.setdefault(topic_id, set()).update(partitions)
        topics = self.topics()   # (looked up by name: a topic deleted and made again under it is another topic)
        return any(name in subscribed and (meta := topics.get(name)) is not None
                   and bytes(meta.topic_id) == topic_id and assigned.get(topic_id) != partitions
                   for topic_id, (name, partitions) in group.share_partitions.items())

    def _share_initializing(self, group: ShareGroup, subscribed: set[str]) -> tuple[list, Partitions, dict]:
        """The record marking the subscribed partitions to initialize now, those partitions and the group's
        initializing topics once it is written (none: nothing to write)."""
        now, retry = self.now_ms(), self.config.share_initialize_retry_interval_ms
        topics = self.topics()
        todo: dict[bytes, tuple[str, frozenset[int]]] = {}
        for name in sorted(subscribed):
            meta = topics.get(name)
            if meta is None or meta.partitions <= 0:
                continue
            topic_id = bytes(meta.topic_id)
            known = group.share_partitions.get(topic_id, (name, frozenset()))[1]
            asked = group.initializing.get(topic_id)
            if asked is not None and now - asked[2] < retry:
                known |= asked[1]
            if len(known) < meta.partitions:
                todo[topic_id] = (name, frozenset(range(meta.partitions)) - known)
        if not todo:
            return [], {}, group.initializing
        initializing = dict(group.initializing)
        for topic_id, (name, partitions) in todo.items():
            had = initializing.get(topic_id, (name, frozenset(), now))[1]
            initializing[topic_id] = (name, had | partitions, now)
        return ([self._state_partitions_entry(group.group_id, group.share_partitions, initializing)],
                {topic_id: partitions for topic_id, (_, partitions) in todo.items()}, initializing)

    def _state_partitions_entry(self, group_id: str, initialized: dict, initializing: dict) -> tuple[bytes, bytes]:
        return records.share_partitions_key(group_id), records.share_partitions_value(initialized, initializing)

    def _write_state_partitions(self, group: ShareGroup, initialized: dict, initializing: dict) -> ErrorCode:
        if (initialized, initializing) == (group.share_partitions, group.initializing):
            return ErrorCode.NONE
        error = self._store(group.group_id, [self._state_partitions_entry(group.group_id, initialized, initializing)])
        if not error:
            group.share_partitions, group.initializing = initialized, initializing
        return error

    def share_state_initialized(self, group_id: str, partitions: Partitions) -> ErrorCode:
        """The share coordinator holds the state of ``partitions``: they are initialized (and assignable)."""
        group = self.groups.get(group_id)
        if not isinstance(group, ShareGroup):   # (deleted meanwhile: its deletion deleted what was asked)
            return ErrorCode.GROUP_ID_NOT_FOUND
        names = self.topic_names_by_id()
        initialized = dict(group.share_partitions)
        for topic_id, added in partitions.items():
            initialized[topic_id] = (names.get(topic_id, UNKNOWN_TOPIC),
                                     initialized.get(topic_id, ("", frozenset()))[1] | added)
        return self._write_state_partitions(group, initialized, _without(group.initializing, partitions))

    def share_state_uninitialized(self, group_id: str, partitions: Partitions) -> ErrorCode:
        """Initializing ``partitions`` failed: they are no longer initializing, so the next heartbeat asks
        again."""
        group = self.groups.get(group_id)
        if not isinstance(group, ShareGroup):
            return ErrorCode.GROUP_ID_NOT_FOUND
        return self._write_state_partitions(group, group.share_partitions, _without(group.initializing, partitions))

    def set_share_partitions(self, group: ShareGroup, partitions: dict) -> ErrorCode:
        """The group's initialized share partitions are now ``partitions`` (an admin altered or deleted
        offsets); those among them stop initializing."""
        done = {topic_id: ps for topic_id, (_, ps) in partitions.items()}
        return self._write_state_partitions(group, dict(partitions), _without(group.initializing, done))

    def remove_share_topic(self, topic_id: bytes) -> int:
        """A deleted topic leaves every share group's initialized and initializing partitions (its share state
        leaves the share coordinator with it), as Kafka's group coordinator removes it; returns how many groups
        had it."""
        removed = 0
        for group in list(self.groups.values()):
            if isinstance(group, ShareGroup) and (topic_id in group.share_partitions or topic_id in group.initializing):
                initialized = {t: v for t, v in group.share_partitions.items() if t != topic_id}
                initializing = {t: v for t, v in group.initializing.items() if t != topic_id}
                removed += not self._write_state_partitions(group, initialized, initializing)
        return removed


def _without(initializing: dict, partitions: Partitions) -> dict:
    """``initializing`` less ``partitions`` (a topic left with none goes)."""
    left = {}
    for topic_id, (name, asked, since) in initializing.items():
        rest = asked - partitions.get(topic_id, frozenset())
        if rest:
            left[topic_id] = (name, rest, since)
    return left
