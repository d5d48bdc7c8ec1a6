"""A share group and its members: which member fetches from which partitions (KIP-932).

Unlike a consumer group's, a share group's assignment needs no reconciliation: members share partitions
and records are handed out one by one by the share-partition leaders, so a member takes its new target at
once, at the group's epoch (its assignment is its target). The group and its members are persisted in
``__consumer_offsets`` (``records.py``) and reloaded with the coordinator's shard.

Invariant: while the group has members, every partition of a topic some member subscribes to whose share
state is initialized is assigned to at least one member subscribed to it, and no other partition is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbroker.coordinators.group.consumer.model import Assignment


@dataclass
class ShareMember:
    """``assignment`` is what the member was last given (at ``member_epoch``); its target is the group's."""
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    assignment: Assignment = field(default_factory=dict)
    # the epoch before its last one: a heartbeat at it is taken (its answer with the new epoch may have been
    # lost), as Kafka takes it
    previous_member_epoch: int = 0

    def metadata(self) -> tuple:
        """What its member record holds: a change writes it again."""
        return self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    metadata_hash: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)   # member id -> its partitions at the epoch
    # the share partitions whose state the share coordinator holds for the group (topic id -> (name,
    # partitions)): only these are assigned, and the group's deletion deletes their state
    share_partitions: dict[bytes, tuple[str, frozenset[int]]] = field(default_factory=dict)
    # those asked to be initialized and not yet known to be (topic id -> (name, partitions, since when in
    # ms)): asked again once older than the retry interval (their asking was lost with a coordinator)
    initializing: dict[bytes, tuple[str, frozenset[int], int]] = field(default_factory=dict)
    state_timestamp_ms: int = -1
    offsets: dict = field(default_factory=dict)             # (share groups commit no offsets)
    pending_txn_offsets: dict = field(default_factory=dict)

    group_type = "share"
    protocol_type = "share"
    generation_id = 0

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    @property
    def is_empty(self) -> bool:
        return not self.members

    def is_(self, state) -> bool:
        return state.value == self.state

    def has_pending_txn_offset(self, tp) -> bool:
        return False

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def state_partitions(self) -> dict[bytes, tuple[str, frozenset[int]]]:
        """Every share partition that may have state for the group (initialized or being initialized): what
        deleting the group deletes."""
        known = dict(self.share_partitions)
        for topic_id, (name, partitions, _) in self.initializing.items():
            known[topic_id] = (name, known.get(topic_id, (name, frozenset()))[1] | partitions)
        return known
