"""With an authorizer on and SASL/PLAIN users: what a user without rights is told, API by API, and what
an ACL then allows, on Kafka (StandardAuthorizer) and on kbroker."""

import pytest

from kbroker.client.connection import KafkaConnection
from kbroker.client.sasl import SaslCredentials
from kbroker.protocol.records import build_batch
from tests.reference.differential import Target, plain, same
from tests.waiting import settled
from tests.reference.secured import USERS

pytestmark = pytest.mark.reference

PRODUCE, FETCH, METADATA, OFFSET_COMMIT, FIND_COORDINATOR, JOIN_GROUP = 0, 1, 3, 8, 10, 11
INIT_PRODUCER_ID, CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS, CREATE_ACLS, DESCRIBE_ACLS = 22, 19, 20, 32, 30, 29
DELETE_ACLS = 31
DESCRIBE_GROUPS, DESCRIBE_CLUSTER, TXN_OFFSET_COMMIT = 15, 60, 28
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 29, 30, 53


async def call_as(user: str, target: Target, api_key: int, version: int, body: dict):
    conn = await KafkaConnection.open("127.0.0.1", target.port, client_id=f"differential-{user}",
                                      sasl=SaslCredentials("PLAIN", user, USERS[user]))
    try:
        return await conn.request(api_key, version, body)
    finally:
        await conn.close()


def acl(resource_type, name, principal, operation, pattern=3) -> dict:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": "*", "operation": operation, "permission_type": 3}


