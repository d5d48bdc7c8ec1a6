"""Helpers shared by the handlers (not a handler: it declares no API)."""

from __future__ import annotations

import asyncio
from typing import Callable

from kbroker.protocol.acls import (ALTER_CONFIGS, DELETE, DESCRIBE, DESCRIBE_CONFIGS, GROUP, READ, TOPIC,
                                   TRANSACTIONAL_ID, WRITE)
from kbroker.protocol.errors import ErrorCode
from kbroker.storage.java_order import hash_order, string_hash


# Kafka's controller refuses a request for more partitions than it writes at once: POLICY_VIOLATION with this
# message, for the whole request (a client cannot have a broker make a million partitions in one go).
PARTITIONS_PER_REQUEST = 10_000
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."


def answer_when_called(start: Callable[[Callable[[dict], None]], None], shape: Callable[[dict], dict]):
    """Run ``start(respond)``; the response dict if it answered at once, else a future of it.

    Coordinators answer JoinGroup and SyncGroup when the rebalance reaches
    the member, which may be long after the handler returns.
    """
    future = asyncio.get_running_loop().create_future()

    def respond(result: dict) -> None:
        if not future.done():
            future.set_result(shape(result))

    start(respond)
    return future.result() if future.done() else future


# Kafka's coordinators turn a failed replication of their own write into the error a client retries on.
_WRITE_ERRORS = {ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
                 ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR}


