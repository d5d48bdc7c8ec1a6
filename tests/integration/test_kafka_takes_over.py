"""Apache Kafka 3.9, the last Kafka that ran on ZooKeeper, takes over a kbroker cluster's broker as it stands: the
same ``broker.id``, ``zookeeper.connect`` and ``log.dirs``, nothing converted. kbroker keeps its cluster in
Kafka's znode layout and its data in Kafka's on-disk layout, so Kafka's own broker must start on them and serve
what kbroker acknowledged: the topics with their configs, every record (an idempotent producer's, a committed
transaction's, a compacted topic's), the group's committed offsets and the transactional id. Then kbroker takes
the broker back over from Kafka and serves all of it again, the records Kafka appended included: a user can move
between the two in either direction, and run a cluster of both while moving: Kafka as a broker under kbroker's
controller, kbroker brokers under Kafka's. (Kafka 4 has no ZooKeeper mode; from Kafka 3.9 its migration to KRaft
goes on.) Kafka 3.9's jars are fetched by Maven on first use (tests/reference/kafka/zookeeper/pom.xml)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess

import pytest
from confluent_kafka import Consumer, ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from kbroker.broker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.client.connection import KafkaConnection
from kbroker.coordinators.partitioning import partition_for
from kbroker.protocol.errors import ErrorCode
from tests.brokerproc import BrokerProcess
from tests.cluster import (CLUSTER_OVERRIDES, brokers_listed, cluster_metadata, consume_all, create, describe,
                           wait_until)
from tests.reference.apache_kafka import ROOT, KafkaNode, zookeeper_jars
from tests.waiting import settled

VERSION = "3.9.1"
# The last release before the controller's requests moved on (LeaderAndIsr v7, UpdateMetadata v8 and StopReplica v4
# came with 3.4) and before KIP-890's verification (AddPartitionsToTxn v4, 3.6): a mixed cluster with it has each
# side send the versions the other serves.
OLDER = "3.3.2"
# The last 2.x release, the oldest a kbroker cluster is tested with: its controller and brokers serve AlterIsr v0
# (AlterPartition's first version) and Metadata up to v11.
OLDEST = "2.8.2"
INIT_PRODUCER_ID = 22
KAFKA_3 = os.path.join(ROOT, "tests", "reference", "kafka", "zookeeper")
# Kafka's settings beside kbroker brokers: the cluster tests' internal topics and ISR lag, the rest Kafka's defaults.
KAFKA_IN_A_CLUSTER = {"replica.lag.time.max.ms": "5000", **{k: v for k, v in CLUSTER_OVERRIDES.items()
                                                          if k.startswith(("offsets.", "transaction."))}}
ONE_BROKER = {"offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
              "transaction.state.log.min.isr": "1", "group.initial.rebalance.delay.ms": "0"}
TOPICS = {"records": (2, {"retention.ms": "86400000", "max.message.bytes": "200000"}),
          "compacted": (1, {"cleanup.policy": "compact"})}


def test_kafka_39_serves_a_kbroker_brokers_cluster_state_and_data_and_back(tmp_path):
    zookeeper = ZooKeeperServer(str(tmp_path / "zookeeper")).start()
    settings = {"broker.id": "1", "zookeeper.connect": f"{zookeeper.connect}/kbroker", **ONE_BROKER}
    data = str(tmp_path / "broker" / "data")
    try:
        broker = BrokerProcess(data, settings)
        try:
            expected = write(broker.start().bootstrap)
        finally:
            assert broker.stop() == 0, broker.tail_log()

        kafka = ZooKeeperKafka(str(tmp_path / "kafka"), {**settings, "log.dirs": data}, version=VERSION)
        try:
            assert read(kafka.start().bootstrap) == expected
            expected["records"][0].append(take_the_transactional_id_on(kafka.bootstrap, b"by kafka"))
            assert read(kafka.bootstrap) == expected
        finally:
            assert kafka.stop() in (0, 143), kafka.tail_log()   # (143: the JVM's exit after SIGTERM's hooks)
        assert not [line for line in kafka.tail_log(100_000).splitlines() if "] ERROR " in line]

        broker = BrokerProcess(data, settings)
        try:
            assert read(broker.start().bootstrap) == expected
            expected["records"][0].append(take_the_transactional_id_on(broker.bootstrap, b"by kbroker again"))
            assert read(broker.bootstrap) == expected
        finally:
            assert broker.stop() == 0, broker.tail_log()
    finally:
        zookeeper.stop()


def write(bootstrap: str) -> dict:
    """Topics with configs, records of each kind and a group's commits; what a reader should find."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=configs)
                                       for name, (partitions, configs) in TOPICS.items()]).values():
        future.result()
    wait_until(lambda: all(len(admin.list_topics(name, timeout=5).topics[name].partitions) == partitions
                           for name, (partitions, _) in TOPICS.items()), 30, message="the topics' leaders")
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "lz4",
                         "linger.ms": 5})
    for i in range(400):
        producer.produce("records", key=f"k{i}", value=f"v{i}", partition=i % 2)
        producer.produce("compacted", key=f"key{i % 7}", value=f"c{i}")
    assert producer.flush(15) == 0
    records = {0: [f"v{i}".encode() for i in range(0, 400, 2)], 1: [f"v{i}".encode() for i in range(1, 400, 2)]}
    records[0].append(take_the_transactional_id_on(bootstrap, b"in a transaction"))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "takeover", "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("records", 0, 150), TopicPartition("records", 1, 42)],
                    asynchronous=False)
    consumer.close()
    return {"records": records, "compacted": {f"key{k}".encode() for k in range(7)},
            "group": {0: 150, 1: 42}, "configs": {name: configs for name, (_, configs) in TOPICS.items()}}


