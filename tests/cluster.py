"""A real cluster for tests: one ZooKeeper process and N kbroker processes on loopback ports."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaConnectionError, TopicAlreadyExistsError

from kbroker.broker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.protocol.records import split_batches
from tests.brokerproc import BrokerProcess

CLUSTER_OVERRIDES = {
    "zookeeper.session.timeout.ms": "3000",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.num.partitions": "6",
    "transaction.state.log.min.isr": "2",
    "replica.lag.time.max.ms": "5000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "controlled.shutdown.retry.backoff.ms": "200",
}


@dataclass
class Cluster:
    root: str
    size: int = 3
    overrides: dict[str, str] = field(default_factory=dict)
    per_broker: dict[int, dict[str, str]] = field(default_factory=dict)   # e.g. {1: {"broker.rack": "a"}}
    zookeeper: ZooKeeperServer | None = None
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)

    def start(self, before_brokers=None) -> "Cluster":
        """``before_brokers(zookeeper_connect)``: what must be in ZooKeeper before the first broker runs."""
        self.zookeeper = ZooKeeperServer(os.path.join(self.root, "zookeeper")).start()
        if before_brokers is not None:
            before_brokers(self.zookeeper.connect + "/kbroker")
        for broker_id in range(1, self.size + 1):
            proc = BrokerProcess(os.path.join(self.root, f"broker-{broker_id}", "data"), {
                **CLUSTER_OVERRIDES, "broker.id": str(broker_id),
                "zookeeper.connect": self.zookeeper.connect + "/kbroker", **self.overrides,
                **self.per_broker.get(broker_id, {})})
            self.brokers[broker_id] = proc.start()
        if not any("listeners" in c for c in (self.overrides, *self.per_broker.values())):   # (PLAINTEXT ones)
            wait_until(self._formed, 30, 0.05, f"every broker listing all {self.size} brokers")
        return self

    def _formed(self) -> bool:
        """Every broker's Metadata lists every broker: the controller has seen each registration (a topic with
        replication factor ``size`` created before then is refused, as Kafka refuses it, with
        INVALID_REPLICATION_FACTOR)."""
        return all(brokers_listed(b.port) == self.size for b in self.brokers.values())

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.proc and b.proc.poll() is None)

    def stop(self) -> dict[int, int]:
        """SIGTERM every running broker: their exit codes (brokers a test left killed are not asked)."""
        codes = {i: b.stop() for i, b in self.brokers.items() if b.proc is not None and b.proc.poll() is None}
        if self.zookeeper is not None:
            self.zookeeper.stop()
        return codes

    def kill(self) -> None:
        for b in self.brokers.values():
            b.kill()
        if self.zookeeper is not None:
            self.zookeeper.kill()


async def cluster_metadata(port: int, sasl=None, client_id: str = "kbroker-client"):
    """The Metadata (no topics; v12, or the highest the broker serves: Kafka 2.8's is v11) of the broker on
    127.0.0.1:``port``, asked on a connection of its own; ``sasl``: the SaslCredentials of a SASL listener."""
    from kbroker.client.connection import KafkaConnection

    conn = await KafkaConnection.open("127.0.0.1", port, client_id=client_id, sasl=sasl, negotiate=True)
    try:
        return await conn.request(3, conn.usable(3, 12, 1), {"topics": [], "allow_auto_topic_creation": False,
                                                             "include_topic_authorized_operations": False})
    finally:
        await conn.close()


def brokers_listed(port: int, timeout: float = 10.0, sasl=None) -> int:
    """How many brokers the broker on ``port`` lists in its Metadata (0 if it does not answer in time);
    ``sasl``: the SaslCredentials of a SASL listener."""
    import asyncio

    async def ask() -> int:
        return len((await cluster_metadata(port, sasl)).brokers)
    try:
        return asyncio.run(asyncio.wait_for(ask(), timeout))
    except Exception:   # (not answering yet, in whatever way: refused, reset, a SASL exchange cut short)
        return 0


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.1, message: str = "condition"):
    """Poll a condition of an outside process (a test-side helper; the broker itself never polls)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as exc:   # a client error while brokers come and go: look again
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError(f"{message} not reached within {timeout}s (last: {last!r})")


async def known_to(port: int, topic: str, partitions: int = 1, leading: bool = False, timeout: float = 15.0) -> None:
    """Until the broker on ``port`` knows every partition of ``topic`` and its leader (``leading``: until it
    serves each as their leader, ListOffsets answering without error). A topic's creation is answered once
    the controller has it; each broker learns of it a moment later, and before then answers
    UNKNOWN_TOPIC_OR_PARTITION (a client retries it): a test of another answer waits here first."""
    import asyncio

    from kbroker.client.connection import KafkaConnection

    async def ready(conn) -> bool:
        if leading:
            answer = await conn.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{
                "name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                                              for p in range(partitions)]}]})
            return all(p.error_code == 0 for t in answer.topics for p in t.partitions)
        answer = await conn.request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
        (found,) = answer.topics
        return found.error_code == 0 and len(found.partitions) == partitions and \
            all(p.leader_id >= 0 for p in found.partitions)
    conn = await KafkaConnection.open("127.0.0.1", port)
    try:
        deadline = time.monotonic() + timeout
        while not await ready(conn):
            assert time.monotonic() < deadline, f"broker on {port} did not come to know {topic} in {timeout}s"
            await asyncio.sleep(0.05)   # (polling another process's state: nothing here to wait on)
    finally:
        await conn.close()


def partitions_at(port: int, topic: str) -> list:
    """The topic's partitions (Metadata v12) as the broker on ``port`` alone knows them: a client given a
    cluster's bootstrap may turn to another broker (a paused one, and wait out its request timeout there)."""
    import asyncio

    from kbroker.client.connection import KafkaConnection

    async def ask():
        conn = await KafkaConnection.open("127.0.0.1", port)
        try:
            answer = await conn.request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False})
        finally:
            await conn.close()
        return [p for t in answer.topics for p in t.partitions]
    return asyncio.run(ask())