def when_replicated(ctx, topic: str, partitions: list[int], result):
    """The coordinator's answer, sent only once its writes to ``partitions`` of ``topic`` are on the ISR.

    Coordinators append to their internal topic as acks=all producers do;
    in a cluster the answer then waits (``offsets.commit.timeout.ms``) until
    the high watermark passes everything appended so far, so an
    acknowledged commit or transaction step survives the loss of this broker.
    A write that does not get there turns every successful error code in the
    answer into NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE. A single
    broker is its own ISR: the answer goes at once.
    """
    broker = ctx.broker
    if broker.cluster is None or not partitions:
        return result

    async def answer():
        response = await result if isinstance(result, asyncio.Future) else result
        timeout_ms = broker.config["offsets.commit.timeout.ms"]
        errors = await asyncio.gather(*(broker.replica_manager.wait_replicated(topic, p, timeout_ms)
                                        for p in set(partitions)))
        error = next((ErrorCode(e) for e in errors if e), None)
        if error is not None:
            _replace_success(response, _WRITE_ERRORS.get(error, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        return response

    return asyncio.ensure_future(answer())


def _replace_success(value, error: ErrorCode) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key.endswith("error_code") and item == 0:
                value[key] = error
            else:
                _replace_success(item, error)
    elif isinstance(value, list):
        for item in value:
            _replace_success(item, error)


def group_shard(ctx, group_id: str) -> tuple[str, list[int]]:
    """The ``__consumer_offsets`` partition a group's writes go to, for ``when_replicated``."""
    return "__consumer_offsets", [ctx.broker.group_coordinator.partition_for(group_id)]


def txn_shard(ctx, transactional_id: str) -> tuple[str, list[int]]:
    return "__transaction_state", [ctx.broker.txn_coordinator.partition_for(transactional_id)]


_OFFSETS_TOPIC_HASH = string_hash("__consumer_offsets")


def _offsets_partition_hash(partition: int) -> int:
    """Java's TopicPartition.hashCode of a ``__consumer_offsets`` partition."""
    return ((31 + partition) * 31 + _OFFSETS_TOPIC_HASH) & 0xFFFFFFFF


def split_by_right(ctx, operation: int, group_ids) -> tuple[list[str], list[str]]:
    """``group_ids`` this request's principal may do ``operation`` on, and those it may not (each refusal
    logged), both in the order asked: each group authorized once."""
    allowed, refused = [], []
    for group_id in group_ids:
        (allowed if ctx.authorized(operation, GROUP, group_id) else refused).append(group_id)
    return allowed, refused


def names_once_and_repeated(names) -> tuple[list[str], list[str], int]:
    """A request's names as Kafka's controller sorts them into two hash sets: those given once (in the order
    given), those given more than once (in the order they turned out so), and the most names the first set held
    at once (it grows with every name until a repeat takes one out, and its table never shrinks)."""
    once: dict[str, None] = {}
    repeated: dict[str, None] = {}
    peak = 0
    for name in names:
        if name in repeated:
            continue
        if name in once:
            del once[name]
            repeated[name] = None
        else:
            once[name] = None
            peak = max(peak, len(once))
    return list(once), list(repeated), peak


def coordinator_order(ctx, group_ids: list[str]) -> list[int]:
    """The places of ``group_ids`` in the order Kafka's group coordinator answers a batch of them: by the
    ``__consumer_offsets`` partition each belongs to, the partitions in the order of the Java hash map keyed by
    them (filled by computeIfAbsent), each partition's groups in the order asked."""
    partition_for = ctx.broker.group_coordinator.partition_for
    by_partition: dict[int, list[int]] = {}
    for place, group_id in enumerate(group_ids):
        by_partition.setdefault(partition_for(group_id), []).append(place)
    return [place for partition in hash_order(by_partition, hash_of=_offsets_partition_hash, computed=True)
            for place in by_partition[partition]]


def coordinator_error(ctx, group_id: str, operation: int = READ, refuse_empty_id: bool = False) -> ErrorCode:
    """Why this broker cannot act on the group for this request: the principal may not do ``operation`` on it
    (GROUP_AUTHORIZATION_FAILED, checked first as in Kafka), the group id is empty (INVALID_GROUP_ID, with
    ``refuse_empty_id``: the APIs whose Kafka checks that before it looks for the coordinator), or it is not
    the group's coordinator."""
    if not ctx.authorized(operation, GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if refuse_empty_id and not group_id:
        return ErrorCode.INVALID_GROUP_ID
    return ctx.broker.coordination.group_coordinator_error(group_id)


# Kafka's operations on a group (AclEntry.supportedOperations), in its groups' ``authorized_operations``.
GROUP_OPERATIONS = (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS)


def with_group_operations(ctx, groups: list[dict], asked: bool) -> list[dict]:
    """Each described group that was found (error 0) told the operations this principal may do on it, when the
    request asks (``include_authorized_operations``), as Kafka answers; the rest keep the schema's default."""
    if asked:
        for g in groups:
            if not g.get("error_code"):
                g["authorized_operations"] = ctx.authorized_operations(GROUP, g["group_id"], GROUP_OPERATIONS)
    return groups


def describe_groups_of_a_type(ctx, request, refused, kind, describe, refusal_words=lambda error: None) -> dict:
    """ConsumerGroupDescribe, ShareGroupDescribe and StreamsGroupDescribe answer alike, in Kafka's order: the
    groups this principal may not describe, as asked; then empty ids; then the others as its group coordinator
    answers a batch (``coordinator_order``). ``refused(group_id, error, message)`` is a refused group's entry,
    ``kind`` the group class described (a missing group, or one of another type, is GROUP_ID_NOT_FOUND in the
    coordinator's words), ``describe(group)`` a described one's entry, ``refusal_words(error)`` the words a
    coordinator's own refusal carries."""
    coordinator = ctx.broker.group_coordinator
    allowed, denied = split_by_right(ctx, DESCRIBE, request.group_ids)
    answered = [refused(g, ErrorCode.GROUP_AUTHORIZATION_FAILED, None) for g in denied]
    answered += [refused("", ErrorCode.INVALID_GROUP_ID, None) for g in allowed if not g]
    allowed = [g for g in allowed if g]
    groups = []
    for group_id in allowed:
        error = ctx.broker.coordination.group_coordinator_error(group_id)
        group = coordinator.groups.get(group_id) if not error else None
        if error:
            groups.append(refused(group_id, error, refusal_words(error)))
        elif group is None:
            groups.append(refused(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."))
        elif not isinstance(group, kind):
            groups.append(refused(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                  f"Group {group_id} is not a {kind.group_type} group."))
        else:
            groups.append(describe(group))
    groups = answered + [groups[place] for place in coordinator_order(ctx, allowed)]
    return {"throttle_time_ms": 0, "groups": with_group_operations(ctx, groups, request.include_authorized_operations)}


def transaction_error(ctx, transactional_id: str) -> ErrorCode:
    """As ``coordinator_error`` for a transactional id: Write on it first, then this broker's coordination."""
    if not ctx.authorized(WRITE, TRANSACTIONAL_ID, transactional_id):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return ctx.broker.coordination.transaction_coordinator_error(transactional_id)


def topics_refused(ctx, operation: int, topics) -> set[str]:
    """Those of ``topics`` this request's principal may not do ``operation`` on (none without an authorizer)."""
    if ctx.broker.authorizer is None:
        return set()
    return {t for t in topics if not ctx.authorized(operation, TOPIC, t)}


def client_host(ctx) -> str:
    """Kafka reports a member's host as ``/address``."""
    return "/" + ctx.peer.rsplit(":", 1)[0]


def partition_exists(ctx):
    """A predicate: does this topic-partition exist (for offset commits)?"""
    topics = ctx.broker.metadata.topics

    def exists(topic: str, partition: int) -> bool:
        meta = topics.get(topic)
        return meta is not None and 0 <= partition < meta.partitions

    return exists


def answered_before_the_group(ctx, topics) -> dict[tuple[str, int], ErrorCode]:
    """What Kafka's broker answers itself before a group coordinator sees an offset commit (OffsetCommit,
    TxnOffsetCommit): each partition of a topic the principal may not Read (TOPIC_AUTHORIZATION_FAILED), then
    each that does not exist (UNKNOWN_TOPIC_OR_PARTITION). The rest go to the coordinator."""
    exists, refused = partition_exists(ctx), topics_refused(ctx, READ, {t.name for t in topics})
    answered = {}
    for t in topics:
        for p in t.partitions:
            if t.name in refused:
                answered[(t.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not exists(t.name, p.partition_index):
                answered[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return answered


class LeaderDiscovery:
    """KIP-951 (Produce v10+, Fetch v16+): a partition refused because this broker does not lead it carries
    the leader this broker knows, and the answer carries that leader's endpoint, so the client goes there
    without asking for metadata first."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.leaders: set[int] = set()

    def current_leader(self, topic: str, partition: int, known: tuple[int, int] | None = None) -> dict | None:
        """The current_leader field for a refused partition (``known``: the leader the replica has)."""
        if known is None:
            found = self.ctx.broker.partition_info(topic, partition)
            known = (found[0], found[1]) if found else None
        if known is None:
            return None
        if known[0] >= 0:
            self.leaders.add(known[0])
        return {"leader_id": known[0], "leader_epoch": known[1]}

    def node_endpoints(self) -> list[dict]:
        return [{"node_id": b, "host": host, "port": port, "rack": rack}
                for b, host, port, rack in self.ctx.broker.live_brokers(self.ctx.listener) if b in self.leaders]


def resolve_topic_ids(ctx, topics, name_field: str = "name") -> tuple[list, list]:
    """Requests that name topics by id (KIP-516): (known, unknown) of ``topics``; each known topic's
    ``name_field`` is set to the name its ``topic_id`` has now, the unknown ones' ids name no topic (to be
    answered UNKNOWN_TOPIC_ID)."""
    ids = ctx.broker.topic_ids
    known, unknown = [], []
    for topic in topics:
        name = ids.name_of(topic.topic_id)
        if name is None:
            unknown.append(topic)
        else:
            topic[name_field] = name
            known.append(topic)
    return known, unknown


def last_of_each(topics, partitions: str = "partitions", index: str = "partition_index", name: str = "name",
                 repeated: set | None = None):
    """The request's topics with a topic named twice merged into one, a partition named twice kept once (its
    last entry, at its first place), and a topic named with no partition left out: Kafka reads Produce, Fetch,
    DeleteRecords and ListOffsets into a map by partition, so a repeat is answered once, as the last one asks.
    ``repeated``, if given, gets each (topic, partition) named more than once (ListOffsets refuses them).
    Returns ``topics`` itself when nothing repeats (the common request: nothing is copied)."""
    if len(topics) == 1 and len(topics[0][partitions]) == 1:
        return topics
    merged: dict[str, tuple] = {}
    for topic in topics:
        entries = merged.setdefault(topic[name], (topic, {}))[1]
        for entry in topic[partitions]:
            if repeated is not None and entry[index] in entries:
                repeated.add((topic[name], entry[index]))
            entries[entry[index]] = entry
    for topic, entries in merged.values():
        topic[partitions] = list(entries.values())
    return [topic for topic, entries in merged.values() if entries]