def take_the_transactional_id_on(bootstrap: str, value: bytes) -> bytes:
    """A producer takes the transactional id (so the broker knows its epoch) and commits one record."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "takeover-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("records", value=value, partition=0)
    producer.commit_transaction(30)
    return value


def read(bootstrap: str) -> dict:
    """What a read_committed reader, the group and the topics' configs show."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "takeover", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    try:
        committed = consumer.committed([TopicPartition("records", 0), TopicPartition("records", 1)], 15)
        ends = {(t, p): consumer.get_watermark_offsets(TopicPartition(t, p), 15)[1]
                for t, p in (("records", 0), ("records", 1), ("compacted", 0))}
        consumer.assign([TopicPartition(t, p, 0) for t, p in ends])
        got: dict[tuple[str, int], list] = {key: [] for key in ends}
        positions = dict.fromkeys(ends, 0)

        def caught_up() -> bool:
            messages = consumer.consume(500, 0.5)
            for message in messages:
                assert message.error() is None, message.error()
                got[(message.topic(), message.partition())].append((message.key(), message.value()))
                positions[(message.topic(), message.partition())] = message.offset() + 1
            # (a transaction's marker may end a log: its last record is then one before the end)
            return not messages and all(positions[key] >= end - 1 for key, end in ends.items())

        wait_until(caught_up, 30, message="the records read back")
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name) for name in TOPICS])
    configs = {resource.name: {k: v.value for k, v in future.result().items() if k in TOPICS[resource.name][1]}
               for resource, future in described.items()}
    return {"records": {p: [v for _, v in got[("records", p)]] for p in (0, 1)},
            "compacted": {k for k, _ in got[("compacted", 0)]},
            "group": {c.partition: c.offset for c in committed}, "configs": configs}


class ZooKeeperKafka(KafkaNode):
    """A Kafka 3.x broker in ZooKeeper mode, as ``kafka-server-start.sh`` runs it: ``overrides`` are its whole
    server.properties but for the listener (no storage to format: the data dir and ZooKeeper are kbroker's)."""

    def properties(self) -> dict[str, str]:
        return {**self.overrides, "listeners": f"PLAINTEXT://127.0.0.1:{self.port}"}

    def launch(self) -> None:
        libs = zookeeper_jars(self.version)
        os.makedirs(self.root, exist_ok=True)
        config = os.path.join(self.root, "server.properties")
        with open(config, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in self.properties().items())
        self.proc = subprocess.Popen(
            ["java", "-Xms256m", "-Xmx1g", f"-Dlog4j.configuration=file:{KAFKA_3}/log4j.properties", "-cp",
             os.path.join(libs, "*"), "kafka.Kafka", config],
            stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT, start_new_session=True)


