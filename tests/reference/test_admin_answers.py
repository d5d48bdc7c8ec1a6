"""Whole answers to requests at their edges, side by side, every field compared but those that differ by
nature (ids, hosts, times, sizes): refusals in Kafka's words (DeleteTopics, DescribeConfigs and the alter APIs'
broker ids, ElectLeaders, FindCoordinator, DescribeCluster), the order Kafka answers a batch of groups in
(DescribeGroups, DeleteGroups, ConsumerGroupDescribe, ShareGroupDescribe), a topic's configs in Kafka's order,
InitProducerId's checks before the coordinator is looked for, and what each names of unknown topics and groups;
then group, share and transaction requests naming members, groups and producers that are not there.
(Kept apart, docs/COMPATIBILITY.md: a ShareFetch naming a topic id Kafka 4.2 does not know, or no group, which
it answers UNKNOWN_SERVER_ERROR.)
A message naming the broker's own id is compared with the id masked (Kafka's reference node is 1, kbroker 0)."""

from __future__ import annotations

import re
import uuid

import pytest

from kbroker.protocol.records import build_batch
from tests.reference.differential import call, plain, same
from tests.waiting import settled
from tests.reference.test_groups import coordinator_found
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference
VOLATILE = {"throttle_time_ms", "topic_id", "cluster_id", "host", "port", "controller_id", "node_id", "leader_id",
            "broker_id", "log_dir", "total_bytes", "usable_bytes", "member_id", "replica_nodes", "isr_nodes",
            "leader_epoch", "partition_size", "timestamp", "coordinator_id", "last_timestamp", "producer_id",
            "log_start_offset", "brokers", "endpoints", "partition_epoch"}


M = "m" * 22   # (a member id no group has)
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


async def coordinator_ready(target, group: str) -> None:
    """Until the group's coordinator answers for it: Kafka's coordinator loads its partition of a new
    __consumer_offsets a moment after FindCoordinator names it, answering NOT_COORDINATOR meanwhile."""
    await coordinator_found(target, group)
    await settled(lambda: call(target, 68, 1, {"group_id": group, "member_id": "w" * 22, "member_epoch": 5}),
                  lambda a: a.error_code not in (14, 16))