def admin_call(bootstrap: str, call, timeout: float = 15.0, request_timeout_ms: int = 10000):
    """``call(admin)`` on a fresh admin client. A broker that has just stopped is still listed as live until
    the controller has seen its registration go (Kafka lists shutting-down brokers too), and kafka-python's
    admin client may pick it and be refused instead of trying another: ask again within ``timeout``, as
    Kafka's own admin client does."""
    deadline = time.monotonic() + timeout
    while True:
        admin = None
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=request_timeout_ms)
            return call(admin)
        except KafkaConnectionError:
            if time.monotonic() > deadline:
                raise
        finally:
            if admin is not None:
                admin.close()
        time.sleep(0.2)


def describe(bootstrap: str, topic: str, timeout: float = 15.0) -> dict[int, dict]:
    """Each partition's leader, replicas and ISR. A broker that has just started may not have had the
    controller's UpdateMetadata yet and answer UNKNOWN_TOPIC_OR_PARTITION (as Kafka does in that window):
    ask again, as clients do, until the topic is known (and on a refused connection, as ``admin_call``)."""
    deadline = time.monotonic() + timeout
    while True:
        found = admin_call(bootstrap, lambda admin: admin.describe_topics([topic])[0], deadline - time.monotonic())
        if found["error_code"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return {p["partition_index"]: {"leader": p["leader_id"], "replicas": p["replica_nodes"], "isr": p["isr_nodes"]}
            for p in found["partitions"]}


def controller_of(cluster) -> int:
    """The controller's broker id, as DescribeCluster answers it (-1 while there is none)."""
    return controller_at(cluster.bootstrap)


def controller_at(bootstrap: str) -> int:
    """``controller_of`` for brokers a ``Cluster`` did not start (Apache Kafka's among them)."""
    return admin_call(bootstrap, lambda admin: admin.describe_cluster()["controller_id"])


def create(bootstrap: str, topic: str, partitions: int = 3, rf: int = 3, configs=None) -> None:
    """The topic created (a connection refused or lost asked again, as ``admin_call``: when one was lost after
    the creation reached the broker, the next attempt finds the topic there, and that is the creation)."""
    attempts = []

    def call(admin) -> None:
        attempts.append(None)
        try:
            admin.create_topics([NewTopic(topic, partitions, rf, topic_configs=configs or {})], timeout_ms=30000)
        except TopicAlreadyExistsError:
            if len(attempts) == 1:
                raise
    admin_call(bootstrap, call, request_timeout_ms=30000)


def batches(data_dir: str, topic: str, partition: int) -> list[bytes]:
    """Every batch in a replica's .log files, byte for byte."""
    folder = os.path.join(data_dir, f"{topic}-{partition}")
    out = []
    for name in sorted(n for n in os.listdir(folder) if n.endswith(".log")):
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        out += [bytes(data[pos:pos + h.size]) for pos, h in split_batches(data)]
    return out


def consume_all(bootstrap: str, topic: str, partitions: int, isolation_level: str = "read_uncommitted"
                ) -> list[tuple[int, int, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000,
                             auto_offset_reset="earliest", isolation_level=isolation_level)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    out = []
    for record in consumer:
        out.append((record.partition, record.offset, record.value))
    consumer.close()
    return out


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    return describe(bootstrap, topic)[partition]["leader"]