@pytest.mark.parametrize("version", [VERSION, OLDER, OLDEST])
def test_kafka_replicates_beside_kbroker_brokers_and_leads_for_them(tmp_path, version):
    """A rolling move from kbroker to Kafka starts with one broker: kbroker broker 3 of three stops and Kafka 3.9
    (or 3.3 or 2.8, which the controller's newest requests would cut off: it now sends each broker the versions it
    serves) starts on its data dir. kbroker's controller must bring it in as Kafka's controller would: it joins
    every ISR (so acks=all writes wait for it), becomes the leader of the partition it prefers when asked, and
    kbroker followers then replicate from it; every record is read back. Kafka's broker hands out producer ids
    from blocks kbroker's controller gives it (AllocateProducerIds), never one a kbroker broker gave. (Before
    kbroker's controller told a started broker who is alive ahead of its LeaderAndIsr, Kafka found "the new
    leader 1 is unavailable" and followed nothing; before it served AllocateProducerIds, Kafka's broker could not
    answer an idempotent producer's InitProducerId.) Kafka's clean stop then moves its lead away through
    kbroker's controller (ControlledShutdown, with the broker epoch it checks)."""
    zookeeper = ZooKeeperServer(str(tmp_path / "zookeeper")).start()
    connect = f"{zookeeper.connect}/kbroker"
    brokers = kbroker_brokers(tmp_path, (1, 2, 3), connect)
    kafka = ZooKeeperKafka(str(tmp_path / "kafka"), {**KAFKA_IN_A_CLUSTER, "broker.id": "3",
                                                     "zookeeper.connect": connect, "log.dirs": brokers[3].data_dir},
                           version=version)
    try:
        for broker in brokers.values():
            broker.start()
        bootstrap = brokers[1].bootstrap
        create(bootstrap, "mixed", partitions=3, rf=3)
        wait_until(lambda: all(len(p["isr"]) == 3 for p in describe(bootstrap, "mixed").values()), 30,
                   message="every replica in sync")
        produce_to_each_partition(bootstrap, range(0, 300))
        assert brokers[3].stop() == 0
        kafka.port = brokers[3].port   # (the endpoint broker 3 had)
        kafka.start()
        wait_until(lambda: all(3 in p["isr"] for p in describe(bootstrap, "mixed").values()), 60,
                   message="Kafka's replica in every ISR")
        produce_to_each_partition(bootstrap, range(300, 600))   # (acks=all: Kafka's replica has them too)
        ids = asyncio.run(producer_ids({kafka.port: 3, brokers[1].port: 2}))
        assert len(set(ids)) == len(ids) == 5 and all(i >= 0 for i in ids), ids
        preferred = next(i for i, p in describe(bootstrap, "mixed").items() if p["replicas"][0] == 3)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("mixed", preferred)]).result(30)
        wait_until(lambda: describe(bootstrap, "mixed")[preferred]["leader"] == 3, 30, message="Kafka leading")
        produce_to_each_partition(bootstrap, range(600, 900))   # (kbroker followers fetch from Kafka)
        wait_until(lambda: all(len(p["isr"]) == 3 for p in describe(bootstrap, "mixed").values()), 30,
                   message="kbroker's replicas in sync with Kafka's leader")
        assert sorted(int(value) for _, _, value in consume_all(bootstrap, "mixed", 3)) == list(range(900))
        # kbroker's controller is killed: the other kbroker broker takes over, and Kafka's leader has the dead
        # broker taken out of its ISR through it, or its acks=all writes wait for that broker for good.
        controller = asyncio.run(cluster_metadata(brokers[1].port)).controller_id
        assert controller in (1, 2)   # (Kafka started after the first election)
        survivor = brokers[3 - controller]
        brokers[controller].kill()
        wait_until(lambda: all(controller not in p["isr"] for p in describe(survivor.bootstrap, "mixed").values()),
                   30, message="the killed controller out of every ISR, Kafka's leader's included")
        produce_to_each_partition(survivor.bootstrap, range(900, 1200))
        assert sorted(int(value) for _, _, value in consume_all(survivor.bootstrap, "mixed", 3)) == list(range(1200))
        # Restarted, it rejoins every ISR: Kafka's leader asks for that with AlterPartition, which from Kafka 3.3
        # (v2) names the topic by id (kbroker's controller read only names: UNKNOWN_TOPIC_OR_PARTITION, which
        # Kafka takes as final, and the broker stayed out of Kafka's ISR).
        brokers[controller].start()
        wait_until(lambda: all(len(p["isr"]) == 3 for p in describe(survivor.bootstrap, "mixed").values()), 30,
                   message="the restarted broker back in every ISR, Kafka's leader's included")
        # Kafka's clean stop asks kbroker's controller, with its broker epoch, to move the lead it took.
        assert kafka.stop() in (0, 143), kafka.tail_log()
        assert re.search("Controlled shutdown (request returned successfully|succeeded)",   # (3.x's words, 2.8's)
                         kafka.tail_log(100_000))
        assert describe(survivor.bootstrap, "mixed")[preferred]["leader"] != 3
    finally:
        kill_all(kafka, brokers, zookeeper)


