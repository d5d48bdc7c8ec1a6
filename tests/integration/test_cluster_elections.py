"""Leader elections a user asks for or allows: preferred-leader election with ElectLeaders, and unclean election
(a replica outside the ISR leads when no ISR member is left), through the topic config and ElectLeaders UNCLEAN,
driven by confluent-kafka's admin client against a real cluster."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic, ResourceType)

from tests.cluster import batches, consume_all, describe, wait_until

pytestmark = pytest.mark.timeout(300)


def admin(bootstrap: str) -> AdminClient:
    """(Held in a variable until its futures resolve: a collected client fails them with _DESTROY.)"""
    return AdminClient({"bootstrap.servers": bootstrap})


def create_on(bootstrap: str, topic: str, replicas: list[int], configs: dict[str, str] | None = None) -> None:
    client = admin(bootstrap)
    client.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[replicas],
                                   config=configs or {})])[topic].result(30)


def elect(bootstrap: str, kind: ElectionType, topic: str) -> int:
    """ElectLeaders for partition 0 of ``topic``: the partition's error code (0 when elected)."""
    client = admin(bootstrap)
    result = client.elect_leaders(kind, [TopicPartition(topic, 0)]).result(30)
    (error,) = result.values()
    if isinstance(error, KafkaException):
        error = error.args[0]
    return 0 if error is None else error.code()


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    failed = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 30000})
    for v in values:
        producer.produce(topic, v, partition=0, on_delivery=lambda err, _m: err and failed.append(err))
    assert producer.flush(60) == 0 and not failed, failed


def partition(bootstrap: str, topic: str) -> dict:
    return describe(bootstrap, topic)[0]


def test_preferred_election_gives_leadership_back_to_the_first_replica(cluster, topic_name):
    preferred, other = 1, 2
    create_on(cluster.bootstrap, topic_name, [preferred, other, 3])
    wait_until(lambda: len(partition(cluster.bootstrap, topic_name)["isr"]) == 3, 30, 0.2, "full ISR")
    assert elect(cluster.bootstrap, ElectionType.PREFERRED, topic_name) == KafkaError.ELECTION_NOT_NEEDED

    assert cluster.brokers[preferred].stop() == 0   # controlled shutdown moves the leadership away
    cluster.brokers[preferred].start()
    wait_until(lambda: len(partition(cluster.bootstrap, topic_name)["isr"]) == 3, 30, 0.2, "back in the ISR")
    assert partition(cluster.bootstrap, topic_name)["leader"] != preferred

    assert elect(cluster.bootstrap, ElectionType.PREFERRED, topic_name) == 0
    wait_until(lambda: partition(cluster.bootstrap, topic_name)["leader"] == preferred, 30, 0.2, "preferred leads")
    produce(cluster.bootstrap, topic_name, [b"after-%d" % i for i in range(20)])
    assert [v for _, _, v in consume_all(cluster.bootstrap, topic_name, 1)] == [b"after-%d" % i for i in range(20)]


def test_unclean_election_only_when_allowed_and_the_old_leader_then_truncates(cluster, topic_name):
    """Replicas {1, 2}: 2 dies, 1 takes writes alone, 1 dies, 2 returns. 2 may lead only by an unclean election,
    which loses what only 1 had: by default the partition stays offline; the topic config or ElectLeaders UNCLEAN
    elect 2; when 1 returns it cuts its tail and follows."""
    by_config, by_request = f"{topic_name}-config", f"{topic_name}-request"
    stale_ok, old_leader, bystander = 2, 1, 3
    for topic in (by_config, by_request):
        create_on(cluster.bootstrap, topic, [old_leader, stale_ok], {"min.insync.replicas": "1"})
        wait_until(lambda t=topic: len(partition(cluster.bootstrap, t)["isr"]) == 2, 30, 0.2, "full ISR")
        produce(cluster.bootstrap, topic, [b"both-%d" % i for i in range(50)])

    cluster.brokers[stale_ok].kill()
    for topic in (by_config, by_request):
        wait_until(lambda t=topic: partition(cluster.bootstrap, t)["isr"] == [old_leader], 30, 0.2, "ISR shrunk")
        produce(cluster.bootstrap, topic, [b"only-on-1-%d" % i for i in range(20)])
    cluster.brokers[old_leader].kill()
    only = cluster.brokers[bystander].bootstrap
    for topic in (by_config, by_request):
        wait_until(lambda t=topic: partition(only, t)["leader"] == -1, 30, 0.2, "offline")

    cluster.brokers[stale_ok].start()
    wait_until(lambda: stale_ok in [b.id for b in admin(only).list_topics(timeout=10).brokers.values()], 30, 0.2,
               "the out-of-sync replica registered")
    time.sleep(2)   # time enough for a (wrong) election on the broker change
    live = f"{only},{cluster.brokers[stale_ok].bootstrap}"
    for topic in (by_config, by_request):
        assert partition(live, topic)["leader"] == -1, "an out-of-sync replica must not lead by default"
    assert elect(live, ElectionType.PREFERRED, by_request) == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE

    client = admin(live)
    resource = ConfigResource(ResourceType.TOPIC, by_config, incremental_configs=[ConfigEntry(
        "unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET)])
    client.incremental_alter_configs([resource])[resource].result(30)
    assert elect(live, ElectionType.UNCLEAN, by_request) == 0
    assert elect(live, ElectionType.UNCLEAN, by_request) == KafkaError.ELECTION_NOT_NEEDED
    for topic in (by_config, by_request):
        wait_until(lambda t=topic: partition(live, t)["leader"] == stale_ok, 30, 0.2, "unclean leader")
        assert partition(live, topic)["isr"] == [stale_ok]
        produce(live, topic, [b"after-%d" % i for i in range(10)])

    cluster.brokers[old_leader].start()
    expected = [b"both-%d" % i for i in range(50)] + [b"after-%d" % i for i in range(10)]
    for topic in (by_config, by_request):
        wait_until(lambda t=topic: sorted(partition(cluster.bootstrap, t)["isr"]) == [1, 2], 60, 0.3,
                   "the old leader back in the ISR")
        wait_until(lambda t=topic: batches(cluster.brokers[1].data_dir, t, 0) == batches(cluster.brokers[2].data_dir,
                                                                                          t, 0), 30, 0.2,
                   "the old leader's log cut to the new leader's")
        assert [v for _, _, v in consume_all(cluster.bootstrap, topic, 1)] == expected
