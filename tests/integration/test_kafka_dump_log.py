"""Apache Kafka's own kafka-dump-log (``kafka.tools.DumpLogSegments`` 4.2.1) reads every file kbroker writes into a
partition's directory, as an operator reading a log by hand would: the record batches of data topics (idempotent,
compressed, transactional with both markers, compacted by the cleaner), their offset and time indexes (checked
against the log), the aborted-transaction indexes, the producer-state snapshots, and each internal topic's records
through the decoder Kafka has for it (``__consumer_offsets`` with every group type's records, ``__transaction_state``,
``__share_group_state``). Kafka's layout is kbroker's on-disk format; this is where its own code says so. (Kafka's
jars are the reference suite's, fetched by Maven on first use.)"""

from __future__ import annotations

import glob
import os
import re
import uuid

from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from kbroker.client.connection import KafkaConnection
from tests.brokerproc import BrokerProcess
from tests.cluster import wait_until
from tests.reference.apache_kafka import tool
from tests.streams_requests import STREAMS_GROUP_HEARTBEAT, heartbeat, join, subtopology, topic_info
from tests.waiting import settled

DUMP = "kafka.tools.DumpLogSegments"
DECODERS = {"__consumer_offsets": "--offsets-decoder", "__transaction_state": "--transaction-log-decoder",
            "__share_group_state": "--share-group-state-decoder"}
# Every record type of __consumer_offsets kbroker writes: offsets (1), classic groups (2), consumer groups (3, 5-8),
# share groups (10-15) and streams groups (17, 19-23).
GROUP_RECORD_TYPES = {1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 17, 19, 20, 21, 22, 23}


async def test_kafka_dump_log_reads_every_file_kbroker_writes(tmp_path):
    data_dir = str(tmp_path / "data")
    broker = BrokerProcess(data_dir, {"group.streams.initial.rebalance.delay.ms": "0"})
    try:
        written = write_every_kind_of_record(broker.start().bootstrap, data_dir)
        await join_a_streams_group(broker.port)
    finally:
        assert broker.stop() == 0, broker.tail_log()   # a clean stop writes each log's producer snapshot

    data = dump(data_dir, [t for t in written if not t.startswith("__")], "--deep-iteration", "--print-data-log")
    assert data.count("isvalid: true") == data.count("baseOffset:") > 0 and "invalid bytes" not in data
    assert "endTxnMarker: COMMIT" in data and "endTxnMarker: ABORT" in data and "compresscodec: zstd" in data
    assert re.search(r"\| offset: \d+ .* headerKeys: \[trace\] key: k-199 payload: v-199", data)
    assert re.search(r"version: 0 producerId: \d+ firstOffset: \d+ lastOffset: \d+", data), "no aborted txn indexed"
    assert re.search(r"producerId: \d+ producerEpoch: 0 .* lastSequence: 199 ", data), "no idempotent producer"
    assert len(re.findall(r"^timestamp: \d+ offset: \d+$", data, re.M)) > 1   # (the compacted topic's segments)

    groups = dump(data_dir, ["__consumer_offsets"], "--offsets-decoder")
    assert {int(t) for t in re.findall(r'key: \{"type":"(\d+)"', groups)} >= GROUP_RECORD_TYPES
    transactions = dump(data_dir, ["__transaction_state"], "--transaction-log-decoder")
    assert '"transactionalId":"dump-log-txn"' in transactions and '"transactionStatus":4' in transactions
    shares = dump(data_dir, ["__share_group_state"], "--share-group-state-decoder")
    assert re.search(r'"startOffset":([1-9]\d*)', shares), "no share partition moved on"
    for output in (groups, transactions, shares):
        assert "Error at offset" not in output and output.count("isvalid: true") == output.count("baseOffset:")


def dump(data_dir: str, topics: list[str], *options: str) -> str:
    """kafka-dump-log over every file of every partition of ``topics``; what it prints, once it printed nothing
    to stderr (where it reports an index that disagrees with its log, offsets out of order in a log that was never
    compacted, a snapshot it cannot read)."""
    files = sorted(path for topic in topics for path in glob.glob(os.path.join(data_dir, f"{topic}-*", "*"))
                   if path.endswith((".log", ".index", ".timeindex", ".snapshot", ".txnindex"))
                   and os.path.getsize(path))
    assert files
    result = tool(DUMP, "--files", ",".join(files), *options)
    errors = "\n".join(line for line in result.stderr.splitlines() if not compacted_gap(line, topics))
    assert result.returncode == 0 and not errors, errors[-3000:]
    return result.stdout


