"""The classic protocol's SyncGroup, Heartbeat and LeaveGroup, answered by the group each names.

Mixed into ``GroupCoordinator`` (``coordinator.py`` has JoinGroup and the rebalance they follow). A classic
group answers them itself; a consumer group answers its classic members (``consumer/classic_members.py``,
online migration); a share group or no group knows no such member.
"""

from __future__ import annotations

from typing import Callable

import structlog

from kbroker.coordinators.group.consumer.model import ConsumerGroup
from kbroker.coordinators.group.group import sync_result
from kbroker.coordinators.group.share.model import ShareGroup
from kbroker.coordinators.group.streams.model import StreamsGroup
from kbroker.coordinators.group.state import GroupState
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("coordinators.group")

S = GroupState
Respond = Callable[[dict], None]


class ClassicRequests:
    # ================================================================== SyncGroup
    def sync_group(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
                   respond: Respond) -> None:
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return respond(self._classic_sync_consumer_group(
                group, generation_id=generation_id, member_id=member_id, instance_id=group_instance_id,
                protocol_type=protocol_type, protocol_name=protocol_name))
        if group is None or isinstance(group, (ShareGroup, StreamsGroup)):
            return respond(sync_result(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.is_(S.DEAD):
            return respond(sync_result(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        error = self._validate_generation(group, member_id, group_instance_id, generation_id)
        if not error and ((protocol_type is not None and protocol_type != group.protocol_type)
                          or (protocol_name is not None and protocol_name != group.protocol_name)):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error:
            return respond(sync_result(error))
        member = group.members[member_id]
        if group.is_(S.EMPTY):
            return respond(sync_result(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.is_(S.PREPARING_REBALANCE):
            return respond(sync_result(ErrorCode.REBALANCE_IN_PROGRESS))
        if group.is_(S.STABLE):
            self._heartbeat(group, member)
            return respond(sync_result(ErrorCode.NONE, member.assignment, group))
        # CompletingRebalance: park until the leader's assignment arrives.
        self._answer_sync(group, member, sync_result(ErrorCode.REBALANCE_IN_PROGRESS))   # a retried sync supersedes
        member.sync_callback = respond
        self._heartbeat(group, member)
        if group.leader_id != member_id:
            return
        missing = [m for m in group.members if m not in assignments]
        if missing:
            log.warning("assignment_missing_members", group=group_id, members=missing)
        previous = {m.member_id: m.assignment for m in group.members.values()}
        for m in group.members.values():
            m.assignment = bytes(assignments.get(m.member_id, b""))
        error = self._store(group_id, [self._group_record(group)])
        if error:
            for m in group.members.values():
                m.assignment = previous[m.member_id]
            self._reset_and_propagate_assignment_error(group, error)
            return self._maybe_prepare_rebalance(group, f"storing the assignment failed: {error.name}")
        self.scheduler.cancel(("sync", group_id))
        group.transition_to(S.STABLE, self.now_ms())
        log.info("group_stable", group=group_id, generation=group.generation_id, members=len(group.members))
        for m in group.members.values():
            self._answer_sync(group, m, sync_result(ErrorCode.NONE, m.assignment, group))

    # ================================================================== Heartbeat
    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None) -> ErrorCode:
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return self._classic_heartbeat_consumer_group(group, generation_id=generation_id, member_id=member_id,
                                                          instance_id=group_instance_id)
        if group is None or isinstance(group, (ShareGroup, StreamsGroup)):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, member_id, group_instance_id)
        if error:
            return error
        if generation_id != group.generation_id:   # (before the state, as Kafka 4.2 checks it)
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        if group.is_(S.PREPARING_REBALANCE):
            self._heartbeat(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        self._heartbeat(group, member)
        return ErrorCode.NONE

    # ================================================================== LeaveGroup
    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove each (member id, instance id); returns the top-level error and one error per member."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return self._classic_leave_consumer_group(group, leaving)
        if group is None or isinstance(group, (ShareGroup, StreamsGroup)):
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(leaving)
        errors = []
        for member_id, instance_id in leaving:
            if instance_id is not None:
                current = group.static_members.get(instance_id)
                if current is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != current:
                    errors.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = current
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.scheduler.cancel(("heartbeat", group_id, member_id))
                errors.append(ErrorCode.NONE)
                continue
            member = group.members.get(member_id)
            if member is None:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            self._remove_member(group, member, "left the group")
            errors.append(ErrorCode.NONE)
        if ErrorCode.NONE in errors:   # one rebalance for all who left, a pending member too, as in Kafka 4.2
            self._after_removal(group, "members left the group")
        return ErrorCode.NONE, errors
