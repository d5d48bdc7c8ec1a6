"""What a client learns of a broker before it sends anything else: ApiVersions, Metadata, DescribeCluster,
and how a broker answers a request it cannot read."""

import struct

import pytest

from tests.reference.differential import call, documented, plain, raw, request_frame, same
from tests.waiting import settled

pytestmark = pytest.mark.reference

API_VERSIONS, METADATA, CREATE_TOPICS, DESCRIBE_CLUSTER = 18, 3, 19, 60

# ZooKeeper-mode inter-broker APIs kbroker's brokers send each other on their one listener
# (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, AlterPartition, and AllocateProducerIds
# for Kafka 3.x brokers in a kbroker cluster): a KRaft broker has no ZooKeeper controller and no longer
# advertises them (docs/COMPATIBILITY.md).
KBROKER_ONLY = {4, 5, 6, 7, 56, 67}


async def api_ranges(target) -> dict[int, tuple[int, int]]:
    answer = await call(target, API_VERSIONS, 3, {"client_software_name": "differential",
                                                  "client_software_version": "1"})
    assert answer.error_code == 0
    return {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}


async def test_every_api_kbroker_serves_is_at_kafka_4_2s_highest_version(targets):
    kafka, kbroker = [await api_ranges(t) for t in targets]
    assert {k: hi for k, (_, hi) in kbroker.items() if k in kafka} == \
        {k: hi for k, (_, hi) in kafka.items() if k in kbroker}


@documented("the KRaft quorum APIs are not served, and the oldest versions "
            "Kafka 4.0 removed (KIP-896) still are")
async def test_every_api_is_served_at_kafka_4_2s_versions(targets):
    async def served(target):
        return {k: v for k, v in (await api_ranges(target)).items() if k not in KBROKER_ONLY}
    await same(targets, served)


async def test_kbroker_serves_no_api_kafka_does_not_but_its_inter_broker_ones(targets):
    kafka, kbroker = [await api_ranges(t) for t in targets]
    assert set(kbroker) - set(kafka) == KBROKER_ONLY


async def test_an_unsupported_api_versions_version_is_answered_at_v0_with_the_ranges(targets):
    async def scenario(target):
        # (a client sends the flexible header of ApiVersions v3+; Kafka reads an ApiVersions version it
        # does not know with that header, and hangs up on a v1 one)
        body = await raw(target, request_frame(API_VERSIONS, 99, flexible=True))
        error_code, count = struct.unpack_from(">hi", body)
        keys = {struct.unpack_from(">h", body, 6 + 6 * i)[0] for i in range(count)}
        return {"error_code": error_code, "lists_api_versions": API_VERSIONS in keys}
    assert await same(targets, scenario) == {"error_code": 35, "lists_api_versions": True}


@pytest.mark.parametrize("api_key, version", [(METADATA, 99), (999, 0), (CREATE_TOPICS, -1)])
async def test_an_unknown_api_or_version_closes_the_connection(targets, api_key, version):
    async def scenario(target):
        return await raw(target, request_frame(api_key, version))
    assert await same(targets, scenario) is None


