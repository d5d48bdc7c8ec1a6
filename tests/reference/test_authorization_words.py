"""What a user without ACLs is told by each admin API, whole answers compared, messages included: the error's
own words where Kafka answers them ("Topic authorization failed."), none where it answers none, and where its
controller refuses a request needing a cluster permission, the request and the permission it needs. Kafka names
the request by its internals (processor, session object, buffer), so only those parentheses are masked."""

from __future__ import annotations

import re

import pytest

from tests.reference.differential import plain, same
from tests.reference.test_authorization import acl, call_as

pytestmark = pytest.mark.reference

VOLATILE = {"throttle_time_ms", "topic_id"}


def requests(topic: str) -> dict:
    """case -> (api key, version, body), each from a user without rights over what it names."""
    configs = [{"name": "retention.ms", "value": "1000"}]
    return {
        "CreateTopics": (19, 7, {"topics": [{"name": topic + "-new", "num_partitions": 1, "replication_factor": 1}],
                                 "timeout_ms": 5000}),
        "DeleteTopics": (20, 6, {"topics": [{"name": topic}], "timeout_ms": 5000}),
        "CreatePartitions": (37, 3, {"topics": [{"name": topic, "count": 3, "assignments": None}],
                                     "timeout_ms": 5000, "validate_only": False}),
        "DescribeConfigs of a topic": (32, 4, {"resources": [{"resource_type": 2, "resource_name": topic,
                                                              "configuration_keys": None}]}),
        "DescribeConfigs of a broker": (32, 4, {"resources": [{"resource_type": 4, "resource_name": "1",
                                                               "configuration_keys": None}]}),
        "DescribeConfigs of a group": (32, 4, {"resources": [{"resource_type": 32, "resource_name": "g",
                                                              "configuration_keys": None}]}),
        "AlterConfigs of a topic": (33, 2, {"resources": [{"resource_type": 2, "resource_name": topic,
                                                           "configs": configs}], "validate_only": True}),
        "IncrementalAlterConfigs of a broker": (44, 1, {"resources": [{"resource_type": 4, "resource_name": "",
            "configs": [{"name": "log.cleaner.threads", "config_operation": 0, "value": "2"}]}],
            "validate_only": True}),
        "IncrementalAlterConfigs of a logger": (44, 1, {"resources": [{"resource_type": 8, "resource_name": "1",
            "configs": [{"name": "kafka", "config_operation": 0, "value": "INFO"}]}], "validate_only": True}),
        "DescribeAcls": (29, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                                 "principal_filter": None, "host_filter": None, "operation": 1,
                                 "permission_type": 1}),
        "CreateAcls": (30, 3, {"creations": [{"resource_type": 2, "resource_name": topic, "resource_pattern_type": 3,
                                              "principal": "User:alice", "host": "*", "operation": 3,
                                              "permission_type": 3}]}),
        "ElectLeaders": (43, 2, {"election_type": 0, "topic_partitions": [{"topic": topic, "partitions": [0]}],
                                 "timeout_ms": 5000}),
        "AlterPartitionReassignments": (45, 0, {"timeout_ms": 5000, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "replicas": None}]}]}),
        "ListPartitionReassignments": (46, 0, {"timeout_ms": 5000, "topics": None}),
        "DescribeClientQuotas": (48, 1, {"components": [], "strict": False}),
        "AlterClientQuotas": (49, 1, {"entries": [{"entity": [{"entity_type": "user", "entity_name": "x"}],
                                                   "ops": [{"key": "producer_byte_rate", "value": 1.0,
                                                            "remove": False}]}], "validate_only": True}),
        "DescribeUserScramCredentials": (50, 0, {"users": [{"name": "x"}, {"name": "y"}]}),
        "AlterUserScramCredentials": (51, 0, {"deletions": [{"name": "zz", "mechanism": 1},
                                                            {"name": "x", "mechanism": 1}], "upsertions": []}),
        "DescribeProducers": (61, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]}),
        "DescribeProducers of a bad name": (61, 0, {"topics": [{"name": "a b", "partition_indexes": [0]}]}),
        "UpdateFeatures v1": (57, 1, {"timeout_ms": 5000, "feature_updates": [
            {"feature": "x", "max_version_level": 1, "upgrade_type": 1}], "validate_only": True}),
    }


def _masked(value):
    if isinstance(value, str):
        return re.sub(r"^Request Request\(.*\) needs ([A-Z_]+) permission\.$", r"Request Request(...) needs \1 "
                      r"permission.", value)
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


@pytest.mark.parametrize("case", list(requests("t")))
async def test_a_user_without_acls_is_told_in_kafkas_words(secured, topic, case):
    api, version, body = requests(topic)[case]

    async def scenario(target):
        created = await call_as("admin", target, 19, 7, {"topics": [
            {"name": topic, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 10000})
        assert created.topics[0].error_code == 0
        answer = await call_as("alice", target, api, version, body)
        return _masked(plain(answer, volatile=VOLATILE))
    await same(secured, scenario)


def acl_requests(topic: str) -> dict:
    """case -> (api key, version, body) of an admin's ACL request Kafka refuses or answers in words of its own
    (the filter values a binding may not hold are kept apart: docs/COMPATIBILITY.md)."""
    def binding(**changes) -> dict:
        return {"creations": [{**acl(2, topic, "User:bob", 3), **changes}]}

    def describe(**changes) -> dict:
        return {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1, **changes}
    return {
        "a principal without a type": (30, 3, binding(principal="bob")),
        "a principal with an empty name": (30, 3, binding(principal="User:")),
        "an operation code Kafka does not have": (30, 3, binding(operation=99)),
        "operation All": (30, 3, binding(operation=2)),
        "an empty resource name": (30, 3, binding(resource_name="")),
        "a cluster not named kafka-cluster": (30, 3, binding(resource_type=4, resource_name="foo")),
        "an empty host": (30, 3, binding(host="")),
        "describing by a pattern type Kafka does not have": (29, 3, describe(pattern_type_filter=9)),
        "describing by a principal without a type": (29, 3, describe(principal_filter="bob")),
        "deleting by a principal without a type": (31, 3, {"filters": [describe(principal_filter="bob")]}),
    }


@pytest.mark.parametrize("case", list(acl_requests("t")))
async def test_an_admins_acl_request_is_answered_in_kafkas_words(secured, topic, case):
    api, version, body = acl_requests(topic)[case]

    async def scenario(target):
        try:
            return plain(await call_as("admin", target, api, version, body), volatile=VOLATILE)
        finally:   # (what a case stored goes, for the next)
            await call_as("admin", target, 31, 3, {"filters": [{
                "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": who, "host_filter": None, "operation": 1, "permission_type": 1}
                for who in ("User:bob", "User:")]})
    await same(secured, scenario)
