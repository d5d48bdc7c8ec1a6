"""The group coordinator: Kafka's classic group protocol over GroupMetadata, with timers and persistence.

Every operation answers through a callback (``respond(dict)``) because
JoinGroup and SyncGroup park until the rebalance reaches them; the others
answer at once. Durable changes (offset commits, group assignments, deletions)
go through ``store(partition, records)``, which appends to
``__consumer_offsets`` and returns a Kafka error code; state changes only after
the append succeeded, and the same ``replay`` rebuilds state at start-up.

This module is JoinGroup, membership and rebalancing; SyncGroup, Heartbeat and
LeaveGroup are in ``classic_requests.py``, committed offsets in ``offsets.py``,
loading and unloading shards in ``loader.py``, the admin APIs
in ``admin.py`` (Kafka splits its coordinator from its metadata manager the
same way).

Invariants:
* a member is answered at most once per parked JoinGroup/SyncGroup;
* each member has one heartbeat timer, keyed by (group, member id);
* each group has at most one join timer (delayed join or initial delay).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable

import structlog

from kbroker.coordinators.group.admin import GroupAdmin
from kbroker.coordinators.group.classic_requests import ClassicRequests
from kbroker.coordinators.group.consumer.classic_members import ClassicMembers
from kbroker.coordinators.group.consumer.heartbeat import ConsumerGroupHeartbeat
from kbroker.coordinators.group.consumer.migration import OnlineMigration
from kbroker.coordinators.group.consumer.records import group_tombstones
from kbroker.coordinators.group.share.heartbeat import ShareGroupHeartbeat
from kbroker.coordinators.group.share.model import ShareGroup
from kbroker.coordinators.group.streams.heartbeat import StreamsGroupHeartbeat
from kbroker.coordinators.group.streams.model import StreamsGroup
from kbroker.coordinators.group.consumer.model import ConsumerGroup
from kbroker.coordinators.group.group import GroupMetadata, MemberMetadata, join_result, sync_result
from kbroker.coordinators.group.loader import GroupLoader
from kbroker.coordinators.group.offsets import OffsetManager
from kbroker.coordinators.group.state import GroupState
from kbroker.coordinators.partitioning import partition_for
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("coordinators.group")

S = GroupState
Respond = Callable[[dict], None]
Store = Callable[[int, list[tuple[bytes, bytes | None]]], ErrorCode]

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000   # Kafka's bound on a new member's parked JoinGroup


@dataclass(frozen=True)
class GroupConfig:
    offsets_partitions: int = 50
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_max_size: int = 2**31 - 1
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_migration_policy: str = "bidirectional"
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000
    share_max_size: int = 200
    share_initialize_retry_interval_ms: int = 30000
    streams_session_timeout_ms: int = 45000
    streams_heartbeat_interval_ms: int = 5000
    streams_max_size: int = 2**31 - 1
    streams_num_standby_replicas: int = 0
    streams_initial_rebalance_delay_ms: int = 3000

    @classmethod
    def from_broker(cls, config) -> "GroupConfig":
        return cls(offsets_partitions=config["offsets.topic.num.partitions"],
                   min_session_timeout_ms=config["group.min.session.timeout.ms"],
                   max_session_timeout_ms=config["group.max.session.timeout.ms"],
                   initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
                   max_size=config["group.max.size"],
                   offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
                   offsets_retention_ms=config["offsets.retention.minutes"] * 60 * 1000,
                   consumer_session_timeout_ms=config["group.consumer.session.timeout.ms"],
                   consumer_heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
                   consumer_max_size=config["group.consumer.max.size"],
                   consumer_assignors=tuple(config["group.consumer.assignors"]),
                   consumer_migration_policy=config["group.consumer.migration.policy"],
                   share_session_timeout_ms=config["group.share.session.timeout.ms"],
                   share_heartbeat_interval_ms=config["group.share.heartbeat.interval.ms"],
                   share_max_size=config["group.share.max.size"],
                   # (Kafka waits at least offsets.commit.timeout.ms, the time its asking's write may take)
                   share_initialize_retry_interval_ms=max(config["group.share.initialize.retry.interval.ms"],
                                                          config["offsets.commit.timeout.ms"]),
                   streams_session_timeout_ms=config["group.streams.session.timeout.ms"],
                   streams_heartbeat_interval_ms=config["group.streams.heartbeat.interval.ms"],
                   streams_max_size=config["group.streams.max.size"],
                   streams_num_standby_replicas=config["group.streams.num.standby.replicas"],
                   streams_initial_rebalance_delay_ms=config["group.streams.initial.rebalance.delay.ms"])


class GroupCoordinator(ClassicRequests, OffsetManager, GroupLoader, GroupAdmin, ConsumerGroupHeartbeat, ClassicMembers,
                       OnlineMigration, ShareGroupHeartbeat, StreamsGroupHeartbeat):
    def __init__(self, config: GroupConfig, scheduler, store: Store, topics: Callable[[], dict] = dict,
                 partition_racks: Callable[[str, int], frozenset] = lambda topic, index: frozenset(),
                 group_configs: Callable[[str], dict[str, str]] = lambda group_id: {},
                 initialize_share_state: Callable[[str, int, dict], None] = lambda group_id, epoch, partitions: None,
                 ) -> None:
        """``topics()``: the cluster's topics now, name -> metadata with ``topic_id`` and ``partitions`` (what
        KIP-848's assignors divide); ``partition_racks(topic, index)``: the racks of a partition's replicas
        (for rack-aware assignment); ``group_configs(group_id)``: the group's own configs (GROUP resource);
        ``initialize_share_state(group_id, group_epoch, {topic id: partitions})``: have the share coordinator
        initialize these share partitions' state, then report through ``share_state_initialized`` or
        ``share_state_uninitialized`` (``share/initializing.py``)."""
        self.config = config
        self.scheduler = scheduler
        self.store = store
        self.topics = topics
        self.partition_racks = partition_racks
        self.group_configs = group_configs
        self.initialize_share_state = initialize_share_state
        self.groups: dict[str, GroupMetadata] = {}
        self._initial_delay: set[str] = set()   # groups whose first rebalance waits out the initial delay

    def now_ms(self) -> int:
        return self.scheduler.now_ms()

    def group_setting(self, group_id: str, name: str, default: int) -> int:
        """The group's own ``name`` (a GROUP resource config such as ``share.session.timeout.ms``) if set, else
        ``default`` (the broker's setting), as Kafka's coordinator reads a group's session timeout and heartbeat
        interval: read at each use, so a change applies from the next heartbeat on."""
        value = self.group_configs(group_id).get(name)
        return int(value) if value is not None else default

    def topic_names_by_id(self) -> dict[bytes, str]:
        """Topic id -> name of the topics there are now (assignments name topics by id)."""
        return {bytes(meta.topic_id): name for name, meta in self.topics().items()}

    def topic_ids_by_name(self) -> dict[str, bytes]:
        """Topic name -> id of the topics there are now (a classic member names topics by name)."""
        return {name: bytes(meta.topic_id) for name, meta in self.topics().items()}

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_partitions)

    def _store(self, group_id: str, entries: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        return self.store(self.partition_for(group_id), entries) if entries else ErrorCode.NONE

    # ================================================================== JoinGroup
    def join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None, client_id: str,
                   client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], require_known_member_id: bool, respond: Respond,
                   skip_assignment_supported: bool = False) -> None:
        """``skip_assignment_supported`` (JoinGroup v9+, KIP-814): a static leader rejoining a stable group is
        told it leads, with the members, and to skip the assignment; before v9 it is answered as a follower."""
        if not group_id:
            return respond(join_result(ErrorCode.INVALID_GROUP_ID, member_id))
        if not (self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms):
            return respond(join_result(ErrorCode.INVALID_SESSION_TIMEOUT, member_id))
        if rebalance_timeout_ms < 0:   # JoinGroup v0 has none: Kafka uses the session timeout
            rebalance_timeout_ms = session_timeout_ms
        group = self.groups.get(group_id)
        if isinstance(group, (ShareGroup, StreamsGroup)):
            return respond(join_result(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
        if isinstance(group, ConsumerGroup):
            if not group.is_empty:   # a classic member in a consumer group (online migration)
                return respond(self._classic_join_consumer_group(
                    group, member_id=member_id, instance_id=group_instance_id, client_id=client_id,
                    client_host=client_host, session_timeout_ms=session_timeout_ms,
                    rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=protocol_type, protocols=protocols,
                    require_known_member_id=require_known_member_id))
            error = self._store(group_id, group_tombstones(group))   # the empty consumer group goes, offsets stay
            if error:
                return respond(join_result(error, member_id))
            for key, value in group_tombstones(group):
                self.replay(key, value)
            group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return respond(join_result(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            group = self.groups[group_id] = GroupMetadata(group_id, state_timestamp_ms=self.now_ms())
        if group.is_(S.DEAD):
            return respond(join_result(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            return respond(join_result(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
        args = dict(client_id=client_id, client_host=client_host, session_timeout_ms=session_timeout_ms,
                    rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=protocol_type, protocols=protocols,
                    skip_assignment_supported=skip_assignment_supported)
        if not member_id:
            self._join_new_member(group, group_instance_id, require_known_member_id, respond, args)
        else:
            self._join_current_member(group, member_id, group_instance_id, respond, args)

    def _is_full(self, group: GroupMetadata) -> bool:
        return len(group.members) + len(group.pending_members) >= self.config.max_size

    def _join_new_member(self, group: GroupMetadata, instance_id: str | None, require_known_member_id: bool,
                         respond: Respond, args: dict) -> None:
        new_member_id = f"{args['client_id']}-{uuid.uuid4()}"
        if instance_id is not None and instance_id in group.static_members:
            return self._update_static_member_and_rebalance(group, instance_id, new_member_id, respond, args)
        if self._is_full(group):
            return respond(join_result(ErrorCode.GROUP_MAX_SIZE_REACHED))
        if instance_id is None and require_known_member_id:
            # KIP-394: the member must come back with this id, so a retried join never leaves a ghost.
            group.pending_members.add(new_member_id)
            self.scheduler.schedule(("heartbeat", group.group_id, new_member_id), args["session_timeout_ms"],
                                    lambda: self._expire_pending_member(group, new_member_id))
            return respond(join_result(ErrorCode.MEMBER_ID_REQUIRED, new_member_id))
        self._add_member_and_rebalance(group, new_member_id, instance_id, respond, args)

    def _join_current_member(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                             respond: Respond, args: dict) -> None:
        if member_id in group.pending_members:
            # Its place was counted against group.max.size when it got its id (MEMBER_ID_REQUIRED).
            return self._add_member_and_rebalance(group, member_id, instance_id, respond, args)
        error = self._validate_member(group, member_id, instance_id)
        if error:
            return respond(join_result(error, member_id))
        member = group.members[member_id]
        if group.is_(S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, respond, args)
        elif group.is_(S.COMPLETING_REBALANCE):
            if member.matches(args["protocols"]):
                # A retried join: the member missed our answer, so send it again.
                respond(self._current_join_result(group, member_id))
            else:
                self._update_member_and_rebalance(group, member, respond, args)
        elif group.is_(S.STABLE):
            if group.leader_id == member_id or not member.matches(args["protocols"]):
                self._update_member_and_rebalance(group, member, respond, args)
            else:
                respond(self._current_join_result(group, member_id))
        else:
            respond(join_result(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _current_join_result(self, group: GroupMetadata, member_id: str) -> dict:
        members = group.member_metadata_for_leader() if group.leader_id == member_id else []
        return join_result(ErrorCode.NONE, member_id, group.generation_id, group.protocol_type,
                           group.protocol_name, group.leader_id or "", members)

    def _validate_member(self, group: GroupMetadata, member_id: str, instance_id: str | None) -> ErrorCode:
        """UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID for a caller that is not the current member, else NONE."""
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def _validate_generation(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                             generation_id: int) -> ErrorCode:
        """_validate_member, then ILLEGAL_GENERATION for a caller speaking for another generation."""
        error = self._validate_member(group, member_id, instance_id)
        if not error and generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        return error

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                                  respond: Respond, args: dict) -> None:
        now = self.now_ms()
        member = MemberMetadata(member_id, instance_id, args["client_id"], args["client_host"],
                                args["rebalance_timeout_ms"], args["session_timeout_ms"], args["protocol_type"],
                                [(n, bytes(m)) for n, m in args["protocols"]])
        if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, now)
        member.join_callback = respond
        # A new member cannot heartbeat until it has an id; bound how long its join may stay parked.
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        log.info("member_joined", group=group.group_id, member=member_id, instance=instance_id)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata, respond: Respond,
                                     args: dict) -> None:
        member.protocols = [(n, bytes(m)) for n, m in args["protocols"]]
        member.rebalance_timeout_ms = args["rebalance_timeout_ms"]
        member.session_timeout_ms = args["session_timeout_ms"]
        # A retried join supersedes the parked one; that one is answered so its connection moves on.
        self._answer_join(group, member, join_result(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_callback = respond
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    def _update_static_member_and_rebalance(self, group: GroupMetadata, instance_id: str, new_member_id: str,
                                            respond: Respond, args: dict) -> None:
        """KIP-345: a restarted static member takes its old place; no rebalance if nothing changed."""
        old_member_id = group.static_members[instance_id]
        previous_leader = group.leader_id
        old = group.members[old_member_id]
        self._answer_join(group, old, join_result(ErrorCode.FENCED_INSTANCE_ID, old_member_id))
        self._answer_sync(group, old, sync_result(ErrorCode.FENCED_INSTANCE_ID))
        self.scheduler.cancel(("heartbeat", group.group_id, old_member_id))
        member = group.replace_static_member(instance_id, new_member_id)
        member.protocols = [(n, bytes(m)) for n, m in args["protocols"]]
        member.rebalance_timeout_ms = args["rebalance_timeout_ms"]
        member.session_timeout_ms = args["session_timeout_ms"]
        member.client_id, member.client_host = args["client_id"], args["client_host"]
        self._heartbeat(group, member)
        log.info("static_member_replaced", group=group.group_id, instance=instance_id,
                 old_member=old_member_id, member=new_member_id)
        if group.is_(S.STABLE):
            if group.select_protocol() == group.protocol_name:
                error = self._store(group.group_id, [self._group_record(group)])
                if error:
                    # Undo: the old member id stays the group's, the new one learns nothing.
                    group.replace_static_member(instance_id, old_member_id)
                    return respond(join_result(error, new_member_id))
                if group.leader_id == new_member_id and args["skip_assignment_supported"]:
                    # KIP-814: the leader learns the members (to watch metadata) but keeps the assignment.
                    result = join_result(ErrorCode.NONE, new_member_id, group.generation_id, group.protocol_type,
                                         group.protocol_name, new_member_id, group.member_metadata_for_leader())
                    return respond({**result, "skip_assignment": True})
                # Before v9 the old leader id is returned on purpose: the returning member acts as a follower
                # and fetches its unchanged assignment with SyncGroup, so nobody rebalances.
                return respond(join_result(ErrorCode.NONE, new_member_id, group.generation_id, group.protocol_type,
                                           group.protocol_name, previous_leader or "", []))
            member.join_callback = respond
            self._maybe_prepare_rebalance(group, f"static member {instance_id} changed protocols")
        elif group.is_(S.COMPLETING_REBALANCE):
            # The leader may have assigned to the old member id: rebalance so the new id gets partitions.
            member.join_callback = respond
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during sync")
        else:   # PreparingRebalance: the join in progress will answer it
            member.join_callback = respond
            self._maybe_complete_join(group)

    # ================================================================== rebalancing
    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
            self._prepare_rebalance(group, reason)
        elif group.is_(S.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self.scheduler.cancel(("sync", group.group_id))
        initial = group.is_(S.EMPTY)
        group.transition_to(S.PREPARING_REBALANCE, self.now_ms())
        log.info("rebalance_started", group=group.group_id, generation=group.generation_id, reason=reason)
        key = ("join", group.group_id)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            self._initial_delay.add(group.group_id)
            self.scheduler.schedule(key, delay, lambda: self._initial_join_expired(group, delay, remaining))
        else:
            self.scheduler.schedule(key, group.rebalance_timeout_ms, lambda: self._complete_join(group))
            self._maybe_complete_join(group)

    def _initial_join_expired(self, group: GroupMetadata, delay: int, remaining: int) -> None:
        """The first rebalance of an empty group waits for more members while new ones keep arriving."""
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            step = min(delay, remaining)
            self.scheduler.schedule(("join", group.group_id), step,
                                    lambda: self._initial_join_expired(group, delay, max(remaining - step, 0)))
        else:
            self._complete_join(group)

    def _maybe_complete_join(self, group: GroupMetadata) -> None:
        # During the initial delay the timer decides, not the member count: more members may come.
        if (group.is_(S.PREPARING_REBALANCE) and group.group_id not in self._initial_delay
                and group.has_all_members_joined()):
            self.scheduler.cancel(("join", group.group_id))
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        self._initial_delay.discard(group.group_id)
        if not group.is_(S.PREPARING_REBALANCE):
            return
        now = self.now_ms()
        # Dynamic members that did not rejoin in time are gone; static ones keep their place (KIP-345).
        for member in [m for m in group.members.values() if m.join_callback is None and not m.is_static]:
            self._remove_member(group, member, "did not rejoin in time")
        if group.members and not group.maybe_elect_new_joined_leader():
            # Only static members that have not rejoined remain: wait for them (or their session timeout).
            self.scheduler.schedule(("join", group.group_id), group.rebalance_timeout_ms,
                                    lambda: self._complete_join(group))
            return
        group.init_next_generation(now)
        log.info("rebalance_join_completed", group=group.group_id, generation=group.generation_id,
                 members=len(group.members), protocol=group.protocol_name, leader=group.leader_id)
        if group.is_(S.EMPTY):
            error = self._store(group.group_id, [self._group_record(group)])
            if error:
                log.warning("group_store_failed", group=group.group_id, error=error.name)
            return
        for member in group.members.values():
            self._answer_join(group, member, self._current_join_result(group, member.member_id))
        # The leader must send the assignment within the rebalance timeout, or members that did not sync go.
        self.scheduler.schedule(("sync", group.group_id), group.rebalance_timeout_ms,
                                lambda: self._sync_expired(group, group.generation_id))

    def _sync_expired(self, group: GroupMetadata, generation: int) -> None:
        if group.is_(S.COMPLETING_REBALANCE) and group.generation_id == generation:
            for member in [m for m in group.members.values() if m.sync_callback is None]:
                self._remove_member(group, member, "did not sync in time")
            self._prepare_rebalance(group, "members did not sync in time")

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            self._answer_sync(group, member, sync_result(error))

    def _answer_join(self, group: GroupMetadata, member: MemberMetadata, result: dict) -> None:
        self._answer(group, member, "join_callback", result)

    def _answer_sync(self, group: GroupMetadata, member: MemberMetadata, result: dict) -> None:
        self._answer(group, member, "sync_callback", result)

    def _answer(self, group: GroupMetadata, member: MemberMetadata, slot: str, result: dict) -> None:
        """Answer a parked request; a member still in the group gets a fresh session from that moment."""
        callback = getattr(member, slot)
        if callback is None:
            return
        setattr(member, slot, None)
        callback(result)
        if group.members.get(member.member_id) is member:
            self._heartbeat(group, member)

    # ================================================================== membership and heartbeats
    def _heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat(self.now_ms())
        self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int) -> None:
        member.heartbeat_deadline_ms = self.now_ms() + timeout_ms
        member_id = member.member_id
        self.scheduler.schedule(("heartbeat", group.group_id, member_id), timeout_ms,
                                lambda: self._heartbeat_expired(group, member_id))

    def _heartbeat_expired(self, group: GroupMetadata, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        if (member.join_callback is not None and not member.is_new) or member.sync_callback is not None:
            # Parked in a rebalance: the rebalance timeout governs it, not the session.
            return self._schedule_heartbeat(group, member, member.session_timeout_ms)
        log.info("member_session_expired", group=group.group_id, member=member_id)
        self._remove_member_and_update_group(group, member, "session timeout expired")

    def _expire_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._maybe_complete_join(group)
            self._maybe_drop_empty_group(group)

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        group.remove(member.member_id)
        self.scheduler.cancel(("heartbeat", group.group_id, member.member_id))
        self._answer_join(group, member, join_result(ErrorCode.UNKNOWN_MEMBER_ID, ""))   # (Kafka names no member)
        self._answer_sync(group, member, sync_result(ErrorCode.UNKNOWN_MEMBER_ID))
        log.info("member_removed", group=group.group_id, member=member.member_id, reason=reason)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        self._remove_member(group, member, reason)
        self._after_removal(group, reason)

    def _after_removal(self, group: GroupMetadata, reason: str) -> None:
        """Members were removed: a settled group rebalances, a rebalancing one may now complete its join."""
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(S.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    def _maybe_drop_empty_group(self, group: GroupMetadata) -> None:
        """A group that never had a generation, members or offsets is forgotten (nothing was stored)."""
        if group.is_(S.EMPTY) and group.is_empty and not group.offsets and group.generation_id == 0:
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
