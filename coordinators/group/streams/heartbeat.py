"""StreamsGroupHeartbeat (KIP-1071): joining, staying in and leaving a streams group, and its delayed first
assignment. Mixed into ``GroupCoordinator``.

As for KIP-848 consumer groups, each heartbeat computes the records of its change (member, topology, group
epoch, target assignment, current assignment), appends them to ``__consumer_offsets`` and only then applies
them through ``replay``. The answer also names the internal topics the topology still lacks; the broker's
handler creates them, as Kafka's does.

Invariants:
* a group id names one group of one type: a joining member converts an empty classic group (keeping its
  offsets), never a group of another type;
* the topology is the one the group's first member brought: a member with another topology at the same or a
  newer epoch is refused, one at an older epoch is told STALE_TOPOLOGY;
* the target assignment is recomputed only when the group epoch moved past the assignment epoch, and only
  once the topology is ready (before, every member's target is empty);
* each member has one session timer and at most one revocation timer; either firing fences it.
"""

from __future__ import annotations

import hashlib

import structlog

from kbroker.coordinators.group import records
from kbroker.coordinators.group.group import GroupMetadata
from kbroker.coordinators.group.state import GroupState
from kbroker.coordinators.group.streams import topology as configuring
from kbroker.coordinators.group.streams.assignor import MemberSpec, assign
from kbroker.coordinators.group.streams.model import (
    LEAVE_EPOCH, STREAMS_GROUP_CONFIG_DEFAULTS, MemberState, StreamsGroup, StreamsMember, Target, keys)
from kbroker.coordinators.group.streams.reconcile import next_member
from kbroker.coordinators.group.streams.records import (
    assignment_epoch_record, current_record, epoch_record, member_record, member_tombstones, target_record,
    topology_record, wire)
from kbroker.coordinators.group.streams.replay import topology_of
from kbroker.coordinators.group.streams.validation import (
    StreamsError, check_tasks, contained, owned_tasks, streams_error_response, validate)
from kbroker.protocol.errors import ErrorCode
from kbroker.storage.java_order import hash_order

log = structlog.get_logger("coordinators.group")


