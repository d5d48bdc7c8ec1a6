"""Online migration between the classic and the consumer group protocol, as Kafka 4 does it.

Mixed into ``GroupCoordinator``. A running classic group whose members restart one by one with
``group.protocol=consumer`` does not stop: the first ConsumerGroupHeartbeat converts it (upgrade) into a
consumer group whose classic members keep their generation as their member epoch, their last assignment as
both their current and target assignment, and their JoinGroup protocols; they go on speaking JoinGroup,
SyncGroup and Heartbeat to it (``classic_members.py``). When the last member speaking the consumer protocol
leaves (or is fenced) and classic members remain, the group goes back (downgrade): a classic group at the
group epoch, Stable with the target assignment, that rebalances at once so its members rejoin.
``group.consumer.migration.policy`` (disabled, upgrade, downgrade, bidirectional: Kafka's default) says
which directions are allowed.

Invariants:
* a conversion is one append: the old group's records are tombstoned and the new group's written in the
  same batch, so a replay sees one group or the other, never both; offsets stay where they are;
* nothing about the old group changes (its parked requests, its timers) unless that append succeeded;
* an upgrade needs every member's embedded subscription and assignment to parse (else GROUP_ID_NOT_FOUND,
  as Kafka), and a group that uses the consumer protocol type.
"""

from __future__ import annotations

import structlog

from kbroker.coordinators.group import records
from kbroker.coordinators.group.consumer import embedded
from kbroker.coordinators.group.consumer.heartbeat import HeartbeatError
from kbroker.coordinators.group.consumer.model import (
    ClassicMetadata, ConsumerGroup, ConsumerMember, MemberState, normalized)
from kbroker.coordinators.group.consumer.records import (
    assignment_epoch_record, current_record, epoch_record, group_tombstones, member_record, target_record)
from kbroker.coordinators.group.group import GroupMetadata, MemberMetadata, join_result, sync_result
from kbroker.coordinators.group.state import GroupState
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("coordinators.group")

MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


