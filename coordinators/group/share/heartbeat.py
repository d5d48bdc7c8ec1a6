"""ShareGroupHeartbeat and ShareGroupDescribe (KIP-932): joining, staying in and leaving a share group.

Mixed into ``GroupCoordinator``. A member joins with epoch 0 and its subscription, is given its partitions
at the group's epoch, and heartbeats with the epoch it was given; -1 leaves. Membership changes bump the
group epoch. The group, its members, their targets and current assignments are records of
``__consumer_offsets`` (Kafka's, ``records.py``) written before the answer, so a coordinator that loads the
shard (a restart, or a move in the cluster) knows the members at their epochs.

Invariants:
* a group id names one group of one type (a share group's id is refused by the other protocols, and theirs
  here, with GROUP_ID_NOT_FOUND);
* each member has one session timer (``group.share.session.timeout.ms``); its expiry removes the member.
"""

from __future__ import annotations

import structlog

from kbroker.coordinators.group import records
from kbroker.coordinators.group.consumer.heartbeat import HeartbeatError, error_response, wire_assignment
from kbroker.coordinators.group.group import GroupMetadata
from kbroker.coordinators.group.consumer.model import normalized
from kbroker.coordinators.group.share import records as share_records
from kbroker.coordinators.group.share.initializing import ShareInitialization
from kbroker.coordinators.group.share.assignor import share_assign
from kbroker.coordinators.group.share.model import ShareGroup, ShareMember
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("coordinators.group")
MEMBER_ID_MAX = 36   # (a UUID's length: Kafka refuses a longer share member id)


