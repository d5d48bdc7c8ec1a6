"""Requests at their edges, side by side, each compared by every error code in its answer: names no topic can
have, a config named twice, unknown election types and resource types, a topic id beside a name, leader
epochs below -1, empty group ids, a partition named twice. Found by sending mutated requests to both brokers
(Kafka's answers where they are its own faults, UNKNOWN_SERVER_ERROR for a null where a name belongs, are
left out)."""

from __future__ import annotations

import pytest

from kbroker.protocol.records import build_batch
from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_groups import COORDINATOR_LOADING, NOT_COORDINATOR, coordinator_found
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

TOPIC_RESOURCE, UNKNOWN_ID = 2, b"\x02" * 16


def error_codes(message, path: str = "") -> list[tuple[str, int]]:
    """Every ``*error_code`` in an answer with where it is, in an order that does not depend on the answer's."""
    found = []
    if isinstance(message, dict):
        for key, value in message.items():
            found += [(f"{path}.{key}", value)] if key.endswith("error_code") else error_codes(value, f"{path}.{key}")
    elif isinstance(message, list):
        for value in message:
            found += error_codes(value, f"{path}[]")
    return sorted(found)


def _metadata(topics):
    return 3, 12, {"topics": topics, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


def _alter(name, configs):
    return 33, 2, {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": [
        {"name": k, "value": v} for k, v in configs]}], "validate_only": True}


def _incremental(name, configs):
    return 44, 1, {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configs": [
        {"name": k, "config_operation": 0, "value": v} for k, v in configs]}], "validate_only": True}


def _elect(election_type, topic, partitions=(0,)):
    return 43, 2, {"election_type": election_type, "timeout_ms": 5000,
                   "topic_partitions": None if topic is None else [{"topic": topic, "partitions": list(partitions)}]}


def _create(name, partitions, replicas, configs):
    return 19, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": replicas,
                               "assignments": [], "configs": [{"name": k, "value": v} for k, v in configs]}],
                   "timeout_ms": 5000, "validate_only": True}


def _epoch(api, topic, epoch):
    if api == "offsets for leader epoch":
        return 23, 4, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": epoch, "leader_epoch": 0}]}]}
    if api == "list offsets":
        return 2, 8, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": epoch, "timestamp": -1}]}]}
    return _fetch(topic, current_leader_epoch=epoch)


def _fetch(topic, session_epoch=-1, **partition):
    """A consumer's Fetch v12 of partition 0 from offset 0 (``partition``: more of that partition's fields)."""
    return 1, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                   "session_id": 0, "session_epoch": session_epoch, "forgotten_topics_data": [], "rack_id": "",
                   "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                               "partition_max_bytes": 1 << 20, **partition}]}]}