async def refusals(target: Target, topic: str) -> dict:
    """What alice, with no ACL at all, is told by each API."""
    async def ask(api, version, body, pick):
        return pick(await call_as("alice", target, api, version, body))
    created = await call_as("admin", target, CREATE_TOPICS, 7, {"topics": [
        {"name": topic, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 10000})
    assert created.topics[0].error_code == 0
    return {
        "produce": await ask(PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": build_batch([(b"k", b"v", [])])}]}]},
            lambda a: a.responses[0].partition_responses[0].error_code),
        "fetch": await ask(FETCH, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                      "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                                          {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                          "partition_max_bytes": 1 << 20}]}]},
                           lambda a: (a.error_code, a.responses[0].partitions[0].error_code)),
        "metadata of it": await ask(METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": True,
                                                  "include_topic_authorized_operations": True},
                                    lambda a: [(t.error_code, t.topic_authorized_operations) for t in a.topics]),
        "metadata of a missing one": await ask(METADATA, 12, {"topics": [{"name": topic + "-missing"}],
                                                             "allow_auto_topic_creation": True,
                                                             "include_topic_authorized_operations": False},
                                               lambda a: [t.error_code for t in a.topics]),
        "metadata of all": await ask(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                   "include_topic_authorized_operations": False},
                                     lambda a: [t.name for t in a.topics]),
        "find coordinator": await ask(FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}, lambda a: a.error_code),
        "join group": await ask(JOIN_GROUP, 5, {"group_id": "g", "session_timeout_ms": 10000,
                                               "rebalance_timeout_ms": 10000, "member_id": "",
                                               "group_instance_id": None, "protocol_type": "consumer",
                                               "protocols": [{"name": "range", "metadata": b""}]},
                                lambda a: a.error_code),
        "commit offsets": await ask(OFFSET_COMMIT, 8, {"group_id": "g", "generation_id_or_member_epoch": -1,
                                                      "member_id": "", "group_instance_id": None, "topics": [
                                                          {"name": topic, "partitions": [
                                                              {"partition_index": 0, "committed_offset": 1,
                                                               "committed_leader_epoch": -1,
                                                               "committed_metadata": None}]}]},
                                    lambda a: a.topics[0].partitions[0].error_code),
        "transactional id": await ask(INIT_PRODUCER_ID, 4, {"transactional_id": "t", "transaction_timeout_ms": 60000,
                                                           "producer_id": -1, "producer_epoch": -1},
                                      lambda a: a.error_code),
        "idempotent without cluster rights": await ask(INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1},
            lambda a: a.error_code),
        "create topic": await ask(CREATE_TOPICS, 7, {"topics": [{"name": topic + "-new", "num_partitions": 1,
                                                               "replication_factor": 1}], "timeout_ms": 10000},
                                  lambda a: a.topics[0].error_code),
        "delete topic": await ask(DELETE_TOPICS, 6, {"topics": [{"name": topic}], "timeout_ms": 10000},
                                  lambda a: a.responses[0].error_code),
        "describe topic configs": await ask(DESCRIBE_CONFIGS, 4, {"resources": [
            {"resource_type": 2, "resource_name": topic, "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}, lambda a: a.results[0].error_code),
        "create acls": await ask(CREATE_ACLS, 3, {"creations": [acl(2, topic, "User:alice", 3)]},
                                 lambda a: a.results[0].error_code),
        "describe acls": await ask(DESCRIBE_ACLS, 3, {
            "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
            lambda a: a.error_code),
    }


async def test_a_user_without_acls_is_refused_as_kafka_refuses(secured, topic):
    await same(secured, refusals, topic)


async def test_acls_allow_what_they_name(secured, topic):
    async def scenario(target):
        await call_as("admin", target, CREATE_TOPICS, 7, {"topics": [
            {"name": topic, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 10000})
        created = await call_as("admin", target, CREATE_ACLS, 3, {"creations": [
            acl(2, topic, "User:alice", 4), acl(2, topic, "User:alice", 3),      # WRITE, READ on the topic
            acl(3, "g-", "User:alice", 3, pattern=4)]})                          # READ on groups g-*
        # (Kafka's broker describes ACLs from its metadata image, which has the controller's records of the
        # three a moment after CreateAcls answered)
        described = await settled(lambda: call_as("admin", target, DESCRIBE_ACLS, 3, {
            "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": "User:alice", "host_filter": None, "operation": 1, "permission_type": 1}),
            lambda d: d.error_code != 0 or sum(len(r.acls) for r in d.resources) >= 3)

        async def produce():
            answer = await call_as("alice", target, PRODUCE, 9, {
                "transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [{
                    "name": topic, "partition_data": [{"index": 0, "records": build_batch([(b"k", b"v", [])])}]}]})
            return answer.responses[0].partition_responses[0]
        # (Kafka's authorizer sees new ACLs once its broker has the metadata record: soon, not at once)
        produced = await settled(produce, lambda p: p.error_code == 0)
        commit = await call_as("alice", target, OFFSET_COMMIT, 8, {
            "group_id": "g-1", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                       "committed_leader_epoch": -1, "committed_metadata": None}]}]})
        other_group = await call_as("alice", target, OFFSET_COMMIT, 8, {
            "group_id": "h-1", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                       "committed_leader_epoch": -1, "committed_metadata": None}]}]})
        resources = sorted((r.resource_type, r.resource_name == topic, r.pattern_type,
                            sorted((a.operation, a.permission_type) for a in r.acls))
                           for r in described.resources)
        return {"created": plain(created.results), "described": (described.error_code, resources),
                "produce": produced.error_code, "commit": commit.topics[0].partitions[0].error_code,
                "commit for another group": other_group.topics[0].partitions[0].error_code}
    await same(secured, scenario)


@pytest.mark.parametrize("case", ["a principal without a type", "operation All", "an empty resource name",
                                  "a cluster not named kafka-cluster", "an empty host", "described by a matching filter",
                                  "deleted by a filter"])
