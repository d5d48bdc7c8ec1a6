"""Classic members of a consumer group: JoinGroup, SyncGroup, Heartbeat and LeaveGroup answered by a KIP-848
group, as Kafka 4 answers a member that has not restarted with ``group.protocol=consumer`` yet.

Mixed into ``GroupCoordinator``. A classic member is a consumer group member with ``classic`` metadata: its
embedded subscription is its subscription, and the owned partitions it reports in JoinGroup (cooperative
assignors) drive its reconciliation like a heartbeat's. It has no leader and no client-side assignment:
JoinGroup answers it at once with its member epoch as the generation; SyncGroup hands it its current
assignment; Heartbeat tells it REBALANCE_IN_PROGRESS when it must rejoin (the group epoch moved on, it must
give partitions up, or partitions it waits for are free).

Invariants:
* a classic member is never given a partition another member still holds (the same reconciliation as the
  consumer protocol's);
* each classic member has a session timer with its own session timeout, a join timer while it was asked to
  rejoin and has not, and a sync timer between its JoinGroup and SyncGroup; any of them firing fences it;
* a request from a member that speaks the consumer protocol is UNKNOWN_MEMBER_ID here.
"""

from __future__ import annotations

import uuid

from kbroker.coordinators.group.consumer import embedded
from kbroker.coordinators.group.consumer.heartbeat import HeartbeatError
from kbroker.coordinators.group.consumer.model import (
    Assignment, ClassicMetadata, ConsumerGroup, ConsumerMember, MemberState, normalized)
from kbroker.coordinators.group.consumer.records import member_tombstones
from kbroker.coordinators.group.group import join_result, sync_result
from kbroker.protocol.errors import ErrorCode


def _sync_answer(error: ErrorCode, assignment: bytes = b"", protocol_type: str | None = None,
                 protocol_name: str | None = None) -> dict:
    return {"error_code": error, "assignment": assignment, "protocol_type": protocol_type,
            "protocol_name": protocol_name}


