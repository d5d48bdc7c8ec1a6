"""Committed offsets of the group coordinator: commits (plain and transactional), fetches, deletion, expiry.

Kafka keeps these in its GroupMetadataManager, apart from membership. Mixed
into ``GroupCoordinator``; it uses the coordinator's ``groups``, ``store`` and
member checks.

Invariants:
* an offset is visible to OffsetFetch only once its record is in the log;
* a transactional offset stays pending (not fetchable) until its marker.
"""

from __future__ import annotations

from typing import Callable

import structlog

from kbroker.coordinators.group import records
from kbroker.coordinators.group.consumer.model import ConsumerGroup
from kbroker.coordinators.group.streams.model import StreamsGroup
from kbroker.coordinators.group.share.model import ShareGroup
from kbroker.coordinators.group.group import CommittedOffset, GroupMetadata
from kbroker.coordinators.group.state import GroupState
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("coordinators.group")

S = GroupState


class OffsetManager:
    # ================================================================== offsets
    def commit_offsets(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                       retention_time_ms: int, offsets: dict[tuple[str, int], tuple[int, int, str | None]],
                       partition_exists: Callable[[str, int], bool], version: int = 9
                       ) -> dict[tuple[str, int], ErrorCode]:
        """Commit (offset, leader epoch, metadata) per partition; every partition gets an error code.
        ``version``: the OffsetCommit version (a streams group's member must use v9+)."""
        def all_(error: ErrorCode) -> dict:
            return {tp: error for tp in offsets}

        # A commit at a generation needs a group that knows the member; one at none (-1) makes a simple group
        # if there is none, whatever member or instance id it names, and is taken while the group is Empty
        group, error = self._commit_target(group_id, create=generation_id < 0)
        if error == ErrorCode.GROUP_ID_NOT_FOUND:
            error = ErrorCode.ILLEGAL_GENERATION if generation_id >= 0 else ErrorCode.UNKNOWN_MEMBER_ID
        if error:
            return all_(error)
        member = None
        if isinstance(group, StreamsGroup):
            error = self._streams_commit_error(group, member_id, generation_id, offsets, version)
            if error:
                return all_(error)
        elif isinstance(group, ConsumerGroup):
            # KIP-848: a member commits at its current epoch; others only while the group has no members.
            if not (generation_id < 0 and not group.members):
                error = group.member_epoch_error(member_id, generation_id)
                if error:
                    return all_(error)
        elif not (generation_id < 0 and group.is_(S.EMPTY)):
            # Only a group with no members takes commits from outside it (consumers using assign()).
            error = self._validate_generation(group, member_id, group_instance_id, generation_id)
            if not error and group.is_(S.COMPLETING_REBALANCE):
                error = ErrorCode.REBALANCE_IN_PROGRESS
            if error:
                return all_(error)
            member = group.members[member_id]
        expire = -1
        if retention_time_ms is not None and retention_time_ms >= 0:
            expire = self.now_ms() + retention_time_ms
        results, entries, accepted = self._offsets_to_write(group_id, offsets, partition_exists, expire)
        error = self._store(group_id, entries)
        for tp, committed in accepted.items():
            results[tp] = error
            if not error:
                group.offsets[tp] = committed
        if member is not None:
            self._heartbeat(group, member)
        if not accepted and isinstance(group, GroupMetadata) and group.is_(S.EMPTY) and not group.offsets:
            self._maybe_drop_empty_group(group)
        return results

    def _commit_target(self, group_id: str, *, create: bool) -> tuple[GroupMetadata | None, ErrorCode]:
        """The group a commit goes to (made if ``create``); GROUP_ID_NOT_FOUND when it is missing. The empty
        group id is a group like any other here: Kafka takes commits to it, for clients from before groups."""
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                return None, ErrorCode.GROUP_ID_NOT_FOUND
            group = self.groups[group_id] = GroupMetadata(group_id, state_timestamp_ms=self.now_ms())
        if group.is_(S.DEAD):
            return None, ErrorCode.COORDINATOR_NOT_AVAILABLE
        if isinstance(group, ShareGroup):   # a share group's progress is its share partitions', not offsets
            return None, ErrorCode.GROUP_ID_NOT_FOUND
        return group, ErrorCode.NONE

    @staticmethod
    def _streams_commit_error(group: StreamsGroup, member_id: str, member_epoch: int, offsets: dict,
                              version: int | None = None) -> ErrorCode:
        """KIP-1071: a commit from outside the group only while it is empty; from a member at its epoch, or
        behind it for tasks it has held since (one stale partition refuses the whole commit, as in Kafka); an
        OffsetCommit (``version``; None for TxnOffsetCommit) from a member before v9 is UNSUPPORTED_VERSION."""
        if member_epoch < 0 and not group.members:
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if version is not None and version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch > member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        for tp in offsets:
            error = group.commit_error(member_id, member_epoch, *tp)
            if error:
                return error
        return ErrorCode.NONE

    def _offsets_to_write(self, group_id: str, offsets: dict, partition_exists, expire: int):
        """Per-partition checks shared by both commits: (errors so far, records to append, accepted offsets)."""
        now = self.now_ms()
        results: dict[tuple[str, int], ErrorCode] = {}
        entries, accepted = [], {}
        for (topic, partition), (offset, leader_epoch, metadata) in offsets.items():
            metadata = metadata or ""
            if not partition_exists(topic, partition):
                results[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[(topic, partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                committed = CommittedOffset(offset, leader_epoch, metadata, now, expire)
                accepted[(topic, partition)] = committed
                entries.append(self._offset_record(group_id, topic, partition, committed))
        return results, entries, accepted

    def txn_commit_offsets(self, *, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
                           member_id: str, group_instance_id: str | None,
                           offsets: dict[tuple[str, int], tuple[int, int, str | None]],
                           partition_exists: Callable[[str, int], bool]) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit: offsets appended inside the producer's transaction, pending until its marker."""
        def all_(error: ErrorCode) -> dict:
            return {tp: error for tp in offsets}

        if not group_id:   # (OffsetCommit takes the empty group id, for old clients; a transaction does not)
            return all_(ErrorCode.INVALID_GROUP_ID)
        if generation_id >= 0 and group_id not in self.groups:
            return all_(ErrorCode.ILLEGAL_GENERATION)   # (Kafka's: no group, so no generation of it; none is made)
        group, error = self._commit_target(group_id, create=True)
        if error:
            return all_(error)
        if isinstance(group, StreamsGroup):
            if generation_id >= 0 or member_id or group_instance_id is not None:
                error = self._streams_commit_error(group, member_id, generation_id, offsets)
                if error:
                    return all_(error)
        elif isinstance(group, ConsumerGroup):
            if generation_id >= 0 or member_id:
                error = group.member_epoch_error(member_id, generation_id)
                if error:
                    return all_(error)
        elif generation_id >= 0 or member_id or group_instance_id is not None:
            # v3+ (KIP-447): a consumer-group-aware producer proves it still belongs to the generation.
            error = self._validate_generation(group, member_id, group_instance_id, generation_id)
            if error:
                return all_(error)
        results, entries, accepted = self._offsets_to_write(group_id, offsets, partition_exists, -1)
        error = self.store(self.partition_for(group_id), entries, producer_id=producer_id,
                           producer_epoch=producer_epoch) if entries else ErrorCode.NONE
        for tp, committed in accepted.items():
            results[tp] = error
            if not error:
                group.pending_txn_offsets.setdefault(producer_id, {})[tp] = committed
        return results

    def complete_txn_offsets(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker on an offsets partition: its pending offsets become committed, or go."""
        for group in self.groups.values():
            if self.partition_for(group.group_id) != partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending and commit:
                group.offsets.update(pending)

    def unstable_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> set[tuple[str, int]]:
        """Partitions with transactional offsets not yet committed or aborted (OffsetFetch require_stable)."""
        group = self.groups.get(group_id)
        if group is None:
            return set()
        return {tp for tp in partitions if group.has_pending_txn_offset(tp)}

    def fetch_member_error(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9+: a consumer group's member reads at its current epoch (KIP-848); a classic group
        and a request naming no member are not checked, as in Kafka."""
        group = self.groups.get(group_id)
        if not isinstance(group, (ConsumerGroup, StreamsGroup)) or (member_id is None and member_epoch < 0):
            return ErrorCode.NONE
        return group.member_epoch_error(member_id or "", member_epoch)

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None
                      ) -> dict[tuple[str, int], CommittedOffset | None]:
        """Committed offsets of the partitions asked for (None: all the group has, by topic and partition, as
        Kafka lists a topic's partitions in order whatever order they were committed in); None where none is."""
        group = self.groups.get(group_id)
        committed = group.offsets if group is not None and not group.is_(S.DEAD) else {}
        if partitions is None:
            return dict(sorted(committed.items()))
        return {tp: committed.get(tp) for tp in partitions}

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]
                       ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] | None = set()
        if isinstance(group, (ConsumerGroup, StreamsGroup)):
            subscribed = group.subscribed_topic_names()
        elif group.state in (S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE):
            subscribed = group.subscribed_topics()
            if subscribed is None:   # not a consumer group: Kafka refuses while it has members
                return ErrorCode.NON_EMPTY_GROUP, {}
        results, entries = {}, []
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[tp] = ErrorCode.NONE
            if tp in group.offsets:
                entries.append((records.offset_commit_key(group_id, *tp), None))
        error = self._store(group_id, entries)
        if error:
            return error, {}
        for tp, e in results.items():
            if e == ErrorCode.NONE:
                group.offsets.pop(tp, None)
        return ErrorCode.NONE, results

    def remove_topic_offsets(self, topic: str) -> int:
        """A deleted topic's committed offsets go from every group (tombstones), as Kafka does."""
        removed = 0
        for group in list(self.groups.values()):
            gone = [tp for tp in group.offsets if tp[0] == topic]
            if not gone:
                continue
            if self._store(group.group_id, [(records.offset_commit_key(group.group_id, *tp), None) for tp in gone]):
                continue
            for tp in gone:
                del group.offsets[tp]
            removed += len(gone)
        return removed

    # ================================================================== retention
    def expire_offsets(self) -> int:
        """Drop offsets past their retention (Kafka 2.1+ rules); returns how many expired."""
        now = self.now_ms()
        retention = self.config.offsets_retention_ms
        expired_total = 0
        for group in list(self.groups.values()):
            if group.is_(S.DEAD) or isinstance(group, ShareGroup):   # (a share group commits no offsets)
                continue
            expired = []
            consumer = isinstance(group, (ConsumerGroup, StreamsGroup))
            subscribed = group.subscribed_topic_names() if consumer else set()
            for tp, committed in group.offsets.items():
                if consumer:      # KIP-848: a topic no member subscribes to ages from its last commit
                    due = tp[0] not in subscribed and now >= committed.commit_timestamp + retention
                elif committed.expire_timestamp >= 0:
                    due = now >= committed.expire_timestamp
                elif group.protocol_type is None:        # standalone consumers: age of the commit
                    due = now >= committed.commit_timestamp + retention
                elif group.is_(S.EMPTY):                 # a group emptied: age of it being empty
                    due = now >= max(group.state_timestamp_ms, committed.commit_timestamp) + retention
                else:
                    due = False
                if due:
                    expired.append(tp)
            entries = [(records.offset_commit_key(group.group_id, *tp), None) for tp in expired]
            drop_group = (not consumer and group.is_(S.EMPTY) and len(expired) == len(group.offsets)
                          and not group.members)
            if drop_group:
                entries.append((records.group_metadata_key(group.group_id), None))
            if not entries or self._store(group.group_id, entries):
                continue
            for tp in expired:
                del group.offsets[tp]
            expired_total += len(expired)
            if drop_group:
                self._mark_dead(group)
        if expired_total:
            log.info("offsets_expired", count=expired_total)
        return expired_total

    @staticmethod
    def _offset_record(group_id: str, topic: str, partition: int, c: CommittedOffset) -> tuple[bytes, bytes]:
        return (records.offset_commit_key(group_id, topic, partition),
                records.offset_commit_value(c.offset, c.leader_epoch, c.metadata, c.commit_timestamp,
                                            c.expire_timestamp))