class StreamsGroupHeartbeat:
    # ================================================================== the request
    def streams_group_heartbeat(self, request, client_id: str, client_host: str) -> tuple[dict, dict]:
        """The answer, and the internal topics to create (name -> configuring.InternalTopic)."""
        try:
            validate(request)
            if request.member_epoch == LEAVE_EPOCH:
                return self._streams_leave(request.group_id, request.member_id, request.shutdown_application), {}
            return self._streams_heartbeat(request, client_id, client_host)
        except StreamsError as e:
            return streams_error_response(e.code, e.message), {}

    def streams_config(self, group_id: str, name: str) -> int:
        """A streams setting: the group's own ``streams.<name>`` (GROUP resource) if set; else, for a group
        with configs of its own, Kafka's constant default (a group's configs are whole: Kafka fills the streams
        ones it lacks with their defaults, not the broker's settings); else the broker's ``group.streams.<name>``."""
        own = self.group_configs(group_id)
        if f"streams.{name}" in own:
            return int(own[f"streams.{name}"])
        if own and name in STREAMS_GROUP_CONFIG_DEFAULTS:
            return STREAMS_GROUP_CONFIG_DEFAULTS[name]
        return getattr(self.config, f"streams_{name.replace('.', '_')}")

    def _streams_group_for(self, group_id: str, joining: bool, entries: list) -> StreamsGroup:
        group = self.groups.get(group_id)
        if isinstance(group, StreamsGroup):
            return group
        if group is None or (joining and isinstance(group, GroupMetadata) and group.is_(GroupState.EMPTY)
                             and not group.members):
            if not joining:
                raise StreamsError(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {group_id} not found.")
            if group is not None and group.generation_id > 0:
                entries.append((records.group_metadata_key(group_id), None))
            fresh = StreamsGroup(group_id, state_timestamp_ms=self.now_ms())
            if group is not None:
                fresh.offsets, fresh.pending_txn_offsets = group.offsets, group.pending_txn_offsets
            return fresh
        raise StreamsError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")

    def _streams_member_for(self, group: StreamsGroup, member_id: str, epoch: int, owned) -> StreamsMember:
        member = group.members.get(member_id)
        if member is None:
            if epoch != 0:
                raise StreamsError(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Member {member_id} is not a member of group {group.group_id}.")
            return StreamsMember(member_id)
        if epoch == 0:
            return member
        if epoch > member.member_epoch:
            raise StreamsError(ErrorCode.FENCED_MEMBER_EPOCH,
                               f"The streams group member has a greater member epoch ({epoch}) than the one known by "
                               f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                               f"partitions and rejoin.")
        if epoch < member.member_epoch and not (epoch == member.previous_member_epoch and contained(owned, member)):
            raise StreamsError(ErrorCode.FENCED_MEMBER_EPOCH,
                               f"The streams group member has a smaller member epoch ({epoch}) than the one known by "
                               f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                               f"partitions and rejoin.")
        return member

    # ================================================================== the topics
    def configure_topology(self, topology) -> tuple[configuring.Configured, int]:
        """The topology configured against the topics there are now (``topology.configure``: may raise
        InvalidTopology), and the hash of those topics' metadata (a change moves the group epoch)."""
        topics = self.topics()
        counts, described = {}, []
        for name in sorted(topology.required_topics()):
            meta = topics.get(name)
            if meta is not None and meta.partitions > 0:
                counts[name] = meta.partitions
                described.append(f"{name}:{bytes(meta.topic_id).hex()}:{meta.partitions}")
        digest = hashlib.blake2b("\n".join(described).encode(), digest_size=8).digest()
        return configuring.configure(topology, counts), int.from_bytes(digest, "big", signed=True)

    # ================================================================== a heartbeat
    def _streams_heartbeat(self, request, client_id: str, client_host: str) -> tuple[dict, dict]:
        group_id, member_id, epoch = request.group_id, request.member_id, request.member_epoch
        owned = owned_tasks(request)
        entries: list = []
        statuses: list[tuple[int, str]] = []
        group = self._streams_group_for(group_id, epoch == 0, entries)
        max_size = self.config.streams_max_size
        if epoch == 0 and len(group.members) >= max_size:
            raise StreamsError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                               f"The streams group has reached its maximum capacity of {max_size} members.")
        member = self._streams_member_for(group, member_id, epoch, owned)
        endpoint = request.user_endpoint
        updated = member.with_(
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            topology_epoch=request.topology.epoch if request.topology is not None else member.topology_epoch,
            client_id=client_id, client_host=client_host,
            process_id=request.process_id if request.process_id is not None else member.process_id,
            client_tags=(tuple((t.key, t.value) for t in request.client_tags) if request.client_tags is not None
                         else member.client_tags),
            user_endpoint=(endpoint.host, endpoint.port) if endpoint is not None else member.user_endpoint)
        new_member = member_id not in group.members
        bump = new_member or updated.stored() != member.stored()
        if bump:
            entries.append(member_record(group_id, updated))
        topology = group.topology
        if request.topology is not None:
            asked = topology_of(request.topology)
            if topology is None:
                entries.append(topology_record(group_id, asked))
                topology = asked
            elif topology.epoch <= asked.epoch and topology != asked:
                raise StreamsError(ErrorCode.INVALID_REQUEST, "Topology updates are not supported yet.")
        if topology is None:
            raise StreamsError(ErrorCode.UNKNOWN_SERVER_ERROR, "The topology is null and the group topology is "
                                                               "also null.")
        if updated.topology_epoch < topology.epoch:
            statuses.append((configuring.STALE_TOPOLOGY, f"The member's topology epoch {updated.topology_epoch} is "
                                                         f"behind the group's topology epoch {topology.epoch}."))
        configured, metadata_hash = self.configure_topology(topology)   # (may raise InvalidTopology)
        if metadata_hash != group.metadata_hash:
            bump = True
        validated = topology.epoch if configured.is_ready else -1
        if configured.is_ready:
            for kind in (owned or ()):
                check_tasks(configured.tasks, (kind,))
        if validated != group.validated_topology_epoch:
            bump = True
        configs = {"num.standby.replicas": str(self.streams_config(group_id, "num.standby.replicas"))}
        if configs != group.assignment_configs:
            bump = True
        group_epoch = group.group_epoch
        if bump:
            group_epoch = 2 if group_epoch == 0 else group_epoch + 1
            entries.append(epoch_record(group_id, group_epoch, metadata_hash, validated, configs))
        delay_key = ("streams-initial-delay", group_id)
        if group.is_empty:
            delay = self.streams_config(group_id, "initial.rebalance.delay.ms")
            if delay > 0 and not self.scheduler.is_scheduled(delay_key):
                self.scheduler.schedule(delay_key, delay, lambda: self._streams_delayed_assignment(group_id))
        if group_epoch > group.assignment_epoch:
            if self.scheduler.is_scheduled(delay_key):
                target_epoch, target = max(1, group.assignment_epoch), Target()
                statuses.append((configuring.ASSIGNMENT_DELAYED,
                                 "Assignment delayed due to the configured initial rebalance delay."))
            else:
                targets = self._streams_targets(group, topology, configured, configs, updated)
                entries += [target_record(group_id, m, t) for m, t in targets.items() if group.target.get(m) != t]
                entries.append(assignment_epoch_record(group_id, group_epoch))
                target_epoch, target = group_epoch, targets.get(member_id, Target())
        else:
            target_epoch, target = group.assignment_epoch, group.target.get(member_id, Target())
        reconciled = next_member(group, updated, target_epoch, target, owned)
        if reconciled != updated or new_member:
            entries.append(current_record(group_id, reconciled))
        error = self._store(group_id, entries)
        if error:
            raise StreamsError(error)
        created = self.groups.get(group_id) is not group
        if created:
            self.groups[group_id] = group
        for key, value in entries:
            self.replay(key, value)
        group = self.groups[group_id]
        current = group.members[member_id]
        self._schedule_streams_session(group_id, member_id)
        if current.state is MemberState.UNREVOKED_TASKS:
            self._schedule_streams_revocation(group_id, current)
        else:
            self.scheduler.cancel(("streams-revocation", group_id, member_id))
        if request.shutdown_application and group.shutdown_requested_by is None:   # (the first asker is named)
            group.shutdown_requested_by = member_id
        answer = self._streams_answer(group, member, current, request, statuses, configured, created)
        return answer, configured.to_create

    def _streams_targets(self, group: StreamsGroup, topology, configured, configs: dict,
                         updated: StreamsMember | None = None) -> dict[str, Target]:
        """Every member's target, ``updated`` (the heartbeating member, not yet replayed into the group) in place
        of its stored self: nothing while the topology is not ready. ``topology``: the group's, which this
        heartbeat may have brought. The assignor meets the members as Kafka's does: the group's in the order
        of its table of them, a new one last."""
        members = {m: group.members[m] for m in group.members_in_kafkas_order()}
        if updated is not None:
            members[updated.member_id] = updated
        if not configured.is_ready:
            return {m: Target() for m in members}
        stateful = {s.subtopology_id for s in topology.subtopologies if s.is_stateful}
        specs = {m: MemberSpec(members[m].process_id, group.target.get(m, Target())) for m in members}
        return assign(specs, configured.tasks, stateful, int(configs["num.standby.replicas"]))

    def _streams_answer(self, group: StreamsGroup, before: StreamsMember, current: StreamsMember, request,
                        statuses: list, configured, created: bool) -> dict:
        response = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": current.member_id,
                    "member_epoch": current.member_epoch,
                    "heartbeat_interval_ms": self.streams_config(group.group_id, "heartbeat.interval.ms"),
                    "acceptable_recovery_lag": 0, "task_offset_interval_ms": 0, "active_tasks": None,
                    "standby_tasks": None, "warmup_tasks": None, "endpoint_information_epoch": 0,
                    "partitions_by_user_endpoint": None}
        epoch = group.endpoint_information_epoch
        if request.member_epoch == 0 or current.holds() != before.holds():
            active, standby, warmup = current.holds()
            response.update(active_tasks=wire(active), standby_tasks=wire(standby), warmup_tasks=wire(warmup))
            if current.user_endpoint is not None:
                epoch += 1
        if epoch != request.endpoint_information_epoch:
            response["partitions_by_user_endpoint"] = self._streams_endpoints(group, current.member_id)
        # (a group this heartbeat made starts at 0: Kafka bumps a copy of it that its records then replace)
        group.endpoint_information_epoch = response["endpoint_information_epoch"] = 0 if created else epoch
        if configured.status is not None:
            statuses.append(configured.status)
        if group.shutdown_requested_by is not None:
            statuses.append((configuring.SHUTDOWN_APPLICATION,
                             f"Streams group member {group.shutdown_requested_by} encountered a fatal error and "
                             f"requested a shutdown for the entire application."))
        response["status"] = [{"status_code": c, "status_detail": d} for c, d in statuses]
        return response

    def _streams_endpoints(self, group: StreamsGroup, member_id: str) -> list:
        """Which input partitions each member's endpoint serves, by its current active and standby tasks
        (Interactive Queries): the other members in the order of Kafka's hash map of them, this member last;
        a task's topics in hash-set order, each with the task's partitions it has."""
        topics = self.topics()
        inputs = {s.subtopology_id: [*s.source_topics, *(i.name for i in s.repartition_source_topics)]
                  for s in (group.topology.subtopologies if group.topology else ())}

        def partitions(held) -> list:
            out = []
            for s in hash_order(held):
                for topic in hash_order(inputs.get(s, ())):
                    meta = topics.get(topic)
                    count = meta.partitions if meta is not None else 0
                    out.append({"topic": topic, "partitions": sorted(held[s])[:count]})
            return out
        order = [m for m in hash_order(group.members) if m != member_id] + [member_id]
        return [{"user_endpoint": {"host": m.user_endpoint[0], "port": m.user_endpoint[1]},
                 "active_partitions": partitions(keys(m.active)), "standby_partitions": partitions(m.standby)}
                for m in (group.members[i] for i in order) if m.user_endpoint is not None]

    def _streams_delayed_assignment(self, group_id: str) -> None:
        """The first assignment of a new group, once its initial rebalance delay has passed."""
        group = self.groups.get(group_id)
        if not isinstance(group, StreamsGroup) or group.is_empty or group.topology is None:
            return
        if group.group_epoch <= group.assignment_epoch:
            return
        configured, _ = self.configure_topology(group.topology)
        configs = group.assignment_configs or {"num.standby.replicas": "0"}
        targets = self._streams_targets(group, group.topology, configured, configs)
        entries = [target_record(group_id, m, t) for m, t in targets.items() if group.target.get(m) != t]
        entries.append(assignment_epoch_record(group_id, group.group_epoch))
        if self._store(group_id, entries):
            return
        for key, value in entries:
            self.replay(key, value)

    # ================================================================== leaving and fencing
    def _streams_leave(self, group_id: str, member_id: str, shutdown: bool) -> dict:
        group = self.groups.get(group_id)
        if not isinstance(group, StreamsGroup):
            raise StreamsError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found." if group is None
                               else f"Group {group_id} is not a streams group.")
        if shutdown and group.shutdown_requested_by is None:
            group.shutdown_requested_by = member_id
        if member_id not in group.members:
            raise StreamsError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        error = self._fence_streams(group, member_id, "left the group")
        if error:
            raise StreamsError(error)
        answer = streams_error_response(ErrorCode.NONE)
        answer.update(member_id=member_id, member_epoch=LEAVE_EPOCH, status=[])
        return answer

    def _fence_streams(self, group: StreamsGroup, member_id: str, reason: str) -> ErrorCode:
        entries = member_tombstones(group.group_id, member_id)
        entries.append(epoch_record(group.group_id, group.group_epoch + 1, group.metadata_hash,
                                    group.validated_topology_epoch, group.assignment_configs))
        error = self._store(group.group_id, entries)
        if error:
            return error
        for key, value in entries:
            self.replay(key, value)
        self._cancel_streams_timers(group.group_id, member_id)
        log.info("streams_member_removed", group=group.group_id, member=member_id, reason=reason,
                 group_epoch=group.group_epoch)
        return ErrorCode.NONE

    def _cancel_streams_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("streams-session", "streams-revocation"):
            self.scheduler.cancel((kind, group_id, member_id))

    def _schedule_streams_session(self, group_id: str, member_id: str) -> None:
        self.scheduler.schedule(("streams-session", group_id, member_id),
                                self.streams_config(group_id, "session.timeout.ms"),
                                lambda: self._streams_expired(group_id, member_id, None, "session timeout expired"))

    def _schedule_streams_revocation(self, group_id: str, member: StreamsMember) -> None:
        key = ("streams-revocation", group_id, member.member_id)
        if self.scheduler.is_scheduled(key):
            return
        self.scheduler.schedule(key, max(member.rebalance_timeout_ms, 0),
                                lambda: self._streams_expired(group_id, member.member_id, member.member_epoch,
                                                              "did not revoke its tasks in time"))

    def _streams_expired(self, group_id: str, member_id: str, epoch: int | None, reason: str) -> None:
        group = self.groups.get(group_id)
        if not isinstance(group, StreamsGroup) or member_id not in group.members:
            return
        member = group.members[member_id]
        if epoch is not None and (member.member_epoch != epoch or member.state is not MemberState.UNREVOKED_TASKS):
            return
        if self._fence_streams(group, member_id, reason):
            self._schedule_streams_session(group_id, member_id)
