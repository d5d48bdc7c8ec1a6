"""The Prometheus endpoint of real brokers, scraped over HTTP while real clients work: byte and message
counters move by what was produced and fetched, request metrics count and time each API, a group's lag
falls to zero as it commits its way to the end, and a killed follower shows as an under-replicated
partition and an ISR shrink on the leader (then an expansion once it is back)."""

from __future__ import annotations

import os
import re
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tests.brokerproc import ROOT, BrokerProcess
from tests.cluster import Cluster, wait_until

pytestmark = pytest.mark.timeout(180)
RECORDS, SIZE = 500, 200


def metrics_port(broker: BrokerProcess) -> int:
    lines = [line for line in open(broker.log_path, encoding="utf-8") if "metrics_listening" in line]
    assert lines, "no metrics_listening line in the broker log"
    return int(lines[-1].split("port=")[1].split()[0])


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """Every sample: (name, sorted labels) -> value."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_counters_requests_and_lag_follow_a_produce_and_consume_run(tmp_path, topic_name):
    broker = BrokerProcess(str(tmp_path / "data"), {"metrics.port": "0"})
    broker.start()
    try:
        port = metrics_port(broker)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
        before = scrape(port)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for i in range(RECORDS):
            producer.produce(topic_name, b"v" * SIZE, key=b"k%d" % i)
        assert producer.flush(30) == 0
        after = scrape(port)
        topic = {"topic": topic_name}
        assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", **topic) == RECORDS
        grew = value(after, "kafka_server_brokertopicmetrics_bytesin_total", **topic) - \
            value(before, "kafka_server_brokertopicmetrics_bytesin_total", **topic)
        assert RECORDS * SIZE < grew < RECORDS * (SIZE + 100)   # the records and their batches' framing
        assert value(after, "kafka_server_brokertopicmetrics_messagesin_total") >= RECORDS   # all topics
        assert value(after, "kafka_log_log_logendoffset", topic=topic_name, partition="0") == RECORDS
        # (counted per version: librdkafka produces at the newest version both speak, v10 today)
        assert sum(v for (name, labels), v in after.items() if name == "kafka_network_requestmetrics_requests_total"
                   and ("request", "Produce") in labels) > 0
        assert value(after, "kafka_network_requestmetrics_totaltimems_count", request="Produce") > 0
        assert value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert value(after, "kafka_controller_kafkacontroller_activecontrollercount") == 1

        group = f"{topic_name}-g"
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic_name])
        got = 0
        lags = []
        while got < RECORDS:
            msg = consumer.poll(5)
            assert msg is not None and not msg.error()
            got += 1
            if got in (RECORDS // 2, RECORDS):
                consumer.commit(offsets=[TopicPartition(topic_name, 0, got)], asynchronous=False)
                lags.append(value(scrape(port), "kafka_consumergroup_lag", consumergroup=group, topic=topic_name,
                                  partition="0"))
        consumer.close()
        assert lags == [RECORDS - RECORDS // 2, 0]
        done = scrape(port)
        sent = value(done, "kafka_server_brokertopicmetrics_bytesout_total", **topic)
        assert sent >= grew   # every batch went out to the consumer at least once
        assert value(done, "kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert value(done, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 1
        # What docs/OPERATIONS.md lists and the Grafana dashboard queries is what the broker serves.
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        served = {name for name, _ in done} | {f.name for f in text_string_to_metric_families(text)}
        for doc in ("OPERATIONS.md", "grafana-kbroker.json"):
            named = set(re.findall(r"\b(?:kafka|kbroker)_[a-z_]+", open(os.path.join(ROOT, "docs", doc)).read()))
            assert named and not {n for n in named if n not in served and f"{n}_bucket" not in served}, doc
    finally:
        assert broker.stop() == 0


def test_a_killed_follower_shows_as_under_replicated_on_the_leader(tmp_path, topic_name):
    cluster = Cluster(str(tmp_path / "cluster"), overrides={"metrics.port": "0"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic_name, num_partitions=1, replica_assignment=[[1, 2, 3]])])[
            topic_name].result(30)
        leader = metrics_port(cluster.brokers[1])
        wait_until(lambda: value(scrape(leader), "kafka_server_replicamanager_leadercount") >= 1, 30, 0.2,
                   "broker 1 leads")
        assert value(scrape(leader), "kafka_cluster_partition_underreplicated", topic=topic_name,
                     partition="0") == 0
        # The followers fetch in incremental sessions (KIP-227), one per follower, the partition held in each.
        wait_until(lambda: value(scrape(leader), "kafka_server_fetchsessioncache_numincrementalfetchsessions") >= 2
                   and value(scrape(leader), "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached")
                   >= 2, 30, 0.2, "the followers' fetch sessions on the leader")
        # Lag is reported by each group's coordinator, wherever the partition's leader is: six groups land on
        # coordinators spread over the brokers, followers of partition 0 among them.
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(50):
            producer.produce(topic_name, b"v%d" % i, partition=0)
        assert producer.flush(30) == 0
        groups = [f"{topic_name}-g{i}" for i in range(6)]
        for g in groups:
            committer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": g})
            committer.commit(offsets=[TopicPartition(topic_name, 0, 20)], asynchronous=False)
            committer.close()

        def lags() -> dict[str, list[float]]:
            found = {g: [] for g in groups}
            for b in cluster.brokers.values():
                for (name, labels), sample in scrape(metrics_port(b)).items():
                    group = dict(labels).get("consumergroup")
                    if name == "kafka_consumergroup_lag" and group in found:
                        found[group].append(sample)
            return found
        wait_until(lambda: all(v == [30] for v in lags().values()), 30, 0.2, "each group's lag, once")
        cluster.brokers[3].kill()
        wait_until(lambda: value(scrape(leader), "kafka_cluster_partition_underreplicated", topic=topic_name,
                                 partition="0") == 1, 30, 0.2, "under-replicated after the kill")
        samples = scrape(leader)
        assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") >= 1
        assert value(samples, "kafka_server_replicamanager_isrshrinks_total") >= 1
        cluster.brokers[3].start()
        wait_until(lambda: value(scrape(leader), "kafka_cluster_partition_underreplicated", topic=topic_name,
                                 partition="0") == 0, 60, 0.2, "in sync again")
        assert value(scrape(leader), "kafka_server_replicamanager_isrexpands_total") >= 1
        controllers = sum(value(scrape(metrics_port(b)), "kafka_controller_kafkacontroller_activecontrollercount")
                          for b in cluster.brokers.values())
        assert controllers == 1
    finally:
        assert all(code == 0 for code in cluster.stop().values())
