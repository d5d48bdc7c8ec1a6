"""A KIP-1071 streams group and its members: pure state, changed only by replaying records.

A task is a (subtopology id, partition) pair. A member holds active tasks, each with the epoch it was given at
(an OffsetCommit of an older epoch is accepted only for tasks it held since then), and standby tasks; warm-up
tasks are part of the protocol but, as in Kafka 4.2, never assigned. The group keeps the epochs a KIP-848
consumer group keeps (group, assignment, each member's with its previous) and its topology, the one its first
member brought; which topics the topology needs and how many partitions each must have is derived from the
cluster's topics (``topology.py``), never stored.

Invariants:
* an active task is in at most one member's assigned or pending-revocation set, and a member is given a task
  (active or standby) only while no member of its own process holds that task in another role;
* the group's state is derived: Empty without members, NotReady until its topology's topics are validated,
  Assigning while the group epoch is ahead of the assignment epoch, Reconciling while a member is behind it,
  else Stable.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum

from kbroker.coordinators.group.consumer.model import EpochGroup
from kbroker.protocol.errors import ErrorCode
from kbroker.storage.java_order import timeline_order, timeline_table_length

Tasks = dict[str, frozenset[int]]             # subtopology id -> partitions
ActiveTasks = dict[str, dict[int, int]]       # subtopology id -> partition -> the epoch it was assigned at

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

# A group config's default (``streams.<name>``) where the group has configs of its own, as Kafka's GroupConfig.
STREAMS_GROUP_CONFIG_DEFAULTS = {"session.timeout.ms": 45000, "heartbeat.interval.ms": 5000,
                                 "num.standby.replicas": 0, "initial.rebalance.delay.ms": 3000}


class MemberState(IntEnum):
    """As Kafka persists it in StreamsGroupCurrentMemberAssignmentValue.state."""
    STABLE = 0
    UNREVOKED_TASKS = 1
    UNRELEASED_TASKS = 2
    UNKNOWN = 127


def tasks(pairs) -> Tasks:
    """(subtopology id, partitions) pairs as Tasks, without empty subtopologies."""
    return {s: frozenset(ps) for s, ps in pairs if ps}


def keys(active: ActiveTasks) -> Tasks:
    return {s: frozenset(ps) for s, ps in active.items() if ps}


@dataclass(frozen=True)
class TopicInfo:
    """An internal topic a subtopology names: ``partitions`` 0 lets the coordinator decide."""
    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()   # (source, repartition) indexes

    @property
    def is_stateful(self) -> bool:
        return bool(self.state_changelog_topics)


@dataclass(frozen=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def by_id(self) -> dict[str, Subtopology]:
        return {s.subtopology_id: s for s in self.subtopologies}

    def source_topic_map(self) -> dict[str, str]:
        """Each input topic (external or repartition) -> the subtopology reading it."""
        out = {}
        for s in self.subtopologies:
            for name in s.source_topics:
                out[name] = s.subtopology_id
            for info in s.repartition_source_topics:
                out[info.name] = s.subtopology_id
        return out

    def required_topics(self) -> set[str]:
        """Every topic its tasks read or keep state in (a repartition sink is another subtopology's source)."""
        names = set()
        for s in self.subtopologies:
            names.update(s.source_topics)
            names.update(t.name for t in s.repartition_source_topics + s.state_changelog_topics)
        return names


@dataclass(frozen=True)
class StreamsMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    active: ActiveTasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)
    active_revoking: ActiveTasks = field(default_factory=dict)
    standby_revoking: Tasks = field(default_factory=dict)
    warmup_revoking: Tasks = field(default_factory=dict)

    def with_(self, **changes) -> "StreamsMember":
        return replace(self, **changes)

    def stored(self) -> tuple:
        """What its member record holds: a change writes the record again and moves the group epoch."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.rebalance_timeout_ms,
                self.topology_epoch, self.process_id, self.user_endpoint, self.client_tags)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def holds(self) -> tuple[Tasks, Tasks, Tasks]:
        """Its assigned active, standby and warm-up tasks."""
        return keys(self.active), self.standby, self.warmup

    def revoking(self) -> tuple[Tasks, Tasks, Tasks]:
        return keys(self.active_revoking), self.standby_revoking, self.warmup_revoking


@dataclass(frozen=True)
class Target:
    """A member's target assignment."""
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)


