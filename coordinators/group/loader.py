"""Loading and unloading a coordinator shard: replay of ``__consumer_offsets`` partitions.

In a cluster this broker coordinates the groups whose offsets partition it
leads: the shard is loaded by replay when leadership arrives and dropped when
it leaves. Mixed into ``GroupCoordinator``.

Invariants:
* replay is the only way state enters a shard besides the coordinator's own
  successful appends, so a reload rebuilds exactly what the log holds;
* after ``unload_partition`` nothing of that partition's groups remains:
  no group, no timer, no parked request (they were answered NOT_COORDINATOR).
"""

from __future__ import annotations

from kbroker.coordinators.group import records
from kbroker.coordinators.group.consumer.model import ConsumerGroup
from kbroker.coordinators.group.consumer.replay import replay_consumer_record
from kbroker.coordinators.group.share.model import ShareGroup
from kbroker.coordinators.group.streams.model import StreamsGroup
from kbroker.coordinators.group.streams.replay import replay_streams_record
from kbroker.coordinators.group.group import CommittedOffset, GroupMetadata, MemberMetadata, join_result, sync_result
from kbroker.coordinators.group.state import GroupState
from kbroker.protocol.errors import ErrorCode

S = GroupState


class GroupLoader:
    @staticmethod
    def _group_record(group: GroupMetadata) -> tuple[bytes, bytes]:
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                    "client_host": m.client_host, "rebalance_timeout": m.rebalance_timeout_ms,
                    "session_timeout": m.session_timeout_ms,
                    "subscription": m.metadata_for(group.protocol_name) if group.protocol_name else b"",
                    "assignment": m.assignment} for m in group.members.values()]
        value = {"protocol_type": group.protocol_type or "", "generation": group.generation_id,
                 "protocol": group.protocol_name, "leader": group.leader_id if group.members else None,
                 "current_state_timestamp": group.state_timestamp_ms, "members": members}
        return records.group_metadata_key(group.group_id), records.group_metadata_value(value)

    def replay_stored(self, partition: int, stored) -> None:
        """Apply one record read back from ``__consumer_offsets`` partition ``partition`` (a StoredRecord)."""
        if stored.marker is not None:
            self.complete_txn_offsets(partition, stored.producer_id, stored.marker)
        else:
            self.replay(stored.key, stored.value, stored.producer_id if stored.transactional else -1)

    def replay(self, key: bytes, value: bytes | None, txn_producer_id: int = -1) -> None:
        """Apply one __consumer_offsets record: the same path for start-up loading and nothing else.

        A transactional offset record (``txn_producer_id`` >= 0) stays pending until its marker.
        """
        decoded_key = records.decode_key(key)
        decoded = records.decode_value(decoded_key, value)
        if isinstance(decoded_key, records.ConsumerGroupKey):
            return replay_consumer_record(self.groups, decoded_key, decoded, self.now_ms())
        if isinstance(decoded_key, records.ShareGroupKey):
            return self.replay_share_group(decoded_key, decoded)
        if isinstance(decoded_key, records.StreamsGroupKey):
            return replay_streams_record(self.groups, decoded_key, decoded, self.now_ms())
        if isinstance(decoded_key, records.OffsetKey):
            tp = (decoded_key.topic, decoded_key.partition)
            group = self.groups.get(decoded_key.group)
            if txn_producer_id >= 0 and decoded is not None:
                if group is None:
                    group = self.groups[decoded_key.group] = GroupMetadata(decoded_key.group)
                group.pending_txn_offsets.setdefault(txn_producer_id, {})[tp] = CommittedOffset(
                    decoded.offset, getattr(decoded, "leader_epoch", -1), decoded.metadata,
                    decoded.commit_timestamp)
                return
            if decoded is None:
                if group is not None:
                    group.offsets.pop(tp, None)
                return
            if group is None:
                group = self.groups[decoded_key.group] = GroupMetadata(decoded_key.group)
            group.offsets[tp] = CommittedOffset(decoded.offset, getattr(decoded, "leader_epoch", -1),
                                                decoded.metadata, decoded.commit_timestamp,
                                                getattr(decoded, "expire_timestamp", -1))
            return
        group_id = decoded_key.group
        previous = self.groups.get(group_id)
        if isinstance(previous, (ConsumerGroup, ShareGroup, StreamsGroup)):
            return   # a classic group's tombstone written when it became this consumer group
        if decoded is None:
            if previous is not None and (previous.offsets or previous.pending_txn_offsets):
                # Offsets outlive their group's record (Kafka keeps them apart): an empty group holds them.
                holder = GroupMetadata(group_id, offsets=previous.offsets)
                holder.pending_txn_offsets = previous.pending_txn_offsets
                self.groups[group_id] = holder
            else:
                self.groups.pop(group_id, None)
            return
        offsets = previous.offsets if previous is not None else {}
        group = GroupMetadata(group_id, generation_id=decoded.generation, protocol_type=decoded.protocol_type or None,
                              protocol_name=decoded.protocol, state_timestamp_ms=decoded.current_state_timestamp,
                              offsets=offsets)
        if previous is not None:
            group.pending_txn_offsets = previous.pending_txn_offsets
        for m in decoded.members:
            member = MemberMetadata(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                    m.rebalance_timeout, m.session_timeout, group.protocol_type or "",
                                    [(decoded.protocol or "", bytes(m.subscription))], bytes(m.assignment),
                                    is_new=False)
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.leader_id = decoded.leader if decoded.leader in group.members else next(iter(group.members), None)
        # A loaded group with members resumes Stable; members that are gone expire by session timeout.
        group.state = S.STABLE if group.members else S.EMPTY
        self.groups[group_id] = group

    def loaded(self, partition: int | None = None) -> None:
        """After replay: start the session timers of the members the log says exist (of one shard, or all)."""
        for group in self.groups.values():
            if partition is None or self.partition_for(group.group_id) == partition:
                if isinstance(group, ShareGroup):
                    for member_id in group.members:
                        self._schedule_share_session(group.group_id, member_id)
                    continue
                if isinstance(group, StreamsGroup):
                    for member in group.members.values():
                        self._schedule_streams_session(group.group_id, member.member_id)
                        if member.state.name == "UNREVOKED_TASKS":
                            self._schedule_streams_revocation(group.group_id, member)
                    continue
                if isinstance(group, ConsumerGroup):
                    for member in group.members.values():
                        self._schedule_consumer_session(group.group_id, member.member_id)
                        if member.state.name == "UNREVOKED_PARTITIONS" and member.classic is None:
                            self._schedule_revocation(group.group_id, member)
                    continue
                for member in group.members.values():
                    self._heartbeat(group, member)

    def unload_partition(self, partition: int) -> int:
        """Leadership of ``partition`` left this broker: forget its groups; parked members look again."""
        gone = [g for g in self.groups.values() if self.partition_for(g.group_id) == partition]
        for group in gone:
            self._drop(group)
        return len(gone)

    def shutdown(self) -> None:
        """Unload every shard: parked members are told to find the coordinator again; no timer fires afterwards."""
        for group in list(self.groups.values()):
            self._drop(group)
        self.scheduler.cancel_all()

    def _drop(self, group) -> None:
        if isinstance(group, ShareGroup):
            for member_id in group.members:
                self.scheduler.cancel(("share-session", group.group_id, member_id))
            self.groups.pop(group.group_id, None)
            return
        if isinstance(group, ConsumerGroup):
            for member_id in group.members:
                self._cancel_consumer_timers(group.group_id, member_id)
            self.groups.pop(group.group_id, None)
            return
        if isinstance(group, StreamsGroup):
            for member_id in group.members:
                self._cancel_streams_timers(group.group_id, member_id)
            self.scheduler.cancel(("streams-initial-delay", group.group_id))
            self.groups.pop(group.group_id, None)
            return
        for member in list(group.members.values()):
            self._answer_join(group, member, join_result(ErrorCode.NOT_COORDINATOR, member.member_id))
            self._answer_sync(group, member, sync_result(ErrorCode.NOT_COORDINATOR))
            self.scheduler.cancel(("heartbeat", group.group_id, member.member_id))
        for member_id in list(group.pending_members):
            self.scheduler.cancel(("heartbeat", group.group_id, member_id))
        self.scheduler.cancel(("join", group.group_id))
        self.scheduler.cancel(("sync", group.group_id))
        self._initial_delay.discard(group.group_id)
        self.groups.pop(group.group_id, None)