async def test_acl_bindings_kafka_stores_or_refuses(secured, topic, case):
    """CreateAcls' checks of one binding (Kafka 4.2 stores an empty host, and answers "" as the message of a
    binding it stored), then DescribeAcls or DeleteAcls of it."""
    binding = {**acl(2, topic, "User:bob", 3), **{
        "a principal without a type": {"principal": "bob"}, "operation All": {"operation": 2},
        "an empty resource name": {"resource_name": ""},
        "a cluster not named kafka-cluster": {"resource_type": 4, "resource_name": "foo"},
        "an empty host": {"host": ""}}.get(case, {})}
    match = {"resource_type_filter": 2, "resource_name_filter": topic, "pattern_type_filter": 2,
             "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}

    async def scenario(target):
        created = await call_as("admin", target, CREATE_ACLS, 3, {"creations": [binding]})
        seen = [[(r.error_code, r.error_message if r.error_message == "" else r.error_message is not None)
                 for r in created.results]]
        try:
            if case in ("described by a matching filter", "deleted by a filter"):
                # (Kafka's broker describes ACLs from its metadata image: the new one is there a moment later)
                described = await settled(lambda: call_as("admin", target, DESCRIBE_ACLS, 3, match),
                                          lambda d: d.resources)
                seen.append((described.error_code, [(r.resource_type, r.resource_name == topic, r.pattern_type, [
                    (a.principal, a.host, a.operation, a.permission_type) for a in r.acls]) for r in described.resources]))
            if case == "deleted by a filter":
                deleted = await call_as("admin", target, DELETE_ACLS, 3, {"filters": [
                    {**match, "pattern_type_filter": 1, "principal_filter": "User:bob"}]})
                seen.append([(r.error_code, [(m.error_code, m.principal, m.operation) for m in r.matching_acls])
                             for r in deleted.filter_results])
        finally:
            await call_as("admin", target, DELETE_ACLS, 3, {"filters": [{**match, "pattern_type_filter": 1}]})
        return seen
    await same(secured, scenario)


async def test_the_operations_a_user_is_told_it_may_do_on_a_group_and_the_cluster(secured, topic):
    """A group's authorized operations (DescribeGroups v3+, asked for) are those of Kafka's five on groups that
    the ACLs allow; the cluster's (DescribeCluster, Metadata v8-10) are none (0) until the user may Describe the
    cluster, whatever else it may do there (here IdempotentWrite), then every one allowed."""
    group = f"g-{topic}"
    cluster_filter = {"resource_type_filter": 4, "resource_name_filter": None, "pattern_type_filter": 1,
                      "principal_filter": "User:alice", "host_filter": None, "operation": 1, "permission_type": 1}

    async def told(target):
        groups = await call_as("alice", target, DESCRIBE_GROUPS, 5, {"groups": [group],
                                                                     "include_authorized_operations": True})
        cluster = await call_as("alice", target, DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": True})
        metadata = await call_as("alice", target, METADATA, 10, {
            "topics": [], "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True,
            "include_topic_authorized_operations": False})
        return ((groups.groups[0].error_code, groups.groups[0].authorized_operations),
                cluster.cluster_authorized_operations, metadata.cluster_authorized_operations)

    async def with_acls(target, bindings, until):
        await call_as("admin", target, CREATE_ACLS, 3, {"creations": bindings})
        # (Kafka's authorizer has new ACLs a moment after CreateAcls answered)
        return await settled(lambda: told(target), until)

    async def scenario(target):
        # (the group's coordinator found first: Kafka makes __consumer_offsets at the first FindCoordinator)
        await settled(lambda: call_as("admin", target, FIND_COORDINATOR, 3, {"key": group, "key_type": 0}),
                      lambda a: a.error_code == 0)
        try:
            before = await with_acls(target, [acl(3, group, "User:alice", 3), acl(3, group, "User:alice", 6),
                                              acl(4, "kafka-cluster", "User:alice", 12)],
                                     lambda seen: seen[0][0] == 0)
            after = await with_acls(target, [acl(4, "kafka-cluster", "User:alice", 8)], lambda seen: seen[1] != 0)
            return before, after
        finally:
            await call_as("admin", target, DELETE_ACLS, 3, {"filters": [
                cluster_filter, {**cluster_filter, "resource_type_filter": 3, "resource_name_filter": group}]})
            await settled(lambda: call_as("admin", target, DESCRIBE_ACLS, 3, cluster_filter), lambda d: not d.resources)
    before, after = await same(secured, scenario)
    # (Read and Delete, and the Describe that each implies)
    assert before == ((0, 1 << 3 | 1 << 6 | 1 << 8), 0, 0) and after[1] == after[2] == 1 << 8 | 1 << 12


async def test_a_transactional_commit_of_a_topic_the_user_may_not_read(secured, topic):
    """TxnOffsetCommit from a user who may write the transactional id and read the group but not the topic:
    TOPIC_AUTHORIZATION_FAILED for its partitions, answered before the producer is looked at (here one the
    broker never gave)."""
    txn, group = f"t-{topic}", f"g-{topic}"

    async def commit(target):
        answer = await call_as("alice", target, TXN_OFFSET_COMMIT, 3, {
            "transactional_id": txn, "group_id": group, "producer_id": 1, "producer_epoch": 0, "generation_id": -1,
            "member_id": "", "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
        return [p.error_code for t in answer.topics for p in t.partitions]

    async def scenario(target):
        await call_as("admin", target, CREATE_TOPICS, 7, {"topics": [
            {"name": topic, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 10000})
        await call_as("admin", target, CREATE_ACLS, 3, {"creations": [acl(5, txn, "User:alice", 4),
                                                                      acl(3, group, "User:alice", 3)]})
        # (Kafka's authorizer has new ACLs a moment after CreateAcls answered)
        return await settled(lambda: commit(target), lambda errors: errors != [TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
                             and errors != [GROUP_AUTHORIZATION_FAILED])
    assert await same(secured, scenario) == [TOPIC_AUTHORIZATION_FAILED]


async def test_a_streams_group_member_needs_the_group_its_topics_and_create_rights(secured, topic):
    """StreamsGroupHeartbeat as a user gains rights: none (the group refused), READ on the group (its
    topology's topics refused), DESCRIBE on them (joined, but told which internal topics it may not create),
    CREATE on them (made, and the member assigned)."""
    from tests.streams_requests import STREAMS_GROUP_HEARTBEAT, heartbeat, join, subtopology
    group = f"sg-{topic}"
    changelog = f"{group}-store-changelog"
    topology = [subtopology("0", sources=[topic], changelogs=[changelog])]

    async def scenario(target):
        await call_as("admin", target, CREATE_TOPICS, 7, {"topics": [
            {"name": topic, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 10000})
        await settled(lambda: call_as("admin", target, FIND_COORDINATOR, 3, {"key": group, "key_type": 0}),
                      lambda a: a.error_code == 0)

        async def grant_then(bindings, until):
            await call_as("admin", target, CREATE_ACLS, 3, {"creations": bindings})
            # (Kafka's authorizer sees a new ACL once its broker has the controller's record of it)
            return await settled(lambda: call_as("alice", target, STREAMS_GROUP_HEARTBEAT, 0,
                                                 join(group, "member-1", topology)), until)
        seen = {"no rights": (await call_as("alice", target, STREAMS_GROUP_HEARTBEAT, 0,
                                            join(group, "member-1", topology))).error_code}
        answer = await grant_then([acl(3, group, "User:alice", 3)],
                                  lambda a: a.error_code != GROUP_AUTHORIZATION_FAILED)
        seen["read on the group"] = (answer.error_code, answer.error_message)
        answer = await grant_then([acl(2, topic, "User:alice", 8), acl(2, group, "User:alice", 8, pattern=4)],
                                  lambda a: a.error_code != TOPIC_AUTHORIZATION_FAILED)
        seen["describe on the topics"] = (answer.error_code, [(s.status_code, s.status_detail.replace(topic, "<t>"))
                                                              for s in answer.status or ()])
        joined = await grant_then([acl(2, group, "User:alice", 5, pattern=4)], lambda a: not a.status)
        assigned = joined if joined.active_tasks else await settled(
            lambda: call_as("alice", target, STREAMS_GROUP_HEARTBEAT, 0, heartbeat(
                group, "member-1", joined.member_epoch, active={}, standby={}, warmup={})),
            lambda a: a.error_code or a.active_tasks)
        seen["create on them"] = (joined.error_code, assigned.error_code, [(t.subtopology_id, list(t.partitions))
                                                        for t in assigned.active_tasks or ()])
        return seen
    await same(secured, scenario)
