"""ConsumerGroupHeartbeat: KIP-848's one request for joining, staying, reconciling and leaving.

Mixed into ``GroupCoordinator``. Each heartbeat computes the records of its change (member, group epoch,
target assignment, current assignment), appends them to ``__consumer_offsets`` and only then applies them
through ``replay``, the same path that loads a shard: what a member was told is what the log holds.

Invariants:
* a group id names one group of one type: a heartbeat converts an empty classic group (keeping its
  offsets) and, by online migration (``migration.py``), a classic group with members;
* the target assignment is recomputed only when the group epoch moved past the assignment epoch;
* each member has one session timer and at most one revocation timer (its rebalance timeout while it
  holds partitions it must give up); either firing fences it, which releases its partitions.
"""

from __future__ import annotations

import uuid

import structlog

from kbroker.coordinators.group.consumer.assignors import ASSIGNORS, MemberSpec, assignor_of
from kbroker.coordinators.group.consumer.model import (
    LEAVE_EPOCH, STATIC_LEAVE_EPOCH, Assignment, ConsumerGroup, ConsumerMember, MemberState, normalized)
from kbroker.coordinators.group.consumer.reconcile import next_member
from kbroker.coordinators.group.consumer.records import (
    assignment_epoch_record, current_record, epoch_record, member_record, member_tombstones, metadata_hash,
    target_record, wire)
from kbroker.coordinators.group import records
from kbroker.coordinators.group.group import GroupMetadata
from kbroker.coordinators.group.state import GroupState
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.regex import InvalidRegex, compiled, matching
from kbroker.protocol.types import uuid_to_str

log = structlog.get_logger("coordinators.group")


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def error_response(code: ErrorCode, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "member_id": None,
            "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}


def wire_assignment(assignment: Assignment) -> dict:
    """A heartbeat answer's assignment (ConsumerGroupHeartbeat's and ShareGroupHeartbeat's)."""
    return {"topic_partitions": wire(assignment)}


def _owned(topic_partitions) -> Assignment | None:
    if topic_partitions is None:
        return None
    return normalized({bytes(tp.topic_id): tp.partitions for tp in topic_partitions})


def _check_static_holder(holder_id: str | None, instance_id: str, member_id: str) -> None:
    """A static member speaks for its instance id only while it holds it."""
    if holder_id is None:
        raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if holder_id != member_id:
        raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {instance_id} was fenced by "
                             f"member {holder_id}.")