def _masked(value, me: int):
    if isinstance(value, str):
        return re.sub(rf"\b([Ee]xpected|broker) {me}\b", r"\1 <me>", value)
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
        for group in dict.fromkeys(g for g in GROUPS if g):   # (their coordinators loaded: answers not "not yet")
            await coordinator_ready(target, group)
        await call(target, 0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": build_batch([(b"k", b"v", [])])}]}]})
        answer = await call(target, api, version, body)
        return _masked(plain(answer, volatile=VOLATILE), 1 if target.name == "kafka" else 0)
    await same(targets, scenario)


def group_requests(t: str, g: str) -> dict:
    """case -> (api key, version, body), given the test's topic and a group of its own (its coordinator found)."""
    tid = uuid.UUID(int=5).bytes
    return {
        "cgh empty group": (68, 0, {"group_id": "", "member_id": "", "member_epoch": 0, "rebalance_timeout_ms": 30000,
                                    "subscribed_topic_names": [t], "topic_partitions": []}),
        "cgh no subscription": (68, 0, {"group_id": g, "member_id": "", "member_epoch": 0,
                                        "rebalance_timeout_ms": 30000, "subscribed_topic_names": None,
                                        "topic_partitions": []}),
        "cgh no rebalance timeout": (68, 0, {"group_id": g, "member_id": "", "member_epoch": 0,
                                             "rebalance_timeout_ms": -1, "subscribed_topic_names": [t],
                                             "topic_partitions": []}),
        "cgh no partitions list": (68, 0, {"group_id": g, "member_id": "", "member_epoch": 0,
                                           "rebalance_timeout_ms": 30000, "subscribed_topic_names": [t],
                                           "topic_partitions": None}),
        "cgh unknown member": (68, 0, {"group_id": g, "member_id": M, "member_epoch": 5}),
        "cgh bad epoch": (68, 0, {"group_id": g, "member_id": "", "member_epoch": 3, "rebalance_timeout_ms": 30000,
                                  "subscribed_topic_names": [t], "topic_partitions": []}),
        "cgh bad assignor": (68, 0, {"group_id": g, "member_id": "", "member_epoch": 0, "rebalance_timeout_ms": 30000,
                                     "subscribed_topic_names": [t], "topic_partitions": [], "server_assignor": "x"}),
        "cgh leave unknown": (68, 0, {"group_id": g, "member_id": M, "member_epoch": -1}),
        "cgh static leave unknown": (68, 0, {"group_id": g, "member_id": M, "member_epoch": -2, "instance_id": "i"}),
        "cgh v1 bad regex": (68, 1, {"group_id": g, "member_id": "", "member_epoch": 0,
                                     "rebalance_timeout_ms": 30000, "subscribed_topic_regex": "(",
                                     "topic_partitions": []}),
        "cgh v1 regex with a lookahead": (68, 1, {"group_id": g, "member_id": M, "member_epoch": 0,
                                                  "rebalance_timeout_ms": 30000, "subscribed_topic_regex": "(?=a)",
                                                  "topic_partitions": []}),
        "cgh v1 regex with an unopened parenthesis": (68, 1, {"group_id": g, "member_id": M, "member_epoch": 0,
                                                              "rebalance_timeout_ms": 30000,
                                                              "subscribed_topic_regex": "a)", "topic_partitions": []}),
        "cgh v1 regex repeated twice": (68, 1, {"group_id": g, "member_id": M, "member_epoch": 0,
                                                "rebalance_timeout_ms": 30000, "subscribed_topic_regex": "a**",
                                                "topic_partitions": []}),
        "cgh v0 empty member new": (68, 0, {"group_id": g, "member_id": "", "member_epoch": 1}),
        "cgh v1 empty member": (68, 1, {"group_id": g, "member_id": "", "member_epoch": 0,
                                        "rebalance_timeout_ms": 30000, "subscribed_topic_names": [t],
                                        "topic_partitions": []}),
        "sgh empty group": (76, 1, {"group_id": "", "member_id": M, "member_epoch": 0,
                                    "subscribed_topic_names": [t]}),
        "sgh empty member": (76, 1, {"group_id": g, "member_id": "", "member_epoch": 0,
                                     "subscribed_topic_names": [t]}),
        "sgh no subscription": (76, 1, {"group_id": g, "member_id": M, "member_epoch": 0,
                                        "subscribed_topic_names": None}),
        "sgh unknown member": (76, 1, {"group_id": g, "member_id": M, "member_epoch": 4}),
        "sgh bad epoch": (76, 1, {"group_id": g, "member_id": M, "member_epoch": -5, "subscribed_topic_names": [t]}),
        "join empty group": (11, 9, {"group_id": "", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                     "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                     "protocols": [{"name": "range", "metadata": b""}]}),
        "join bad session": (11, 9, {"group_id": g, "session_timeout_ms": 1, "rebalance_timeout_ms": 10000,
                                     "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                     "protocols": [{"name": "range", "metadata": b""}]}),
        "join no protocols": (11, 9, {"group_id": g, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                      "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                                      "protocols": []}),
        "join unknown member": (11, 9, {"group_id": g, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                        "member_id": "x", "group_instance_id": None, "protocol_type": "consumer",
                                        "protocols": [{"name": "range", "metadata": b""}]}),
        "sync unknown": (14, 5, {"group_id": g, "generation_id": 1, "member_id": "x", "group_instance_id": None,
                                 "protocol_type": "consumer", "protocol_name": "range", "assignments": []}),
        "heartbeat unknown": (12, 4, {"group_id": g, "generation_id": 1, "member_id": "x",
                                      "group_instance_id": None}),
        "leave unknown": (13, 5, {"group_id": g, "members": [
            {"member_id": "x", "group_instance_id": None, "reason": None},
            {"member_id": "", "group_instance_id": "i", "reason": "r"}]}),
        "leave none": (13, 5, {"group_id": g, "members": []}),
        "offset commit unknown topic": (8, 9, {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "",
                                               "group_instance_id": None, "topics": [{"name": t + "-none",
                                               "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                               "committed_leader_epoch": -1,
                                                               "committed_metadata": None}]}]}),
        "offset commit big metadata": (8, 9, {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "",
                                              "group_instance_id": None, "topics": [{"name": t, "partitions": [
                                                  {"partition_index": 0, "committed_offset": 1,
                                                   "committed_leader_epoch": -1,
                                                   "committed_metadata": "x" * 5000}]}]}),
        "offset commit bad member": (8, 9, {"group_id": g, "generation_id_or_member_epoch": 3, "member_id": "zz",
                                            "group_instance_id": None, "topics": [{"name": t, "partitions": [
                                                {"partition_index": 0, "committed_offset": 1,
                                                 "committed_leader_epoch": -1, "committed_metadata": None}]}]}),
        "offset fetch v9 member": (9, 9, {"groups": [{"group_id": g, "member_id": M, "member_epoch": 3,
                                                      "topics": None}], "require_stable": False}),
        "share fetch bad epoch": (78, 1, {"group_id": g, "member_id": M, "share_session_epoch": 5,
                                          "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                          "max_records": 10, "batch_size": 10, "topics": [],
                                          "forgotten_topics_data": []}),
        "share ack no session": (79, 1, {"group_id": g, "member_id": M, "share_session_epoch": 3, "topics": [
            {"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}]}]}),
        "describe share offsets unknown": (90, 0, {"groups": [{"group_id": g, "topics": None}]}),
        "add partitions to txn v3 unknown": (24, 3, {"transactional_id": "t-" + g, "producer_id": 1,
                                                     "producer_epoch": 0, "topics": [{"name": t, "partitions": [0]}]}),
        "add offsets to txn unknown": (25, 3, {"transactional_id": "t-" + g, "producer_id": 1, "producer_epoch": 0,
                                               "group_id": g}),
        "end txn unknown": (26, 3, {"transactional_id": "t-" + g, "producer_id": 1, "producer_epoch": 0,
                                    "committed": True}),
        "txn offset commit unknown": (28, 3, {"transactional_id": "t-" + g, "group_id": g, "producer_id": 1,
                                              "producer_epoch": 0, "generation_id": -1, "member_id": "",
                                              "group_instance_id": None, "topics": [{"name": t, "partitions": [
                                                  {"partition_index": 0, "committed_offset": 1,
                                                   "committed_leader_epoch": -1, "committed_metadata": None}]}]}),
        "list groups all": (16, 5, {"states_filter": ["Empty"], "types_filter": ["consumer", "classic"]}),
        "push telemetry unknown": (72, 0, {"client_instance_id": uuid.UUID(int=3).bytes, "subscription_id": 5,
                                           "terminating": False, "compression_type": 0, "metrics": b""}),
        "list config resources": (74, 1, {"resource_types": [2, 4, 32, 16, 99]}),
    }


@pytest.mark.parametrize("case", list(group_requests("t", "g")))
async def test_the_whole_answer_of_a_group_or_transaction_request_is_kafkas(targets, topic, case):
    group = f"g-{topic}"
    api, version, body = group_requests(topic, group)[case]

    async def scenario(target):
        await create(target, topic, 1)
        await coordinator_ready(target, group)
        return plain(await call(target, api, version, body), volatile=VOLATILE | {"session_id"})
    await same(targets, scenario)


async def test_a_heartbeat_to_an_empty_classic_group_is_told_it_is_not_a_consumer_group(targets, topic):
    """A classic JoinGroup without a member id leaves an empty classic group; a KIP-848 member heartbeating
    into it (not joining) is told the group is not a consumer group, and one leaving it likewise."""
    group = f"g-{topic}"

    async def scenario(target):
        await create(target, topic, 1)
        await coordinator_ready(target, group)
        joined = await call(target, 11, 9, {"group_id": group, "session_timeout_ms": 10000,
                                            "rebalance_timeout_ms": 10000, "member_id": "", "group_instance_id": None,
                                            "protocol_type": "consumer", "protocols": [{"name": "range",
                                                                                        "metadata": b""}]})
        beat = await call(target, 68, 1, {"group_id": group, "member_id": M, "member_epoch": 4})
        left = await call(target, 68, 1, {"group_id": group, "member_id": M, "member_epoch": -1})
        return joined.error_code, [(a.error_code, a.error_message) for a in (beat, left)]
    await same(targets, scenario)


REASSIGNMENTS = {   # case -> (partition, replicas given the broker's own id)
    "to the broker it is on": (0, lambda me: [me]), "to a broker not there": (0, lambda me: [50]),
    "to the same broker twice": (0, lambda me: [me, me]), "to no broker": (0, lambda me: []),
    "to a negative broker id": (0, lambda me: [-3]), "to it and a broker not there": (0, lambda me: [me, 50]),
    "of a partition the topic lacks": (7, lambda me: [me]), "cancelled, none in progress": (0, lambda me: None),
    "of a topic not there": (None, lambda me: [me]),
}


@pytest.mark.parametrize("case", list(REASSIGNMENTS))
async def test_a_reassignment_is_refused_in_kafkas_words(targets, topic, case):
    """AlterPartitionReassignments checks the replicas as Kafka's controller checks a manual assignment."""
    partition, replicas = REASSIGNMENTS[case]

    async def scenario(target):
        me = 1 if target.name == "kafka" else 0
        await create(target, topic, 1)
        answer = await call(target, 45, 0, {"timeout_ms": 5000, "topics": [{
            "name": topic if partition is not None else f"{topic}-none",
            "partitions": [{"partition_index": partition or 0, "replicas": replicas(me)}]}]})
        return _masked(plain(answer, volatile=VOLATILE), me)
    await same(targets, scenario)
