"""GroupMetadata and MemberMetadata: one consumer group's members, generation and chosen protocol.

Pure state, no I/O and no clock of its own: callers pass ``now_ms`` (the
coordinator's injected clock), so tests drive session expiry without sleeping.

Invariants:
* ``state`` only changes through ``transition_to`` (legal predecessors enforced);
* ``generation_id`` grows by one at every completed join phase;
* while the group has members, ``leader_id`` is one of them;
* ``protocol_name`` is a protocol every member supports (chosen by vote).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from kbroker.coordinators.group.state import GroupState, IllegalStateTransition
from kbroker.protocol.errors import ErrorCode


@dataclass
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1      # set only by OffsetCommit v2-4's retention_time


def consumer_subscription_topics(metadata: bytes) -> set[str]:
    """The topic names of a ConsumerProtocolSubscription (every version starts the same way)."""
    data = bytes(metadata)
    if len(data) < 6:
        raise ValueError("subscription too short")
    pos = 2   # int16 version
    count = int.from_bytes(data[pos:pos + 4], "big", signed=True)
    pos += 4
    topics = set()
    for _ in range(max(count, 0)):
        length = int.from_bytes(data[pos:pos + 2], "big", signed=True)
        pos += 2
        if length < 0 or pos + length > len(data):
            raise ValueError("truncated subscription")
        topics.add(data[pos:pos + length].decode())
        pos += length
    return topics


@dataclass
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]          # (name, metadata), in the member's order of preference
    assignment: bytes = b""
    heartbeat_deadline_ms: int = 0
    is_new: bool = True
    # Parked JoinGroup / SyncGroup responses: set while the member waits, cleared when answered.
    join_callback: Callable[[dict], None] | None = field(default=None, repr=False)
    sync_callback: Callable[[dict], None] | None = field(default=None, repr=False)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a rejoin brings exactly the protocols (and metadata) the member already has."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name in self.protocol_names:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def heartbeat(self, now_ms: int) -> None:
        self.heartbeat_deadline_ms = now_ms + self.session_timeout_ms

    def has_expired(self, now_ms: int) -> bool:
        return now_ms >= self.heartbeat_deadline_ms


@dataclass
class GroupMetadata:
    group_type = "classic"
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)   # group.instance.id -> member id
    state_timestamp_ms: int = -1
    pending_members: set[str] = field(default_factory=set)   # got MEMBER_ID_REQUIRED, not joined yet
    new_member_added: bool = False      # lets the initial delayed join wait a little longer
    offsets: dict[tuple[str, int], "CommittedOffset"] = field(default_factory=dict)
    # TxnOffsetCommit: offsets written inside a transaction, visible only after its COMMIT marker.
    pending_txn_offsets: dict[int, dict[tuple[str, int], "CommittedOffset"]] = field(default_factory=dict)

    def has_pending_txn_offset(self, tp: tuple[str, int]) -> bool:
        return any(tp in offsets for offsets in self.pending_txn_offsets.values())

    @property
    def is_empty(self) -> bool:
        return not self.members and not self.pending_members

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.join_callback is not None for m in self.members.values())

    def maybe_elect_new_joined_leader(self) -> bool:
        """Make a member that rejoined the leader if the current leader did not; False if none rejoined."""
        leader = self.members.get(self.leader_id) if self.leader_id else None
        if leader is not None and leader.join_callback is not None:
            return True
        for member in self.members.values():
            if member.join_callback is not None:
                self.leader_id = member.member_id
                return True
        return False

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), or None when that cannot be known."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics |= consumer_subscription_topics(member.metadata_for(self.protocol_name))
            except (KeyError, ValueError):
                return None
        return topics

    # ------------------------------------------------------------------ state
    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in target.valid_previous:
            raise IllegalStateTransition(self.group_id, self.state, target)
        self.state = target
        self.state_timestamp_ms = now_ms

    # ------------------------------------------------------------------ members
    def add(self, member: MemberMetadata, now_ms: int) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.pending_members.discard(member.member_id)
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        member.heartbeat(now_ms)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, new_member_id: str) -> MemberMetadata:
        """A restarted static member takes over its old entry (and assignment) under a new member id."""
        old_id = self.static_members[instance_id]
        member = self.members.pop(old_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if self.leader_id == old_id:
            self.leader_id = new_member_id
        return member

    def expired_members(self, now_ms: int) -> list[MemberMetadata]:
        return [m for m in self.members.values() if m.has_expired(now_ms)]

    # ------------------------------------------------------------------ protocols
    def candidate_protocols(self) -> set[str]:
        """Protocols that every member supports."""
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names)
        for m in members[1:]:
            common &= set(m.protocol_names)
        return common

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        """Whether a member with these protocols may join (else INCONSISTENT_GROUP_PROTOCOL)."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(protocols))

    def select_protocol(self) -> str:
        """Each member votes for its preferred common protocol; the most votes win (ties: first voted)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id!r} has no protocol every member supports")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def init_next_generation(self, now_ms: int) -> None:
        """Complete the join phase: bump the generation and choose the protocol (or go Empty)."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            for m in self.members.values():
                m.is_new = False
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def member_metadata_for_leader(self) -> list[dict]:
        """The JoinGroup response's member list (sent to the leader only)."""
        return [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata_for(self.protocol_name)} for m in self.members.values()]


# The shapes of JoinGroup and SyncGroup answers, which coordinator and loader both give.
def join_result(error: ErrorCode, member_id: str = "", generation_id: int = -1, protocol_type: str | None = None,
                protocol_name: str | None = None, leader: str = "", members: list | None = None) -> dict:
    return {"error_code": error, "generation_id": generation_id, "protocol_type": protocol_type,
            "protocol_name": protocol_name, "leader": leader, "member_id": member_id, "members": members or []}


def sync_result(error: ErrorCode, assignment: bytes = b"", group: GroupMetadata | None = None) -> dict:
    return {"error_code": error, "assignment": assignment,
            "protocol_type": group.protocol_type if group else None,
            "protocol_name": group.protocol_name if group else None}