def compacted_gap(line: str, topics: list[str]) -> bool:
    """The lines of a compacted log's offsets that the cleaner left gaps between (as in Kafka's own logs)."""
    return bool(re.match(r"\s+\d+ is followed by \d+$", line)) or (
        line.startswith("Non-consecutive offsets in ") and any(f"/{t}-" in line for t in ("compacted", *DECODERS)))


def write_every_kind_of_record(bootstrap: str, data_dir: str) -> list[str]:
    """Records of each kind on the broker, its internal topics' included; the topics written."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    compacted = {"cleanup.policy": "compact", "internal.segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01",
                 "delete.retention.ms": "0"}
    for future in admin.create_topics([NewTopic("records", 1, 1), NewTopic("txn", 1, 1), NewTopic("shared", 1, 1),
                                       NewTopic("compacted", 1, 1, config=compacted)]).values():
        future.result()

    idempotent = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "compression.type": "zstd",
                           "linger.ms": 5})
    for i in range(200):
        idempotent.produce("records", key=f"k-{i}", value=f"v-{i}", headers=[("trace", b"t")])
        idempotent.produce("shared", value=f"s-{i}")
    for i in range(300):   # (one batch each, so that segments of 2 KiB roll and the cleaner has work)
        idempotent.produce("compacted", key=f"key-{i % 10}", value=None if i % 29 == 0 else f"value-{i}")
        idempotent.flush(10)
    assert idempotent.flush(10) == 0

    transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": "dump-log-txn"})
    transactional.init_transactions(10)
    eos_group = Consumer({"bootstrap.servers": bootstrap, "group.id": "dump-log-eos"})
    for commit in (True, False):
        transactional.begin_transaction()
        for i in range(10):
            transactional.produce("txn", value=f"t-{i}")
        assert transactional.flush(10) == 0   # (so that the aborted transaction's records are in the log)
        if commit:
            transactional.send_offsets_to_transaction([TopicPartition("records", 0, 10)],
                                                      eos_group.consumer_group_metadata())
            transactional.commit_transaction(10)
        else:
            transactional.abort_transaction(10)
    eos_group.close()

    for protocol in ("classic", "consumer"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"dump-log-{protocol}",
                             "group.protocol": protocol, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe(["records"])
        got = []
        wait_until(lambda: got.extend(m for m in consumer.consume(50, 0.5) if m.error() is None) or len(got) >= 50,
                   30, message=f"a {protocol} group's records")
        consumer.commit(asynchronous=False)
        consumer.close()

    share_group = f"dump-log-share-{uuid.uuid4().hex[:6]}"
    earliest = ConfigResource(ConfigResource.Type.GROUP, share_group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([earliest]).values():
        future.result()
    share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": share_group})
    share.subscribe(["shared"])
    acknowledged = []
    wait_until(lambda: acknowledged.extend(m for m in share.poll(0.2) if m.error() is None)
               or len(acknowledged) >= 200, 30, message="the share group's records")
    share.commit_sync(10)
    share.close()

    wait_until(lambda: cleaned("compacted", data_dir), 30, message="the cleaner to compact")
    return ["records", "txn", "shared", "compacted", *DECODERS]


def cleaned(topic: str, data_dir: str) -> bool:
    with open(os.path.join(data_dir, "cleaner-offset-checkpoint")) as checkpoint:
        return any(line.split()[:2] == [topic, "0"] and int(line.split()[2]) > 0 for line in checkpoint)


async def join_a_streams_group(port: int) -> None:
    """A streams group's records (17, 19-23): a member joins with a topology and is given its task."""
    group, member = f"dump-log-streams-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    conn = await KafkaConnection.open("127.0.0.1", port, client_id="dump-log")
    try:
        await settled(lambda: conn.request(10, 4, {"key_type": 0, "coordinator_keys": [group]}),
                      lambda a: a.coordinators[0].error_code == 0)
        topology = [subtopology("0", sources=["records"], changelogs=[topic_info(f"{group}-store-changelog")])]
        joined = await conn.request(STREAMS_GROUP_HEARTBEAT, 0, join(group, member, topology))
        assert joined.error_code == 0
        assigned = await settled(lambda: conn.request(STREAMS_GROUP_HEARTBEAT, 0, heartbeat(
            group, member, joined.member_epoch, active={}, standby={}, warmup={})),
            lambda a: a.error_code or a.active_tasks)
        assert assigned.error_code == 0 and assigned.active_tasks
    finally:
        await conn.close()