@dataclass
class StreamsGroup(EpochGroup):
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    validated_topology_epoch: int = -1
    assignment_configs: dict[str, str] = field(default_factory=dict)
    assignment_epoch: int = 0
    topology: Topology | None = None
    members: dict[str, StreamsMember] = field(default_factory=dict)
    most_members: int = 0      # the most members it has held at once (how Kafka's table of them is sized)
    target: dict[str, Target] = field(default_factory=dict)
    endpoint_information_epoch: int = 0
    shutdown_requested_by: str | None = None
    state_timestamp_ms: int = -1
    offsets: dict = field(default_factory=dict)
    pending_txn_offsets: dict = field(default_factory=dict)

    group_type = "streams"
    protocol_type = "streams"
    generation_id = 0      # (read by code written for classic groups)

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.topology is None or self.topology.epoch != self.validated_topology_epoch:
            return "NotReady"
        return self.progress()

    def member_epoch_error(self, member_id: str, member_epoch: int) -> ErrorCode:
        """An offset fetch that names a member: UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH, else NONE."""
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE if member_epoch == member.member_epoch else ErrorCode.STALE_MEMBER_EPOCH

    def commit_error(self, member_id: str, member_epoch: int, topic: str, partition: int) -> ErrorCode:
        """KIP-1071's check of one committed partition: a member behind its epoch may still commit for a task
        it has held since that epoch (its commit raced a new assignment)."""
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch == member.member_epoch:
            return ErrorCode.NONE
        if member_epoch > member.member_epoch or self.topology is None:
            return ErrorCode.STALE_MEMBER_EPOCH
        subtopology = self.topology.source_topic_map().get(topic)
        given = member.active.get(subtopology, {}).get(partition)
        if given is None:
            given = member.active_revoking.get(subtopology, {}).get(partition)
        return ErrorCode.STALE_MEMBER_EPOCH if given is None or member_epoch < given else ErrorCode.NONE

    def put_member(self, member: StreamsMember) -> None:
        self.members[member.member_id] = member
        self.most_members = max(self.most_members, len(self.members))

    def members_in_kafkas_order(self) -> list[str]:
        """Its member ids as Kafka's coordinator meets them (its TimelineHashMap of them), which decides the
        assignor's ties."""
        return timeline_order(self.members, timeline_table_length(self.most_members))

    def subscribed_topic_names(self) -> set[str]:
        """The topics its tasks read, while it has members (an empty group's offsets age and may be deleted)."""
        if not self.members or self.topology is None:
            return set()
        return set(self.topology.source_topic_map())

    def task_holders(self) -> tuple[dict, dict, dict]:
        """Who holds each task now (assigned or still revoking): (task -> the process holding it actively,
        task -> the processes holding it as a standby, task -> those holding it as a warm-up). Made once per
        reconciliation, so that a member's step costs the group's tasks, not its tasks times its members."""
        active: dict[tuple[str, int], str] = {}
        standby: dict[tuple[str, int], set[str]] = {}
        warmup: dict[tuple[str, int], set[str]] = {}
        for m in self.members.values():
            for held in (m.active, m.active_revoking):
                for s, ps in held.items():
                    active.update(((s, p), m.process_id) for p in ps)
            for index, held in ((standby, m.standby), (standby, m.standby_revoking), (warmup, m.warmup),
                                (warmup, m.warmup_revoking)):
                for s, ps in held.items():
                    for p in ps:
                        index.setdefault((s, p), set()).add(m.process_id)
        return active, standby, warmup
