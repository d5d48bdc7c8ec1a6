"""What the controller answers a leader's proposed ISR change (AlterPartition), partition by partition, as
Kafka's ZooKeeper-mode controller decides it.

A leader treats most refusals as final until its next LeaderAndIsr (Kafka's
``Partition.handleAlterPartitionError``: FENCED_LEADER_EPOCH,
INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_ID and UNKNOWN_TOPIC_OR_PARTITION leave
its ISR change pending, silently), so a refusal must only be given where that
is right:

* from v2 a leader names its topics by id, which the controller resolves;
* a proposal equal to what the controller holds is answered with it even at
  a stale partition epoch (a leader retrying a change whose answer it lost
  must not be left pending for good);
* an epoch above the controller's says this controller is behind:
  NOT_CONTROLLER, which a leader retries;
* a replica that may not join (not live, shutting down, its log dir offline)
  is INELIGIBLE_REPLICA from v2, OPERATION_NOT_ATTEMPTED before it (the
  words older leaders know), after which a leader goes back to its
  committed ISR.
"""

from __future__ import annotations

from kbroker.protocol.errors import ErrorCode

WRITE = None   # (the change is to be written)


def resolve_topics(request, version: int, names_by_id: dict[bytes, str]) -> list[tuple[object, str | None]]:
    """Each of the request's topics with its name: by id from v2 (None for an id no topic has)."""
    if version < 2:
        return [(topic, topic.topic_name) for topic in request.topics]
    return [(topic, names_by_id.get(bytes(topic.topic_id))) for topic in request.topics]


def decide(state, leader_id: int, p, new_isr: list[int], version: int, eligible) -> ErrorCode | bool | None:
    """For one partition's proposal ``p`` by ``leader_id``: an ErrorCode to refuse it, True to answer with the
    state as it stands (already so), or WRITE. ``eligible(broker_id)``: whether that replica may join an ISR."""
    if state is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if p.leader_epoch > state.leader_epoch or p.partition_epoch > state.zk_version:
        return ErrorCode.NOT_CONTROLLER
    if p.leader_epoch < state.leader_epoch or leader_id != state.leader:
        return ErrorCode.FENCED_LEADER_EPOCH
    if sorted(new_isr) == sorted(state.isr):
        return True
    if p.partition_epoch < state.zk_version:
        return ErrorCode.INVALID_UPDATE_VERSION
    if state.leader not in new_isr or any(not eligible(b) for b in new_isr if b not in state.isr):
        return ErrorCode.INELIGIBLE_REPLICA if version >= 2 else ErrorCode.OPERATION_NOT_ATTEMPTED
    return WRITE
