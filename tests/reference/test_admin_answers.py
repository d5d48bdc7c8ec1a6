"""Whole answers to requests at their edges, side by side, every field compared but those that differ by
nature (ids, hosts, times, sizes): refusals in Kafka's words (DeleteTopics, DescribeConfigs and the alter APIs'
broker ids, ElectLeaders, FindCoordinator, DescribeCluster), the order Kafka answers a batch of groups in
(DescribeGroups, DeleteGroups, ConsumerGroupDescribe, ShareGroupDescribe), a topic's configs in Kafka's order,
InitProducerId's checks before the coordinator is looked for, and what each names of unknown topics and groups.
A message naming the broker's own id is compared with the id masked (Kafka's reference node is 1, kbroker 0)."""

from __future__ import annotations

import re
import uuid

import pytest

from kbroker.protocol.records import build_batch
from tests.reference.differential import call, plain, same
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference
VOLATILE = {"throttle_time_ms", "topic_id", "cluster_id", "host", "port", "controller_id", "node_id", "leader_id",
            "broker_id", "log_dir", "total_bytes", "usable_bytes", "member_id", "replica_nodes", "isr_nodes",
            "leader_epoch", "partition_size", "timestamp", "coordinator_id", "last_timestamp", "producer_id",
            "log_start_offset", "brokers", "endpoints", "partition_epoch"}


# Groups no test makes, named so that their __consumer_offsets partitions (of 50) fall in an order of their own.
GROUPS = ["no-such-group-a", "", "no-such-group-b", "no-such-group-c", "no-such-group-a", "no-such-group-d",
          "no-such-group-e"]


