"""A KIP-848 consumer group and its members: pure state, changed only by replaying records.

An assignment maps a topic id (16 bytes) to a frozenset of partitions. The group keeps three epochs:

* the group epoch, bumped whenever membership, a subscription or the subscribed topics' metadata changes;
* the assignment epoch, the group epoch its target assignment was computed for;
* each member's epoch, the target epoch it has reconciled to (with its previous epoch, so a heartbeat
  whose answer was lost is still accepted once).

Invariants:
* a partition is in at most one member's assigned or pending-revocation set: it is given to a member only
  when no other member holds it (``partition_owners``);
* the group's state is derived, never stored: Empty without members, Assigning while the group epoch is
  ahead of the assignment epoch, Reconciling while a member is behind the assignment epoch, else Stable.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum

from kbroker.protocol.errors import ErrorCode

Assignment = dict[bytes, frozenset[int]]

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(IntEnum):
    """As Kafka persists it in ConsumerGroupCurrentMemberAssignmentValue.state."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


def normalized(assignment: dict) -> Assignment:
    """Topic id -> frozenset, without empty topics: two equal assignments compare equal."""
    return {bytes(t): frozenset(p) for t, p in assignment.items() if p}


@dataclass(frozen=True)
class ClassicMetadata:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a consumer group: its
    session timeout and its JoinGroup protocols (name, metadata), in its order of preference."""
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The name its JoinGroup and SyncGroup answers carry: its first protocol's, as Kafka's."""
        return self.protocols[0][0]


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMetadata | None = None

    def with_(self, **changes) -> "ConsumerMember":
        return replace(self, **changes)

    def subscription(self) -> tuple:
        """What the member subscribes to, its topic names as a set: a change bumps the group epoch. (Its rack or
        server assignor changing does not, as in Kafka 4.2: they count from the next assignment on.)"""
        return frozenset(self.subscribed_topic_names), self.subscribed_topic_regex

    def stored(self) -> tuple:
        """What its member record holds: a change writes the record again."""
        return (self.subscribed_topic_names, self.subscribed_topic_regex, self.server_assignor, self.rack_id,
                self.instance_id, self.client_id, self.client_host, self.rebalance_timeout_ms, self.classic)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch


class EpochGroup:
    """What KIP-848 and KIP-1071 groups (``members``, ``group_epoch``, ``assignment_epoch``, ``offsets``,
    ``pending_txn_offsets``) answer alike to code written for any group."""

    def has_pending_txn_offset(self, tp: tuple[str, int]) -> bool:
        return any(tp in offsets for offsets in self.pending_txn_offsets.values())

    def is_(self, state) -> bool:
        """Against a classic GroupState: Empty, Stable and Dead mean the same for every type of group."""
        return state.value == self.state

    @property
    def is_empty(self) -> bool:
        return not self.members

    def progress(self) -> str:
        """A group with members, once ready: Assigning while the group epoch is ahead of the assignment epoch,
        Reconciling while a member is behind the assignment epoch, else Stable."""
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return "Reconciling"
        return "Stable"


@dataclass
class ConsumerGroup(EpochGroup):
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)       # instance id -> member id
    resolved_regexes: dict[str, frozenset[str]] = field(default_factory=dict)   # regex -> topic names
    state_timestamp_ms: int = -1
    offsets: dict = field(default_factory=dict)
    pending_txn_offsets: dict = field(default_factory=dict)

    group_type = "consumer"
    protocol_type = "consumer"
    generation_id = 0      # (read by code written for classic groups; a consumer group's epoch is group_epoch)

    def member_epoch_error(self, member_id: str, member_epoch: int) -> "ErrorCode":
        """KIP-848's check of an offset commit or fetch that names a member: UNKNOWN_MEMBER_ID or
        STALE_MEMBER_EPOCH, else NONE."""
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            # A classic member speaks of generations: Kafka answers it in its own terms.
            return ErrorCode.ILLEGAL_GENERATION if member.classic else ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    @property
    def state(self) -> str:
        return "Empty" if not self.members else self.progress()

    def partition_owners(self) -> dict[tuple[bytes, int], str]:
        """(topic id, partition) -> the member that holds it, assigned or still to revoke."""
        owners = {}
        for member in self.members.values():
            for assignment in (member.assigned, member.pending_revocation):
                for topic_id, partitions in assignment.items():
                    for p in partitions:
                        owners[(topic_id, p)] = member.member_id
        return owners

    def waits_on_released_partitions(self, member: ConsumerMember) -> bool:
        """Whether some partition of the member's target that it does not hold yet is still another's."""
        owners = self.partition_owners()
        for topic_id, partitions in self.target.get(member.member_id, {}).items():
            for p in partitions - member.assigned.get(topic_id, frozenset()):
                if owners.get((topic_id, p)) not in (None, member.member_id):
                    return True
        return False

    def classic_protocols_supported(self, protocol_type: str, names: list[str]) -> bool:
        """Whether a classic member with these protocols may join: the consumer protocol type, and (with
        classic members in the group) a protocol every one of them supports."""
        if protocol_type != "consumer" or not names:
            return False
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        return any(all(name in {n for n, _ in c.protocols} for c in classic) for name in names)

    def subscribed_topic_names(self, resolve_regex=None) -> set[str]:
        """Every topic some member subscribes to, by name or through its regular expression."""
        names: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex:
                names.update(self.resolved_regexes.get(member.subscribed_topic_regex, ()))
        return names

    def put_member(self, member: ConsumerMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None and old.instance_id and self.static_members.get(old.instance_id) == old.member_id:
            del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is not None and old.instance_id and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