class ClassicMembers:
    # ================================================================== JoinGroup
    def _classic_join_consumer_group(self, group: ConsumerGroup, *, member_id: str, instance_id: str | None,
                                     client_id: str, client_host: str, session_timeout_ms: int,
                                     rebalance_timeout_ms: int, protocol_type: str,
                                     protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> dict:
        unknown = not member_id
        if unknown:
            member_id = str(uuid.uuid4())
        if len(group.members) >= self.config.consumer_max_size and member_id not in group.members:
            return join_result(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
        if not group.classic_protocols_supported(protocol_type, [name for name, _ in protocols]):
            return join_result(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if unknown and instance_id is None and require_known_member_id:
            return join_result(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        try:
            subscription = embedded.subscription(protocols[0][1])
        except embedded.MalformedProtocol:
            return join_result(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        entries: list = []
        try:
            predecessor = group.static_members.get(instance_id) if instance_id is not None else None
            member = self._classic_member_for(group, member_id, instance_id, unknown, entries)
        except HeartbeatError as e:
            return join_result(e.code, member_id)
        ids = self.topic_ids_by_name()
        owned = normalized({ids[tp.topic]: tp.partitions for tp in subscription.owned_partitions
                            if tp.topic in ids})
        updated = member.with_(
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms, server_assignor=None,
            subscribed_topic_names=tuple(subscription.topics), client_id=client_id, client_host=client_host,
            classic=ClassicMetadata(session_timeout_ms, tuple((n, bytes(m)) for n, m in protocols)))
        try:
            group, current = self._apply_member(group, member, updated, predecessor, owned, entries)
        except HeartbeatError as e:
            return join_result(e.code, member_id)
        group_id = group.group_id
        joined = join_result(ErrorCode.NONE, current.member_id, current.member_epoch, "consumer",
                             current.classic.protocol_name, "", [])
        if predecessor not in (None, current.member_id) and self._downgrades_without(group, None):
            # It took the place of the last member speaking the consumer protocol: the group is classic again,
            # Stable, and this member syncs into its predecessor's partitions.
            error = self._downgrade(group, None, f"static member {instance_id} rejoined with the classic protocol")
            return join_result(error, member_id) if error else joined
        self.scheduler.cancel(("consumer-join", group_id, current.member_id))
        self._schedule_consumer_session(group_id, current.member_id)
        self.scheduler.schedule(("consumer-sync", group_id, current.member_id), max(rebalance_timeout_ms, 0),
                                lambda: self._consumer_expired(group_id, current.member_id, None,
                                                               "did not sync within the rebalance timeout"))
        return joined

    def _classic_member_for(self, group: ConsumerGroup, member_id: str, instance_id: str | None, unknown: bool,
                            entries: list) -> ConsumerMember:
        if instance_id is None:
            return group.members.get(member_id) or ConsumerMember(member_id)
        holder_id = group.static_members.get(instance_id)
        if unknown:
            if holder_id is None:
                return ConsumerMember(member_id, instance_id=instance_id)
            # A static member back under a new id takes its predecessor's place and partitions.
            entries += member_tombstones(group.group_id, holder_id)
            return group.members[holder_id].with_(member_id=member_id, member_epoch=0, previous_member_epoch=0)
        return self._classic_member(group, member_id, instance_id)

    @staticmethod
    def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        """The classic member a request speaks for: UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID otherwise."""
        if instance_id is not None:
            holder_id = group.static_members.get(instance_id)
            if holder_id is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID)
            if holder_id != member_id:
                raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    def _classic_assignment(self, assignment: Assignment, metadata: bytes, names: dict | None = None) -> bytes:
        """An assignment as a classic member reads it: topics by name (``names``: id -> name, else the topics
        now), in the version of its embedded protocol (``metadata``, its JoinGroup protocol's)."""
        names = self.topic_names_by_id() if names is None else names
        return embedded.assignment_bytes({names[t]: ps for t, ps in assignment.items() if t in names},
                                         embedded.version_of(metadata))

    def _must_rejoin(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """Ask the member to rejoin (REBALANCE_IN_PROGRESS); it is fenced if it does not in its rebalance
        timeout."""
        key = ("consumer-join", group.group_id, member.member_id)
        if not self.scheduler.is_scheduled(key):
            group_id, member_id = group.group_id, member.member_id
            self.scheduler.schedule(key, max(member.rebalance_timeout_ms, 0),
                                    lambda: self._consumer_expired(group_id, member_id, None,
                                                                   "did not rejoin within the rebalance timeout"))
        raise HeartbeatError(ErrorCode.REBALANCE_IN_PROGRESS)

    # ================================================================== SyncGroup
    def _classic_sync_consumer_group(self, group: ConsumerGroup, *, generation_id: int, member_id: str,
                                     instance_id: str | None, protocol_type: str | None,
                                     protocol_name: str | None) -> dict:
        try:
            member = self._classic_member(group, member_id, instance_id)
            if generation_id != member.member_epoch:
                raise HeartbeatError(ErrorCode.ILLEGAL_GENERATION)
            if ((protocol_type is not None and protocol_type != "consumer")
                    or (protocol_name is not None and protocol_name != member.classic.protocol_name)):
                raise HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
                self._must_rejoin(group, member)
        except HeartbeatError as e:
            return sync_result(e.code)
        self.scheduler.cancel(("consumer-sync", group.group_id, member_id))
        self._schedule_consumer_session(group.group_id, member_id)
        return _sync_answer(ErrorCode.NONE, self._classic_assignment(member.assigned, member.classic.protocols[0][1]),
                            protocol_type, protocol_name)

    # ================================================================== Heartbeat
    def _classic_heartbeat_consumer_group(self, group: ConsumerGroup, *, generation_id: int, member_id: str,
                                          instance_id: str | None) -> ErrorCode:
        try:
            member = self._classic_member(group, member_id, instance_id)
            if generation_id != member.member_epoch:
                raise HeartbeatError(ErrorCode.ILLEGAL_GENERATION)
            self._schedule_consumer_session(group.group_id, member_id)
            if (member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS
                    or (member.state is MemberState.UNRELEASED_PARTITIONS
                        and not group.waits_on_released_partitions(member))):
                self._must_rejoin(group, member)
        except HeartbeatError as e:
            return e.code
        return ErrorCode.NONE

    # ================================================================== LeaveGroup
    def _classic_leave_consumer_group(self, group: ConsumerGroup, leaving: list[tuple[str, str | None]]
                                      ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Members leave under one new group epoch; an instance id alone (an admin's removal) names its
        member."""
        errors, gone = [], []
        for member_id, instance_id in leaving:
            try:
                if instance_id is not None and not member_id:
                    member_id = group.static_members.get(instance_id, "")
                member = self._classic_member(group, member_id, instance_id)
            except HeartbeatError as e:
                errors.append(e.code)
                continue
            errors.append(ErrorCode.NONE)
            if member.member_id not in gone:
                gone.append(member.member_id)
        if gone:
            error = self._remove_consumer_members(group, gone, "left the group")
            if error:
                return error, [error] * len(leaving)
        return ErrorCode.NONE, errors