class OnlineMigration:
    def _migration_allowed(self, direction: str) -> bool:
        return self.config.consumer_migration_policy in (direction, "bidirectional")

    # ================================================================== classic -> consumer
    def _upgraded(self, classic: GroupMetadata, entries: list) -> ConsumerGroup:
        """The consumer group a classic group with members becomes, its records added to ``entries``; the
        caller stores them and then calls ``_finish_upgrade``."""
        group_id = classic.group_id
        refused = HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if (not self._migration_allowed("upgrade") or classic.protocol_type != "consumer"
                or not classic.protocol_name or len(classic.members) > self.config.consumer_max_size):
            raise refused
        ids = self.topic_ids_by_name()
        epoch = classic.generation_id
        group = ConsumerGroup(group_id, group_epoch=epoch, assignment_epoch=epoch, state_timestamp_ms=self.now_ms())
        group.offsets, group.pending_txn_offsets = classic.offsets, classic.pending_txn_offsets
        for m in classic.members.values():
            try:
                subscription = embedded.subscription(m.metadata_for(classic.protocol_name))
                assigned = embedded.assignment(m.assignment)
            except (embedded.MalformedProtocol, KeyError):
                log.warning("upgrade_refused_malformed_protocol", group=group_id, member=m.member_id)
                raise refused
            assigned_ids = normalized({ids[t]: ps for t, ps in assigned.items() if t in ids})
            group.put_member(ConsumerMember(
                m.member_id, instance_id=m.group_instance_id, rack_id=subscription.rack_id, client_id=m.client_id,
                client_host=m.client_host, subscribed_topic_names=tuple(subscription.topics),
                rebalance_timeout_ms=m.rebalance_timeout_ms, member_epoch=epoch, previous_member_epoch=epoch,
                state=MemberState.STABLE, assigned=assigned_ids,
                classic=ClassicMetadata(m.session_timeout_ms, tuple((n, bytes(d)) for n, d in m.protocols))))
            group.target[m.member_id] = assigned_ids
        _, _, group.metadata_hash = self._subscribed_metadata(group, group.members)
        # Kafka's order: the classic group goes, then members, epoch, targets, target epoch, current assignments.
        entries.append((records.group_metadata_key(group_id), None))
        entries += [member_record(group_id, m) for m in group.members.values()]
        entries.append(epoch_record(group_id, epoch, group.metadata_hash))
        entries += [target_record(group_id, m, t) for m, t in group.target.items()]
        entries.append(assignment_epoch_record(group_id, epoch))
        entries += [current_record(group_id, m) for m in group.members.values()]
        return group

    def _finish_upgrade(self, classic: GroupMetadata) -> set[str]:
        """The conversion is stored: the classic group's parked requests are told to rejoin and its timers go.
        Returns its members, whose sessions the caller starts again as the consumer group's."""
        group_id = classic.group_id
        for member in classic.members.values():
            for slot, answer in (("join_callback", join_result(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)),
                                 ("sync_callback", sync_result(ErrorCode.REBALANCE_IN_PROGRESS))):
                callback = getattr(member, slot)
                setattr(member, slot, None)
                if callback is not None:
                    callback(answer)
            self.scheduler.cancel(("heartbeat", group_id, member.member_id))
        for member_id in classic.pending_members:
            self.scheduler.cancel(("heartbeat", group_id, member_id))
        self.scheduler.cancel(("join", group_id))
        self.scheduler.cancel(("sync", group_id))
        self._initial_delay.discard(group_id)
        log.info("group_upgraded", group=group_id, generation=classic.generation_id, members=len(classic.members))
        return set(classic.members)

    # ================================================================== consumer -> classic
    def _downgrades_without(self, group: ConsumerGroup, leaving_id: str | None) -> bool:
        """Whether removing this member (None: none) leaves only classic members, and going back is allowed."""
        others = [m for k, m in group.members.items() if k != leaving_id]
        return (bool(others) and all(m.classic is not None for m in others) and self._migration_allowed("downgrade")
                and len(others) <= self.config.max_size)

    def _downgrade(self, group: ConsumerGroup, leaving_id: str | None, reason: str) -> ErrorCode:
        """Replace the consumer group by a classic group of its other members. It rebalances at once when a
        member left; when a classic static member just took the last consumer member's place (``leaving_id``
        None) it stays Stable, each member with its target assignment."""
        group_id = group.group_id
        now = self.now_ms()
        classic = GroupMetadata(group_id, state=GroupState.STABLE, generation_id=group.group_epoch,
                                protocol_type="consumer", state_timestamp_ms=now, offsets=group.offsets)
        classic.pending_txn_offsets = group.pending_txn_offsets
        for m in group.members.values():
            if m.member_id == leaving_id:
                continue
            classic.members[m.member_id] = MemberMetadata(
                m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.classic.session_timeout_ms, "consumer", list(m.classic.protocols), is_new=False)
            if m.instance_id is not None:
                classic.static_members[m.instance_id] = m.member_id
        try:
            classic.protocol_name = classic.select_protocol()
            names = self.topic_names_by_id()
            for member in classic.members.values():
                member.assignment = self._classic_assignment(group.target.get(member.member_id, {}),
                                                             member.metadata_for(classic.protocol_name), names)
        except (ValueError, KeyError):
            log.warning("downgrade_refused", group=group_id, reason="members share no protocol or one is malformed")
            return self._remove_consumer_members(group, [leaving_id], reason) if leaving_id else ErrorCode.NONE
        classic.leader_id = next(iter(classic.members))
        entries = group_tombstones(group) + [self._group_record(classic)]
        error = self._store(group_id, entries)
        if error:
            return error
        for member_id in group.members:
            self._cancel_consumer_timers(group_id, member_id)
        # The classic group's state is set as built, not replayed: the record keeps one protocol per member.
        self.groups[group_id] = classic
        for member in classic.members.values():
            self._heartbeat(classic, member)
        log.info("group_downgraded", group=group_id, generation=classic.generation_id, left=leaving_id,
                 reason=reason, members=len(classic.members))
        if leaving_id is not None:
            self._prepare_rebalance(classic, f"downgrade of group {group_id} from consumer to classic")
        return ErrorCode.NONE