class ShareGroupHeartbeat(ShareInitialization):
    def share_group_heartbeat(self, *, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                              subscribed_topic_names: list[str] | None, client_id: str, client_host: str) -> dict:
        try:
            if not member_id:   # (Kafka 4.2 refuses it before its coordinator sees it: no message)
                raise HeartbeatError(ErrorCode.INVALID_REQUEST)
            if len(member_id) > MEMBER_ID_MAX:
                raise HeartbeatError(ErrorCode.INVALID_REQUEST,
                                     f"MemberId can't be longer than {MEMBER_ID_MAX} characters.")
            if not group_id:
                raise HeartbeatError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
            if rack_id == "":
                raise HeartbeatError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
            if member_epoch == 0 and not subscribed_topic_names:
                raise HeartbeatError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
            if member_epoch < -1:
                raise HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
            if member_epoch == -1:   # (a group looked up to leave: Kafka's words for it are its lookup's own)
                group = self.groups.get(group_id)
                if not isinstance(group, ShareGroup):
                    raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found." if group is None
                                         else f"Group {group_id} is not a share group.")
                return self._share_leave(group, member_id)
            group = self._share_group_for(group_id, create=member_epoch == 0)
            return self._share_heartbeat(group, member_id, member_epoch, rack_id, subscribed_topic_names,
                                         client_id, client_host)
        except HeartbeatError as e:
            return error_response(e.code, e.message)

    def _share_group_for(self, group_id: str, create: bool) -> ShareGroup:
        group = self.groups.get(group_id)
        if isinstance(group, ShareGroup):
            return group
        if group is None or (isinstance(group, GroupMetadata) and group.is_empty and not group.offsets
                             and group.generation_id == 0):
            if not create:   # (an empty classic group is replaced only by a member joining)
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found." if group is None
                                     else f"Group {group_id} is not a share group.")
            return ShareGroup(group_id, state_timestamp_ms=self.now_ms())
        raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")

    def _share_subscriptions(self, members: dict[str, ShareMember]) -> tuple[dict, dict[bytes, int]]:
        """Each member's subscribed topic ids, and the partition counts of those topics."""
        topics = self.topics()
        subscribed, counts = {}, {}
        for member_id, m in members.items():
            ids = set()
            for name in m.subscribed_topic_names:
                meta = topics.get(name)
                if meta is not None and meta.partitions > 0:
                    ids.add(bytes(meta.topic_id))
                    counts[bytes(meta.topic_id)] = meta.partitions
            subscribed[member_id] = frozenset(ids)
        return subscribed, counts

    def _share_heartbeat(self, group: ShareGroup, member_id: str, epoch: int, rack_id, names, client_id,
                         client_host) -> dict:
        member = group.members.get(member_id)
        if member is None:
            if epoch != 0:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group.group_id}.")
            if len(group.members) >= self.config.share_max_size:
                raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"The share group has reached its maximum capacity of "
                                     f"{self.config.share_max_size} members.")
            member = ShareMember(member_id)
        elif epoch > member.member_epoch:
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The share group member has a greater member epoch ({epoch}) than the one known by "
                                 f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                                 f"partitions and rejoin.")
        elif epoch not in (0, member.member_epoch, member.previous_member_epoch):
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The share group member has a smaller member epoch ({epoch}) than the one known by "
                                 f"the group coordinator ({member.member_epoch}), and it does not match the previous "
                                 f"member epoch ({member.previous_member_epoch}). The member must abandon all its "
                                 f"partitions and rejoin.")
        joined = member_id not in group.members
        subscription = tuple(names) if names is not None else member.subscribed_topic_names
        changed = joined or subscription != member.subscribed_topic_names
        updated = ShareMember(member_id, rack_id if rack_id is not None else member.rack_id, client_id, client_host,
                              subscription, member.member_epoch, member.assignment, member.previous_member_epoch)
        entries = []
        if joined or updated.metadata() != member.metadata():
            entries.append(share_records.member_record(group.group_id, updated))
        members = {**group.members, member_id: updated}
        subscribed, counts = self._share_subscriptions(members)
        hashed = share_records.topics_hash(counts)
        bump = changed or hashed != group.metadata_hash or group.group_epoch == 0 or \
            self._initialized_assignment_pending(group)
        epoch_after = group.group_epoch + 1 if bump else group.group_epoch
        if bump:
            entries.append(share_records.group_epoch_record(group.group_id, epoch_after, hashed))
        # The assignment is computed by a heartbeat once the group's epoch is past the target's (a member's
        # leaving moves only the group's epoch), not at every heartbeat, as Kafka computes it.
        targets, reassigned = group.target, epoch_after > group.assignment_epoch
        if reassigned:
            targets = share_assign(subscribed, counts, self._assignable(group), group.target)
            entries += [share_records.target_record(group.group_id, m, target) for m, target in targets.items()
                        if group.target.get(m) != target]
            entries.append(share_records.assignment_epoch_record(group.group_id, epoch_after))
        # No reconciliation: a member heartbeating is moved to the group's epoch and its target at once.
        assigned = targets.get(member_id, {})
        previous = member.member_epoch if epoch_after != member.member_epoch else member.previous_member_epoch
        if joined or epoch_after != member.member_epoch or assigned != member.assignment:
            entries.append(share_records.current_record(group.group_id, member_id, epoch_after, previous, assigned))
        marked, to_initialize, initializing = self._share_initializing(
            group, {t for m in members.values() for t in m.subscribed_topic_names})
        error = self._store(group.group_id, entries + marked)
        if error:
            raise HeartbeatError(error)
        if self.groups.get(group.group_id) is not group:
            self.groups[group.group_id] = group
        group.members = members
        if bump:
            group.group_epoch, group.metadata_hash = epoch_after, hashed
        if reassigned:   # (members learn their targets at their next heartbeat: each answer carries its own)
            group.target, group.assignment_epoch = dict(targets), epoch_after
        updated.member_epoch, updated.assignment, updated.previous_member_epoch = epoch_after, assigned, previous
        self._schedule_share_session(group.group_id, member_id)
        if to_initialize:   # (recorded initializing: the broker initializes them, the answer does not wait)
            group.initializing = initializing
            self.initialize_share_state(group.group_id, epoch_after, to_initialize)
        response = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": member_id,
                    "member_epoch": updated.member_epoch,
                    "heartbeat_interval_ms": self.group_setting(group.group_id, "share.heartbeat.interval.ms",
                                                                self.config.share_heartbeat_interval_ms),
                    "assignment": None}
        if epoch == 0 or names is not None or assigned != member.assignment or joined:
            response["assignment"] = wire_assignment(assigned)
        return response

    def _share_leave(self, group: ShareGroup, member_id: str) -> dict:
        if member_id not in group.members:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
        error = self._remove_share_member(group, member_id, "left the group")
        if error:
            raise HeartbeatError(error)
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": member_id,
                "member_epoch": -1, "heartbeat_interval_ms": 0, "assignment": None}

    def _remove_share_member(self, group: ShareGroup, member_id: str, reason: str) -> ErrorCode:
        """The member's records go and the group's epoch moves; the others' targets are computed again at the
        next heartbeat, as Kafka does."""
        remaining = {m: x for m, x in group.members.items() if m != member_id}
        hashed = share_records.topics_hash(self._share_subscriptions(remaining)[1])
        entries = share_records.member_tombstones(group.group_id, member_id)
        entries.append(share_records.group_epoch_record(group.group_id, group.group_epoch + 1, hashed))
        error = self._store(group.group_id, entries)
        if error:
            return error
        group.members = remaining
        group.target = {m: t for m, t in group.target.items() if m != member_id}
        group.group_epoch, group.metadata_hash = group.group_epoch + 1, hashed
        self.scheduler.cancel(("share-session", group.group_id, member_id))
        log.info("share_member_removed", group=group.group_id, member=member_id, reason=reason)
        return ErrorCode.NONE

    def _schedule_share_session(self, group_id: str, member_id: str) -> None:
        def expired():
            group = self.groups.get(group_id)
            if isinstance(group, ShareGroup) and member_id in group.members:
                if self._remove_share_member(group, member_id, "session timeout expired"):
                    self._schedule_share_session(group_id, member_id)
        timeout = self.group_setting(group_id, "share.session.timeout.ms", self.config.share_session_timeout_ms)
        self.scheduler.schedule(("share-session", group_id, member_id), timeout, expired)

    def replay_share_group(self, key, value) -> None:
        """Apply one share group record (at load; a heartbeat applies its own records as it writes them)."""
        group_id = key.group
        group = self.groups.get(group_id)
        if value is None:
            if not isinstance(group, ShareGroup):
                return
            if key.kind == 11:
                del self.groups[group_id]
            elif key.kind == 15:
                group.share_partitions, group.initializing = {}, {}
            elif key.kind == 10:
                group.members.pop(key.member, None)
            elif key.kind == 13:
                group.target.pop(key.member, None)
            return
        if not isinstance(group, ShareGroup):
            group = self.groups[group_id] = ShareGroup(group_id)
        member = group.members.get(key.member) or ShareMember(key.member) if key.member else None
        if key.kind == 11:
            group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash
        elif key.kind == 12:
            group.assignment_epoch = value.assignment_epoch
        elif key.kind == 15:   # (initializing since now, as Kafka replays it: asked again a retry interval on)
            group.share_partitions = {bytes(t.topic_id): (t.topic_name, frozenset(t.partitions))
                                      for t in value.initialized_topics}
            now = self.now_ms()
            group.initializing = {bytes(t.topic_id): (t.topic_name, frozenset(t.partitions), now)
                                  for t in getattr(value, "initializing_topics", None) or ()}
        elif key.kind == 10:
            member.rack_id, member.client_id, member.client_host = value.rack_id, value.client_id, value.client_host
            member.subscribed_topic_names = tuple(value.subscribed_topic_names)
        elif key.kind == 13:
            group.target[key.member] = normalized({bytes(t.topic_id): t.partitions for t in value.topic_partitions})
            return
        elif key.kind == 14:
            member.member_epoch, member.previous_member_epoch = value.member_epoch, value.previous_member_epoch
            member.assignment = normalized({bytes(t.topic_id): t.partitions for t in value.assigned_partitions})
        if member is not None:
            group.members[key.member] = member

    def create_share_group(self, group_id: str) -> tuple[ErrorCode, ShareGroup | None]:
        """An empty share group for AlterShareGroupOffsets to set the offsets of, as Kafka makes one."""
        entry = (records.share_group_key(group_id), records.share_group_value(0))
        error = self._store(group_id, [entry])
        if error:
            return error, None
        self.replay(*entry)
        return ErrorCode.NONE, self.groups[group_id]

    # ================================================================== ShareGroupDescribe
    def describe_share_group(self, group: ShareGroup) -> dict:
        """ShareGroupDescribe's entry for a share group (its handler refuses missing groups and other types)."""
        group_id = group.group_id
        names = self.topic_names_by_id()
        members = [{"member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                    "client_id": m.client_id, "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed_topic_names),
                    "assignment": {"topic_partitions": [
                        {"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)}
                        for t, ps in sorted(m.assignment.items())]}} for m in group.members.values()]
        return {"error_code": 0, "error_message": None, "group_id": group_id, "group_state": group.state,
                "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                "assignor_name": "simple", "members": members, "authorized_operations": -2147483648}