def requests(t: str) -> dict:
    """case -> (api key, version, body), given the test's own topic (made, with one record)."""
    none = t + "-none"
    return {
        "delete unknown name": (20, 6, {"topics": [{"name": none}], "timeout_ms": 5000}),
        "delete unknown id": (20, 6, {"topics": [{"name": None, "topic_id": uuid.UUID(int=7).bytes}],
                                      "timeout_ms": 5000}),
        "delete name and id": (20, 6, {"topics": [{"name": t, "topic_id": uuid.UUID(int=7).bytes}],
                                       "timeout_ms": 5000}),
        "delete zero id no name": (20, 6, {"topics": [{"name": None, "topic_id": bytes(16)}], "timeout_ms": 5000}),
        "delete twice": (20, 6, {"topics": [{"name": none}, {"name": none}], "timeout_ms": 5000}),
        "delete v5 unknown": (20, 5, {"topic_names": [none], "timeout_ms": 5000}),
        "delete offsets topic": (20, 6, {"topics": [{"name": "__consumer_offsets"}], "timeout_ms": 5000}),
        "delete bad name": (20, 6, {"topics": [{"name": "a b"}], "timeout_ms": 5000}),
        "delete records unknown": (21, 2, {"topics": [{"name": none, "partitions": [
            {"partition_index": 0, "offset": 0}]}], "timeout_ms": 5000}),
        "delete records past hw": (21, 2, {"topics": [{"name": t, "partitions": [
            {"partition_index": 0, "offset": 99}]}], "timeout_ms": 5000}),
        "delete records -2": (21, 2, {"topics": [{"name": t, "partitions": [
            {"partition_index": 0, "offset": -2}]}], "timeout_ms": 5000}),
        "delete records bad partition": (21, 2, {"topics": [{"name": t, "partitions": [
            {"partition_index": 7, "offset": 0}]}], "timeout_ms": 5000}),
        "describe configs unknown topic": (32, 4, {"resources": [{"resource_type": 2, "resource_name": none,
                                                                  "configuration_keys": None}]}),
        "describe configs bad topic": (32, 4, {"resources": [{"resource_type": 2, "resource_name": "a b",
                                                              "configuration_keys": None}]}),
        "describe configs other broker": (32, 4, {"resources": [{"resource_type": 4, "resource_name": "7",
                                                                 "configuration_keys": None}]}),
        "describe configs bad broker": (32, 4, {"resources": [{"resource_type": 4, "resource_name": "x",
                                                               "configuration_keys": None}]}),
        "describe configs unknown type": (32, 4, {"resources": [{"resource_type": 9, "resource_name": "x",
                                                                 "configuration_keys": None}]}),
        "describe configs key": (32, 4, {"resources": [{"resource_type": 2, "resource_name": t,
                                                        "configuration_keys": ["retention.ms", "nope"]}]}),
        "describe configs synonyms": (32, 4, {"resources": [{"resource_type": 2, "resource_name": t,
                                                             "configuration_keys": ["retention.ms", "cleanup.policy"]}],
                                              "include_synonyms": True}),
        "elect unknown": (43, 2, {"election_type": 0, "topic_partitions": [{"topic": none, "partitions": [0]}],
                                  "timeout_ms": 5000}),
        "elect preferred": (43, 2, {"election_type": 0, "topic_partitions": [{"topic": t, "partitions": [0, 5]}],
                                    "timeout_ms": 5000}),
        "elect unclean": (43, 2, {"election_type": 1, "topic_partitions": [{"topic": t, "partitions": [0]}],
                                  "timeout_ms": 5000}),
        "elect bad type": (43, 2, {"election_type": 5, "topic_partitions": [{"topic": t, "partitions": [0]}],
                                   "timeout_ms": 5000}),
        "list offsets unknown": (2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": none,
            "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}),
        "list offsets bad partition": (2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": t,
            "partitions": [{"partition_index": 9, "current_leader_epoch": -1, "timestamp": -1}]}]}),
        "list offsets ts -3": (2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": t, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -3}]}]}),
        "list offsets ts -4": (2, 9, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": t, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -4}]}]}),
        "list offsets ts -5": (2, 9, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": t, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -5}]}]}),
        "list offsets ts -6": (2, 10, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": t, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -6}]}]}),
        "list offsets ts -9": (2, 9, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": t, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -9}]}]}),
        "list offsets future epoch": (2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": t,
            "partitions": [{"partition_index": 0, "current_leader_epoch": 99, "timestamp": -1}]}]}),
        "offset delete unknown group": (47, 0, {"group_id": "g-" + none, "topics": [{"name": t, "partitions": [
            {"partition_index": 0}]}]}),
        "delete groups unknown": (42, 2, {"groups_names": GROUPS}),
        "describe groups unknown": (15, 5, {"groups": GROUPS, "include_authorized_operations": True}),
        "consumer group describe unknown": (69, 1, {"group_ids": GROUPS,
                                                   "include_authorized_operations": True}),
        "share group describe unknown": (77, 1, {"group_ids": GROUPS,
                                                 "include_authorized_operations": True}),
        "describe transactions unknown": (65, 0, {"transactional_ids": ["t-" + none, ""]}),
        "list transactions filters": (66, 1, {"state_filters": ["Ongoing", "Nope"], "producer_id_filters": [-5],
                                              "duration_filter": -1}),
        "list transactions negative duration": (66, 1, {"state_filters": [], "producer_id_filters": [],
                                                        "duration_filter": -5}),
        "describe producers bad partition": (61, 0, {"topics": [{"name": t, "partition_indexes": [0, 9]}]}),
        "describe log dirs unknown": (35, 4, {"topics": [{"topic": none, "partitions": [0]}]}),
        "offset for leader epoch unknown": (23, 4, {"replica_id": -1, "topics": [{"topic": none, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
        "offset for leader epoch future": (23, 4, {"replica_id": -1, "topics": [{"topic": t, "partitions": [
            {"partition": 0, "current_leader_epoch": 50, "leader_epoch": 0}]}]}),
        "describe topic partitions unknown": (75, 0, {"topics": [{"name": none}, {"name": "a b"}],
                                                     "response_partition_limit": 10, "cursor": None}),
        "list groups bad filter": (16, 5, {"states_filter": ["Nope"], "types_filter": ["nope"]}),
        "find coordinator bad type": (10, 4, {"key_type": 7, "coordinator_keys": ["g"]}),
        "describe cluster bad type": (60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 5}),
        "init producer bad timeout": (22, 4, {"transactional_id": "t-" + t, "transaction_timeout_ms": 0,
                                              "producer_id": -1, "producer_epoch": -1}),
        "init producer huge timeout": (22, 4, {"transactional_id": "t-" + t, "transaction_timeout_ms": 2**31 - 1,
                                               "producer_id": -1, "producer_epoch": -1}),
        "offset fetch unknown": (9, 8, {"groups": [{"group_id": "g-" + none, "topics": [{"name": none,
                                                                                        "partition_indexes": [0]}]}],
                                        "require_stable": True}),
        "alter configs broker x": (33, 2, {"resources": [{"resource_type": 4, "resource_name": "x", "configs": [
            {"name": "log.cleaner.threads", "value": "2"}]}], "validate_only": True}),
        "alter configs broker 7": (33, 2, {"resources": [{"resource_type": 4, "resource_name": "7", "configs": [
            {"name": "log.cleaner.threads", "value": "2"}]}], "validate_only": True}),
        "incremental broker x": (44, 1, {"resources": [{"resource_type": 4, "resource_name": "x", "configs": [
            {"name": "log.cleaner.threads", "config_operation": 0, "value": "2"}]}], "validate_only": True}),
        "incremental broker 7": (44, 1, {"resources": [{"resource_type": 4, "resource_name": "7", "configs": [
            {"name": "log.cleaner.threads", "config_operation": 0, "value": "2"}]}], "validate_only": True}),
        "incremental logger x": (44, 1, {"resources": [{"resource_type": 8, "resource_name": "x", "configs": [
            {"name": "kafka", "config_operation": 0, "value": "INFO"}]}], "validate_only": True}),
        "incremental logger 7": (44, 1, {"resources": [{"resource_type": 8, "resource_name": "7", "configs": [
            {"name": "kafka", "config_operation": 0, "value": "INFO"}]}], "validate_only": True}),
        "incremental logger empty": (44, 1, {"resources": [{"resource_type": 8, "resource_name": "", "configs": [
            {"name": "kafka", "config_operation": 0, "value": "INFO"}]}], "validate_only": True}),
        "describe logger empty": (32, 4, {"resources": [{"resource_type": 8, "resource_name": "",
                                                         "configuration_keys": None}]}),
        "describe logger 7": (32, 4, {"resources": [{"resource_type": 8, "resource_name": "7",
                                                     "configuration_keys": None}]}),
        "describe logger plus": (32, 4, {"resources": [{"resource_type": 8, "resource_name": "+9",
                                                        "configuration_keys": None}]}),
        "describe two types": (32, 4, {"resources": [{"resource_type": 2, "resource_name": t,
                                                      "configuration_keys": ["retention.ms"]},
                                                     {"resource_type": 4, "resource_name": "x",
                                                      "configuration_keys": None}]}),
        "delete neither twice": (20, 6, {"topics": [{"name": None, "topic_id": bytes(16)},
                                                    {"name": None, "topic_id": bytes(16)}], "timeout_ms": 5000}),
        "delete id twice": (20, 6, {"topics": [{"name": None, "topic_id": uuid.UUID(int=9).bytes},
                                               {"name": None, "topic_id": uuid.UUID(int=9).bytes}],
                                    "timeout_ms": 5000}),
        "find coordinator v3 bad type": (10, 3, {"key_type": 7, "key": "g"}),
        "metadata unknown and bad": (3, 12, {"topics": [{"name": none}, {"name": "a b"}, {"name": ""}],
                                             "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False}),
    }


def _masked(value, me: int):
    if isinstance(value, str):
        return re.sub(rf"\b([Ee]xpected) {me}\b", r"\1 <me>", value)
    if isinstance(value, dict):
        return {k: _masked(v, me) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, me) for v in value]
    return value


@pytest.mark.parametrize("case", list(requests("t")))
async def test_the_whole_answer_is_kafkas(targets, topic, case):
    api, version, body = requests(topic)[case]

    async def scenario(target):
        await create(target, topic, 1)
        await call(target, 0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": build_batch([(b"k", b"v", [])])}]}]})
        answer = await call(target, api, version, body)
        return _masked(plain(answer, volatile=VOLATILE), 1 if target.name == "kafka" else 0)
    await same(targets, scenario)