CASES = {   # case -> (api key, version, body) as a function of (topic, its id)
    **{f"{what} of a name no topic can have: {name[:8]}": (lambda what, name: lambda t, tid: {
        "AlterConfigs": _alter(name, [("retention.ms", "1000")]),
        "IncrementalAlterConfigs": _incremental(name, [("retention.ms", "1000")]),
        "DescribeTopicPartitions": (75, 0, {"topics": [{"name": name}], "response_partition_limit": 2000,
                                            "cursor": None}),
        "DescribeProducers": (61, 0, {"topics": [{"name": name, "partition_indexes": [0]}]}),
    }[what])(what, name)
        for what in ("AlterConfigs", "IncrementalAlterConfigs", "DescribeTopicPartitions", "DescribeProducers")
        for name in ("*", "a b", "..", "x" * 250)},
    "AlterConfigs naming a config twice": lambda t, tid: _alter(t, [("retention.ms", "1"), ("retention.ms", "2")]),
    "IncrementalAlterConfigs naming a config twice": lambda t, tid: _incremental(
        t, [("retention.ms", "1"), ("retention.ms", "2")]),
    **{f"ElectLeaders of election type {kind}, {which}": (lambda kind, which: lambda t, tid: _elect(
        kind, None if which == "every partition" else t))(kind, which)
       for kind in (-1, 2) for which in ("every partition", "a partition")},
    "CreateTopics with a bad config and too many replicas": lambda t, tid: _create(
        f"{t}-new", 3, 100, [("cleanup.policy", "neither")]),
    "CreateTopics with an unknown config and no partitions": lambda t, tid: _create(
        f"{t}-new", -5, 1, [("no.such.config", "1")]),
    "Metadata by an unknown id beside a known name": lambda t, tid: _metadata([{"topic_id": UNKNOWN_ID, "name": t}]),
    "Metadata by a known id beside a name no topic can have": lambda t, tid: _metadata([{"topic_id": tid,
                                                                                          "name": ".."}]),
    "Metadata by a known id and a name without one": lambda t, tid: _metadata([{"topic_id": tid, "name": None},
                                                                               {"topic_id": bytes(16), "name": ".."}]),
    **{f"{api} at leader epoch {epoch}": (lambda api, epoch: lambda t, tid: _epoch(api, t, epoch))(api, epoch)
       for api in ("offsets for leader epoch", "list offsets", "fetch") for epoch in (-5, -2147483648)},
    "ShareGroupDescribe of an empty group id": lambda t, tid: (77, 1, {"group_ids": [""],
                                                                        "include_authorized_operations": False}),
    "ConsumerGroupDescribe of an empty group id": lambda t, tid: (69, 1, {"group_ids": [""],
                                                                           "include_authorized_operations": False}),
    "DescribeConfigs of an unknown resource type beside a topic": lambda t, tid: (32, 4, {"resources": [
        {"resource_type": 100, "resource_name": t, "configuration_keys": None},
        {"resource_type": TOPIC_RESOURCE, "resource_name": t, "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False}),
    "ElectLeaders naming a partition twice": lambda t, tid: _elect(0, t, (0, 1, 0)),
    "Heartbeat of an empty group id": lambda t, tid: (12, 4, {"group_id": "", "generation_id": 1, "member_id": "m",
                                                              "group_instance_id": None}),
    "LeaveGroup of an empty group id": lambda t, tid: (13, 5, {"group_id": "", "members": [
        {"member_id": "m", "group_instance_id": None, "reason": None}]}),
    "SyncGroup of an empty group id": lambda t, tid: (14, 5, {"group_id": "", "generation_id": 1, "member_id": "m",
                                                              "group_instance_id": None, "protocol_type": "consumer",
                                                              "protocol_name": "range", "assignments": []}),
    "AlterShareGroupOffsets of an empty group id": lambda t, tid: (91, 0, {"group_id": "", "topics": [
        {"topic_name": t, "partitions": [{"partition_index": 0, "start_offset": 0}]}]}),
    "DeleteShareGroupOffsets of an empty group id": lambda t, tid: (92, 0, {"group_id": "", "topics": [
        {"topic_name": t}]}),
    "Fetch with a last fetched epoch newer than the leader's": lambda t, tid: _fetch(t, last_fetched_epoch=127),
    "Fetch with an incremental epoch and no session": lambda t, tid: _fetch(t, session_epoch=5),
    "Produce with acks=2 to a partition that exists and one that does not": lambda t, tid: (0, 9, {
        "transactional_id": None, "acks": 2, "timeout_ms": 5000, "topic_data": [{"name": t, "partition_data": [
            {"index": i, "records": build_batch([(None, b"v", [])])} for i in (0, 7)]}]}),
    **{f"{name} of a member id of {n} characters": (lambda key, n: lambda t, tid: (key, 1, {
        "group_id": f"s-{t}", "member_id": "m" * n, "member_epoch": 0, "rack_id": None,
        "subscribed_topic_names": [t], **({"rebalance_timeout_ms": 10000} if key == 68 else {})}))(key, n)
       for name, key in (("ConsumerGroupHeartbeat", 68), ("ShareGroupHeartbeat", 76)) for n in (36, 37)},
    **{f"OffsetCommit at no generation naming {who}, to no group": (lambda member, instance: lambda t, tid: (
        8, 8, {"group_id": f"g-{t}", "generation_id_or_member_epoch": -1, "member_id": member,
               "group_instance_id": instance, "topics": [{"name": t, "partitions": [{
                   "partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1,
                   "committed_metadata": "m"}]}]}))(member, instance)
       for who, member, instance in (("a member id", "someone", None), ("an instance id", "", "instance"))},
    **{f"LeaveGroup naming {what}": (lambda members, group: lambda t, tid: (13, 5, {
        "group_id": f"{group}{t}", "members": members}))(members, group)
       for what, members, group in (("no member", [], "s-"), ("a null list of members", None, "s-"),
                                    ("no member, of no group", [], "none-"))},
    "DescribeShareGroupOffsets naming a partition twice": lambda t, tid: (90, 1, {"groups": [{
        "group_id": f"s-{t}", "topics": [{"topic_name": t, "partitions": [0, 0, 1]}]}]}),
}


@pytest.mark.parametrize("case", CASES)
async def test_request_edges(targets, topic, case):
    async def scenario(target):
        await create(target, topic, partitions=2)
        await coordinator_found(target, f"s-{topic}")
        metadata = await call(target, *_metadata([{"topic_id": bytes(16), "name": topic}]))
        request = CASES[case](topic, bytes(metadata.topics[0].topic_id))
        # (until Kafka's shard of a group has loaded it answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS)
        return error_codes(await settled(lambda: call(target, *request), lambda a: not {
            code for _, code in error_codes(a)} & {COORDINATOR_LOADING, NOT_COORDINATOR}))
    await same(targets, scenario)