async def test_metadata_of_a_new_topic(targets, topic):
    async def scenario(target):
        created = await call(target, CREATE_TOPICS, 7, {"topics": [
            {"name": topic, "num_partitions": 3, "replication_factor": 1}], "timeout_ms": 10000})
        # (Kafka's broker knows the topic a moment after its controller created it)
        answer = await settled(lambda: call(target, METADATA, 12, {
            "topics": [{"name": topic}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": True}), lambda a: a.topics[0].error_code == 0)
        assert answer.controller_id in {b.node_id for b in answer.brokers}
        (found,) = answer.topics
        assert found.topic_id != b"\0" * 16 and found.topic_id == created.topics[0].topic_id
        found.partitions.sort(key=lambda p: p.partition_index)
        del created.topics[0]["configs"]    # (compared, default by default, in test_configs.py)
        return plain({"created": created, "metadata": answer})
    seen = await same(targets, scenario)
    assert [p["partition_index"] for p in seen["metadata"]["topics"][0]["partitions"]] == [0, 1, 2]


@pytest.mark.parametrize("name, allow_auto_create", [
    ("no-such-topic-{}", False), ("bad name!{}", True), ("__consumer_offsets", False)])
async def test_metadata_of_unknown_invalid_and_internal_topics(targets, topic, name, allow_auto_create):
    name = name.format(topic)

    async def scenario(target):
        if name == "__consumer_offsets":   # created when a group first needs a coordinator
            await settled(lambda: call(target, 10, 3, {"key": "differential", "key_type": 0}),
                          lambda answer: answer.error_code == 0)
        answer = await call(target, METADATA, 12, {"topics": [{"name": name}],
                                                   "allow_auto_topic_creation": allow_auto_create,
                                                   "include_topic_authorized_operations": False})
        (found,) = answer.topics
        return {"error_code": found.error_code, "is_internal": found.is_internal,
                "partitions": len(found.partitions) if name == "__consumer_offsets" else found.partitions}
    await same(targets, scenario)


async def test_metadata_auto_creates_a_topic_with_the_default_partitions(targets, topic):
    """Kafka's controller creates the topic after the broker answered UNKNOWN_TOPIC_OR_PARTITION; a single
    kbroker creates it before it answers (docs/COMPATIBILITY.md). A client retries either way and sees the
    same."""
    async def scenario(target):
        first = None

        async def ask():
            nonlocal first
            answer = await call(target, METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": True,
                                                       "include_topic_authorized_operations": False})
            first = answer.topics[0].error_code if first is None else first
            return answer.topics[0]
        found = await settled(ask, lambda t: t.error_code == 0)
        assert first in (0, 3)
        return found.error_code, len(found.partitions)
    assert await same(targets, scenario) == (0, 1)


@pytest.mark.parametrize("version", [1, 2])
async def test_describe_cluster(targets, version):
    async def scenario(target):
        answer = await call(target, DESCRIBE_CLUSTER, version, {"include_cluster_authorized_operations": True,
                                                                "endpoint_type": 1, "include_fenced_brokers": True})
        assert answer.controller_id in {b.broker_id for b in answer.brokers}
        return plain(answer)
    await same(targets, scenario)


@pytest.mark.parametrize("case, topic_spec, expected", [
    ("duplicate", {"num_partitions": 1, "replication_factor": 1}, 36),
    ("zero partitions", {"num_partitions": 0, "replication_factor": 1}, 37),
    ("replication over the brokers", {"num_partitions": 1, "replication_factor": 3}, 38),
    ("bad config value", {"num_partitions": 1, "replication_factor": 1,
                          "configs": [{"name": "cleanup.policy", "value": "sometimes"}]}, 40),
    ("unknown config", {"num_partitions": 1, "replication_factor": 1,
                        "configs": [{"name": "no.such.config", "value": "1"}]}, 40),
    ("invalid name", {"num_partitions": 1, "replication_factor": 1, "name": "bad/name"}, 17),
    ("name too long", {"num_partitions": 1, "replication_factor": 1, "name": "x" * 250}, 17),
])
async def test_create_topics_refusals(targets, topic, case, topic_spec, expected):
    spec = {"name": topic, "assignments": [], "configs": [], **topic_spec}

    async def scenario(target):
        if case == "duplicate":
            await call(target, CREATE_TOPICS, 7, {"topics": [dict(spec)], "timeout_ms": 10000})
        answer = await call(target, CREATE_TOPICS, 7, {"topics": [spec], "timeout_ms": 10000, "validate_only": False})
        return answer.topics[0].error_code
    assert await same(targets, scenario) == expected


async def test_create_topics_validate_only_creates_nothing(targets, topic):
    async def scenario(target):
        answer = await call(target, CREATE_TOPICS, 7, {"topics": [{"name": topic, "num_partitions": 2,
                                                                   "replication_factor": 1}],
                                                       "timeout_ms": 10000, "validate_only": True})
        meta = await call(target, METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                                 "include_topic_authorized_operations": False})
        assert {c.name for c in answer.topics[0].configs} >= {"cleanup.policy", "retention.ms"}
        del answer.topics[0]["configs"]
        return plain(answer), meta.topics[0].error_code
    await same(targets, scenario)


@pytest.mark.parametrize("version, feature, level, upgrade_type, validate_only", [
    (2, "transaction.version", 2, 1, False),    # what it is already
    (2, "transaction.version", 1, 1, True),     # a downgrade asked as an upgrade
    (2, "transaction.version", 1, 2, True),     # a safe downgrade, validated only
    (2, "transaction.version", 3, 1, True),     # past what is supported
    (2, "colour.version", 1, 1, True),          # no such feature
    (1, "transaction.version", 0, 3, True),     # removing it
])
async def test_update_features(targets, version, feature, level, upgrade_type, validate_only):
    async def scenario(target):
        answer = await call(target, 57, version, {"timeout_ms": 30000, "feature_updates": [
            {"feature": feature, "max_version_level": level, "upgrade_type": upgrade_type}],
            "validate_only": validate_only})
        results = [(r.feature, r.error_code) for r in answer.results] if version < 2 else None
        after = await api_features(target)
        return answer.error_code, results, after.get(feature)
    await same(targets, scenario)


async def api_features(target) -> dict[str, int]:
    answer = await call(target, API_VERSIONS, 3, {"client_software_name": "differential",
                                                  "client_software_version": "1"})
    return {f.name: f.max_version_level for f in answer.finalized_features}


@pytest.mark.parametrize("version", [3, 4])
async def test_the_supported_features_a_client_is_told_depend_on_its_api_versions_version(targets, version):
    """Java clients before 3.9 send ApiVersions v3 and refuse a supported feature whose range starts at 0 (their
    AdminClient's thread exits, their broker-to-controller channel dies): answered at v3, such features are
    left out; at v4 every one is listed (KAFKA-17492). Kafka's KRaft-only features aside."""
    async def scenario(target):
        answer = await call(target, API_VERSIONS, version, {"client_software_name": "differential",
                                                            "client_software_version": "1"})
        return sorted((f.name, f.min_version, f.max_version) for f in answer.supported_features
                      if f.name not in ("metadata.version", "kraft.version", "eligible.leader.replicas.version"))
    listed = await same(targets, scenario)
    assert bool(listed) == (version >= 4)


async def test_a_feature_downgraded_then_upgraded(targets):
    """transaction.version down to 1 (a safe downgrade) and back to 2: ApiVersions shows each level, and the
    epoch of the finalized features grows with each update."""
    async def scenario(target):
        async def update(level, upgrade_type):
            answer = await call(target, 57, 2, {"timeout_ms": 30000, "feature_updates": [
                {"feature": "transaction.version", "max_version_level": level, "upgrade_type": upgrade_type}],
                "validate_only": False})
            return answer.error_code

        async def epoch():
            return (await call(target, API_VERSIONS, 3, {"client_software_name": "differential",
                                                         "client_software_version": "1"})).finalized_features_epoch
        async def level(expected):
            # (Kafka's broker shows an update once its metadata caught up, a moment after UpdateFeatures answered)
            answer = await settled(lambda: api_features(target), lambda f: f.get("transaction.version") == expected)
            return answer.get("transaction.version")
        before = await epoch()
        try:
            down = await update(1, 2), await level(1)
        finally:
            up = await update(2, 1), await level(2)
        return down, up, await epoch() > before
    assert await same(targets, scenario) == ((0, 1), (0, 2), True)