async def producer_ids(asked: dict[int, int]) -> list[int]:
    """InitProducerId asked of each port (as many times as it says): the ids given. Kafka's broker answers
    COORDINATOR_LOAD_IN_PROGRESS while its request for a block is under way, and a client asks again."""
    ids = []
    for port, times in asked.items():
        conn = await KafkaConnection.open("127.0.0.1", port, client_id="takeover")
        try:
            for _ in range(times):
                answer = await settled(lambda: conn.request(INIT_PRODUCER_ID, 4, {
                    "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1,
                    "producer_epoch": -1}), lambda a: a.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
                assert answer.error_code == 0, (port, answer)
                ids.append(answer.producer_id)
        finally:
            await conn.close()
    return ids


def produce_to_each_partition(bootstrap: str, values) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    failed = []
    for value in values:
        producer.produce("mixed", value=str(value), partition=value % 3,
                         on_delivery=lambda error, _: failed.append(error) if error else None)
    assert producer.flush(30) == 0 and not failed, failed[:3]


@pytest.mark.parametrize("version", [VERSION, OLDER, OLDEST])
def test_kbroker_brokers_follow_a_kafka_controller(tmp_path, version):
    """The other half of a mixed cluster: Kafka 3.9 (or 3.3 or 2.8) is the controller and kbroker brokers 2 and 3
    obey it. They lead and follow as its LeaderAndIsr says, a stopping one asks it to move its leaderships
    (ControlledShutdown), a restarted one rejoins the ISRs (AlterPartition, which Kafka refuses unless it carries
    the broker epoch of the leader's current registration: kbroker brokers sent -1 and stayed out of every ISR), and
    when one is killed Kafka elects the others. Transactions coordinated on each broker write their markers to
    partitions led by the others (kbroker's coordinators sent WriteTxnMarkers v2, which Kafka 3.9 does not serve: it
    closed the connection, and each transaction stayed open, holding back read_committed consumers for good; Kafka
    3.3 serves no AddPartitionsToTxn v4, by which a kbroker leader verifies a transactional write at its
    coordinator, and kbroker refused every such write it led with INVALID_TXN_STATE: it now writes them unverified,
    as Kafka's brokers do). A stopping kbroker broker starts no fetcher for what it is made a follower of in its
    controlled shutdown, as Kafka's brokers start none: it did, caught up with Kafka's new leader just before it
    left (Kafka's controller refused it the ISR as ineligible), and Kafka 3.3's leader held its high watermark at
    that replica's end for replica.lag.time.max.ms, then until the producer's request timed out (30 s). Kafka 2.8's
    controller reads AlterPartition only at v0 (its AlterIsr): a restarted kbroker broker sent v1, and never
    rejoined an ISR. When Kafka's broker, the controller, is killed, a kbroker broker takes the controller over from
    the state Kafka's wrote. Every record is read back under read_committed."""
    zookeeper = ZooKeeperServer(str(tmp_path / "zookeeper")).start()
    connect = f"{zookeeper.connect}/kbroker"
    kafka = ZooKeeperKafka(str(tmp_path / "kafka"), {**KAFKA_IN_A_CLUSTER, "broker.id": "1",
                                                     "zookeeper.connect": connect,
                                                     "log.dirs": str(tmp_path / "kafka" / "data")}, version=version)
    brokers = kbroker_brokers(tmp_path, (2, 3), connect)
    try:
        bootstrap = kafka.start().bootstrap
        for broker in brokers.values():
            broker.start()
        wait_until(lambda: brokers_listed(brokers[3].port) == 3, 30, message="every broker told of the others")
        # (a kbroker broker's Metadata: tests.cluster's controller_at asks through kafka-python's admin client,
        # which may ask any broker and cannot read Kafka 3.3's DescribeCluster v0)
        assert asyncio.run(cluster_metadata(brokers[2].port)).controller_id == 1
        create(bootstrap, "mixed", partitions=3, rf=3)
        in_sync = lambda n: all(len(p["isr"]) == n for p in describe(bootstrap, "mixed").values())   # noqa: E731
        wait_until(lambda: in_sync(3), 30, message="every replica in sync")
        assert {p["leader"] for p in describe(bootstrap, "mixed").values()} == {1, 2, 3}
        produce_to_each_partition(bootstrap, range(0, 300))
        for i in range(6):
            commit_to_each_partition(bootstrap, f"tx-{i}", range(900 + 6 * i, 906 + 6 * i))
        coordinators = {describe(bootstrap, "__transaction_state")[partition_for(f"tx-{i}", 6)]["leader"]
                        for i in range(6)}
        assert coordinators >= {2, 3}, coordinators   # (kbroker's coordinators among them)
        assert brokers[2].stop() == 0
        # (Kafka's controller answers the controlled shutdown before its own broker has applied the ISRs without
        # broker 2, which a kbroker broker's quick exit can outrun)
        wait_until(lambda: all(p["leader"] != 2 and 2 not in p["isr"] for p in describe(bootstrap, "mixed").values()),
                   10, message="the stopped broker out of every ISR, as Kafka's own broker tells it")
        produce_to_each_partition(bootstrap, range(300, 600))
        brokers[2].start()
        wait_until(lambda: in_sync(3), 30, message="the restarted kbroker broker back in every ISR")

        brokers[3].kill()
        wait_until(lambda: all(p["leader"] in (1, 2) for p in describe(bootstrap, "mixed").values()), 30,
                   message="Kafka's controller electing away from the killed broker")
        produce_to_each_partition(bootstrap, range(600, 900))
        got = sorted(int(value) for _, _, value in consume_all(bootstrap, "mixed", 3, "read_committed"))
        assert got == list(range(936))

        # Kafka's broker, the controller, is killed: a kbroker broker takes the controller over from the state
        # Kafka's wrote and elects kbroker leaders for what Kafka led.
        brokers[3].start()
        wait_until(lambda: in_sync(3), 30, message="the killed kbroker broker back in every ISR")
        kafka.kill()
        left = brokers[2].bootstrap
        wait_until(lambda: asyncio.run(cluster_metadata(brokers[2].port)).controller_id in (2, 3), 30,
                   message="a kbroker broker the controller")
        wait_until(lambda: all(p["leader"] in (2, 3) and 1 not in p["isr"] for p in describe(left, "mixed").values()),
                   30, message="kbroker's controller electing away from the killed Kafka controller")
        produce_to_each_partition(left, range(936, 1200))
        got = sorted(int(value) for _, _, value in consume_all(left, "mixed", 3, "read_committed"))
        assert got == list(range(1200))
    finally:
        kill_all(kafka, brokers, zookeeper)
    # (Kafka's controller logs an ERROR when the thread sending to a broker that left is stopped while it waits
    # to retry: a Kafka broker's stop races it too)
    assert not [line for line in kafka.tail_log(100_000).splitlines()
                if "] ERROR " in line and "fails to send a request to broker" not in line
                or "stale broker epoch" in line or "ineligible replicas Set(2)" in line]


def commit_to_each_partition(bootstrap: str, transactional_id: str, values) -> None:
    """One committed transaction of ``values``, each to partition value % 3 of "mixed"."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce("mixed", value=str(value), partition=value % 3)
    producer.commit_transaction(30)


def kbroker_brokers(tmp_path, broker_ids, connect: str) -> dict[int, BrokerProcess]:
    """kbroker brokers of a mixed cluster, on the cluster tests' settings, not yet started."""
    return {i: BrokerProcess(str(tmp_path / f"broker-{i}" / "data"),
                             {**CLUSTER_OVERRIDES, "broker.id": str(i), "zookeeper.connect": connect})
            for i in broker_ids}


def kill_all(kafka: ZooKeeperKafka, brokers: dict[int, BrokerProcess], zookeeper: ZooKeeperServer) -> None:
    kafka.kill()
    for broker in brokers.values():
        broker.kill()
    zookeeper.stop()