class ConsumerGroupHeartbeat:
    # ================================================================== the request
    def consumer_group_heartbeat(self, *, version: int, group_id: str, member_id: str, member_epoch: int,
                                 instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
                                 subscribed_topic_names: list[str] | None, subscribed_topic_regex: str | None,
                                 server_assignor: str | None, topic_partitions, client_id: str,
                                 client_host: str) -> dict:
        try:
            self._validate_heartbeat(version, group_id, member_id, member_epoch, instance_id, rack_id,
                                     rebalance_timeout_ms, subscribed_topic_names, subscribed_topic_regex,
                                     server_assignor, topic_partitions)
            if member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._consumer_leave(group_id, member_id, member_epoch, instance_id)
            return self._consumer_heartbeat(group_id, member_id or self._new_member_id(), member_epoch,
                                            instance_id, rack_id, rebalance_timeout_ms, subscribed_topic_names,
                                            subscribed_topic_regex, server_assignor, _owned(topic_partitions),
                                            client_id, client_host)
        except HeartbeatError as e:
            return error_response(e.code, e.message)

    @staticmethod
    def _new_member_id() -> str:
        """ConsumerGroupHeartbeat v0: the coordinator names the member, as Kafka's Uuid prints."""
        return uuid_to_str(uuid.uuid4().bytes)

    def _validate_heartbeat(self, version, group_id, member_id, member_epoch, instance_id, rack_id,
                            rebalance_timeout_ms, names, regex, assignor, topic_partitions) -> None:
        def invalid(message: str) -> HeartbeatError:
            return HeartbeatError(ErrorCode.INVALID_REQUEST, message)
        if (version >= 1 or member_epoch > 0 or member_epoch == LEAVE_EPOCH) and not member_id:
            raise invalid("MemberId can't be empty.")
        if not group_id:
            raise invalid("GroupId can't be empty.")
        if instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if rack_id == "":
            raise invalid("RackId can't be empty.")
        if member_epoch == 0:
            if rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if topic_partitions is None or len(topic_partitions):
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if names is None and regex is None:
                raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                              "(re-)joining.")
        elif member_epoch == STATIC_LEAVE_EPOCH:
            if instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif member_epoch < STATIC_LEAVE_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        if assignor is not None and assignor not in self.config.consumer_assignors:
            raise HeartbeatError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                 f"ServerAssignor {assignor} is not supported. Supported assignors: "
                                 f"{', '.join(self.config.consumer_assignors)}.")
        if regex:
            try:
                compiled(regex)
            except InvalidRegex as e:
                raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                     f"SubscribedTopicRegex `{regex}` is not a valid regular expression: "
                                     f"{e.description}.")

    # ================================================================== group and member lookup
    def _consumer_group_for(self, group_id: str, create: bool, entries: list) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return group
        # (a classic group in state Empty, a member that was asked for its id still pending or not, is
        # replaced, as Kafka replaces it)
        if group is None or (isinstance(group, GroupMetadata) and group.is_(GroupState.EMPTY) and not group.members):
            if not create:   # (an empty classic group is replaced only by a member joining)
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found."
                                     if group is None else f"Group {group_id} is not a consumer group.")
            if group is not None and group.generation_id > 0:
                # An empty classic group becomes a consumer group: its record goes, its offsets stay.
                entries.append((records.group_metadata_key(group_id), None))
            fresh = ConsumerGroup(group_id, state_timestamp_ms=self.now_ms())
            if group is not None:
                fresh.offsets, fresh.pending_txn_offsets = group.offsets, group.pending_txn_offsets
            return fresh
        if create and isinstance(group, GroupMetadata):
            return self._upgraded(group, entries)     # online migration, or GROUP_ID_NOT_FOUND
        raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def _member_for(self, group: ConsumerGroup, member_id: str, epoch: int, instance_id: str | None,
                    owned: Assignment | None, entries: list) -> ConsumerMember:
        if instance_id is not None:
            holder_id = group.static_members.get(instance_id)
            if epoch == 0:
                if holder_id is None or holder_id == member_id:
                    return group.members.get(member_id) or ConsumerMember(member_id, instance_id=instance_id)
                holder = group.members[holder_id]
                # (a classic static member never says it leaves for a while: its successor just takes over)
                if holder.member_epoch != STATIC_LEAVE_EPOCH and holder.classic is None:
                    raise HeartbeatError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                         f"Static member {member_id} with instance id {instance_id} cannot join "
                                         f"the group because the instance id is owned by {holder_id} member.")
                # The static member is back under a new id: it takes its predecessor's place and partitions.
                entries += member_tombstones(group.group_id, holder_id)
                return holder.with_(member_id=member_id, member_epoch=0, previous_member_epoch=0)
            _check_static_holder(holder_id, instance_id, member_id)
        member = group.members.get(member_id)
        if member is None:
            if epoch != 0:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group.group_id}.")
            return ConsumerMember(member_id, instance_id=instance_id)
        if epoch == 0:
            # A member that lost track of its epoch joins again under its own id: as Kafka 4.2, it stays the
            # member it was (its partitions and epoch) and is sent its whole assignment.
            return member
        if epoch > member.member_epoch:
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a greater member epoch ({epoch}) than the one "
                                 f"known by the group coordinator ({member.member_epoch}). The member must "
                                 f"abandon all its partitions and rejoin.")
        if epoch < member.member_epoch and not (
                epoch == member.previous_member_epoch and owned is not None
                and all(ps <= member.assigned.get(t, frozenset()) for t, ps in owned.items())):
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a smaller member epoch ({epoch}) than the one "
                                 f"known by the group coordinator ({member.member_epoch}). The member must "
                                 f"abandon all its partitions and rejoin.")
        return member

    # ================================================================== subscriptions and metadata
    @staticmethod
    def _resolve_regexes(topics: dict, regexes: set[str]) -> dict[str, frozenset[str]]:
        """Each expression's topics: internal ones too, as Kafka's coordinator resolves them."""
        return {r: matching(r, topics) for r in regexes}

    def _subscribed_metadata(self, group: ConsumerGroup, members: dict[str, ConsumerMember]
                             ) -> tuple[dict[str, frozenset[bytes]], dict[bytes, int], int]:
        """Each member's subscribed topic ids, the partition counts of those topics, and their hash."""
        topics = self.topics()
        group.resolved_regexes = self._resolve_regexes(topics, {m.subscribed_topic_regex for m in members.values()
                                                                if m.subscribed_topic_regex})
        per_member: dict[str, frozenset[bytes]] = {}
        counts: dict[bytes, int] = {}
        described = []
        for member_id, m in members.items():
            names = set(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                names |= group.resolved_regexes.get(m.subscribed_topic_regex, frozenset())
            ids = set()
            for name in names:
                meta = topics.get(name)
                if meta is None or meta.partitions <= 0:
                    continue
                topic_id = bytes(meta.topic_id)
                ids.add(topic_id)
                if topic_id not in counts:
                    counts[topic_id] = meta.partitions
                    described.append(f"{name}:{topic_id.hex()}:{meta.partitions}")
            per_member[member_id] = frozenset(ids)
        return per_member, counts, metadata_hash(described)

    # ================================================================== a heartbeat
    def _consumer_heartbeat(self, group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout_ms,
                            names, regex, assignor, owned, client_id, client_host) -> dict:
        entries: list[tuple[bytes, bytes | None]] = []
        group = self._consumer_group_for(group_id, member_epoch == 0, entries)
        if (len(group.members) >= self.config.consumer_max_size and member_id not in group.members):
            raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                 f"The consumer group has reached its maximum capacity of "
                                 f"{self.config.consumer_max_size} members.")
        predecessor = group.static_members.get(instance_id) if instance_id is not None else None
        member = self._member_for(group, member_id, member_epoch, instance_id, owned, entries)
        updated = member.with_(
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=rack_id if rack_id is not None else member.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms if rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            server_assignor=assignor if assignor is not None else member.server_assignor,
            subscribed_topic_names=tuple(names) if names is not None else member.subscribed_topic_names,
            subscribed_topic_regex=(regex or None) if regex is not None else member.subscribed_topic_regex,
            client_id=client_id, client_host=client_host, classic=None)
        group, current = self._apply_member(group, member, updated, predecessor, owned, entries)
        self._schedule_consumer_session(group_id, current.member_id)
        if current.state is MemberState.UNREVOKED_PARTITIONS:
            self._schedule_revocation(group_id, current)
        else:
            self.scheduler.cancel(("consumer-revocation", group_id, current.member_id))
        response = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": current.member_id,
                    "member_epoch": current.member_epoch,
                    "heartbeat_interval_ms": self.group_setting(group_id, "consumer.heartbeat.interval.ms",
                                                                self.config.consumer_heartbeat_interval_ms),
                    "assignment": None}
        full = member_epoch == 0 or (rebalance_timeout_ms != -1 and (names is not None or regex is not None)
                                     and owned is not None)
        if full or current.assigned != member.assigned:
            response["assignment"] = wire_assignment(current.assigned)
        return response

    def _apply_member(self, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
                      predecessor: str | None, owned: Assignment | None, entries: list
                      ) -> tuple[ConsumerGroup, ConsumerMember]:
        """Store and apply one member's change, whichever protocol it speaks: its record, a new group epoch
        if the group's subscriptions moved, a new target assignment if the epoch moved past it, and the
        member's next step towards its target. ``predecessor``: the member holding its instance id before
        (a static member back under a new id takes its place). Returns the group and member as stored."""
        group_id = group.group_id
        replacing = predecessor not in (None, updated.member_id)
        new_member = member.member_id not in group.members
        if new_member or updated.stored() != member.stored():
            entries.append(member_record(group_id, updated))
        members = {**{k: v for k, v in group.members.items() if k != member.member_id and
                      not (updated.instance_id and v.instance_id == updated.instance_id)},
                   updated.member_id: updated}
        per_member, counts, metadata_hash = self._subscribed_metadata(group, members)
        group_epoch = group.group_epoch
        subscription_changed = updated.subscription() != member.subscription()
        # (a static member back under a new id takes its predecessor's place: no new epoch for that)
        if (group_epoch == 0 or (new_member and not replacing) or subscription_changed
                or metadata_hash != group.metadata_hash):
            group_epoch += 1
            entries.append(epoch_record(group_id, group_epoch, metadata_hash))
        target_epoch, targets = group.assignment_epoch, dict(group.target)
        if group_epoch > group.assignment_epoch:
            # A static member back under a new id keeps its predecessor's target as its current one.
            specs = {m: MemberSpec(per_member[m], members[m].instance_id,
                                   group.target.get(predecessor if m == updated.member_id and replacing else m, {}),
                                   members[m].rack_id)
                     for m in members}
            by_id = self.topic_names_by_id()
            racks = lambda topic_id, index: self.partition_racks(by_id.get(topic_id, ""), index)   # noqa: E731
            targets = ASSIGNORS[assignor_of(members.values(), self.config.consumer_assignors[0])](specs, counts,
                                                                                                   racks)
            for m, target in targets.items():
                if normalized(target) != group.target.get(m):
                    entries.append(target_record(group_id, m, target))
            target_epoch = group_epoch
            entries.append(assignment_epoch_record(group_id, target_epoch))
        elif replacing:
            targets[updated.member_id] = group.target.get(predecessor, {})
            entries.append(target_record(group_id, updated.member_id, targets[updated.member_id]))
        owners = group.partition_owners()
        reconciled = next_member(updated, target_epoch, normalized(targets.get(updated.member_id, {})),
                                 lambda t, p: owners.get((t, p)), owned, per_member[updated.member_id],
                                 subscription_changed)
        if reconciled != updated or new_member:
            entries.append(current_record(group_id, reconciled))
        error = self._store(group_id, entries)
        if error:
            raise HeartbeatError(error)
        previous, upgraded = self.groups.get(group_id), set()
        if previous is not group:
            if isinstance(previous, GroupMetadata) and previous.members:
                upgraded = self._finish_upgrade(previous)
            self.groups[group_id] = group
        for key, value in entries:
            self.replay(key, value)
        group = self.groups[group_id]
        for member_id in upgraded & group.members.keys():
            self._schedule_consumer_session(group_id, member_id)
        return group, group.members[reconciled.member_id]

    # ================================================================== leaving and fencing
    def _consumer_leave(self, group_id: str, member_id: str, epoch: int, instance_id: str | None) -> dict:
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):   # (Kafka's words for a group looked up to leave, not to join)
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found." if group is None
                                 else f"Group {group_id} is not a consumer group.")
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group_id}.")
        else:
            holder = group.static_members.get(instance_id)
            _check_static_holder(holder, instance_id, member_id)
            member = group.members[holder]
        if epoch == STATIC_LEAVE_EPOCH:
            # A static member's temporary leave: it keeps its place and partitions until its session ends.
            gone = member.with_(member_epoch=STATIC_LEAVE_EPOCH, pending_revocation={})
            error = self._store(group_id, [current_record(group_id, gone)])
            if error:
                raise HeartbeatError(error)
            self.replay(*current_record(group_id, gone))
            self.scheduler.cancel(("consumer-revocation", group_id, member.member_id))
        else:
            error = self._fence_consumer(group, member.member_id, "left the group")
            if error:
                raise HeartbeatError(error)
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": member.member_id,
                "member_epoch": epoch, "heartbeat_interval_ms": 0, "assignment": None}

    def _fence_consumer(self, group: ConsumerGroup, member_id: str, reason: str) -> ErrorCode:
        """Remove a member; its partitions are free for the others at their next heartbeat. If only classic
        members would remain, the group goes back to the classic protocol instead (online migration)."""
        if self._downgrades_without(group, member_id):
            return self._downgrade(group, member_id, reason)
        return self._remove_consumer_members(group, [member_id], reason)

    def _remove_consumer_members(self, group: ConsumerGroup, member_ids: list[str], reason: str) -> ErrorCode:
        """Remove members under one new group epoch."""
        remaining = {k: v for k, v in group.members.items() if k not in member_ids}
        _, _, metadata_hash = self._subscribed_metadata(group, remaining)
        entries = [entry for member_id in member_ids for entry in member_tombstones(group.group_id, member_id)]
        entries.append(epoch_record(group.group_id, group.group_epoch + 1, metadata_hash))
        error = self._store(group.group_id, entries)
        if error:
            return error
        for key, value in entries:
            self.replay(key, value)
        for member_id in member_ids:
            self._cancel_consumer_timers(group.group_id, member_id)
            log.info("consumer_member_removed", group=group.group_id, member=member_id, reason=reason,
                     group_epoch=group.group_epoch)
        return ErrorCode.NONE

    def _cancel_consumer_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("consumer-session", "consumer-revocation", "consumer-join", "consumer-sync"):
            self.scheduler.cancel((kind, group_id, member_id))

    def _schedule_consumer_session(self, group_id: str, member_id: str) -> None:
        """A member's session: the group's (its own config, else the broker's) for the consumer protocol, its
        own for a classic member."""
        member = self.groups[group_id].members[member_id]
        timeout = member.classic.session_timeout_ms if member.classic else self.group_setting(
            group_id, "consumer.session.timeout.ms", self.config.consumer_session_timeout_ms)
        self.scheduler.schedule(("consumer-session", group_id, member_id), timeout,
                                lambda: self._consumer_expired(group_id, member_id, None, "session timeout expired"))

    def _schedule_revocation(self, group_id: str, member: ConsumerMember) -> None:
        key = ("consumer-revocation", group_id, member.member_id)
        if self.scheduler.is_scheduled(key):
            return
        self.scheduler.schedule(key, max(member.rebalance_timeout_ms, 0),
                                lambda: self._consumer_expired(group_id, member.member_id, member.member_epoch,
                                                               "did not revoke its partitions in time"))

    def _consumer_expired(self, group_id: str, member_id: str, epoch: int | None, reason: str) -> None:
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or member_id not in group.members:
            return
        member = group.members[member_id]
        if epoch is not None and (member.member_epoch != epoch
                                  or member.state is not MemberState.UNREVOKED_PARTITIONS):
            return
        if self._fence_consumer(group, member_id, reason):
            # The append failed (the shard is moving): try again after another session.
            self._schedule_consumer_session(group_id, member_id)
