"""A topic's compression.type on a real broker (KIP-390 levels beside it): librdkafka's producers send with one
codec, the topic keeps another, and the batches on disk are in the topic's codec while consumers read every
record as it was sent, a transactional producer's included (read_committed); the producer's own codec is kept
where the topic says ``producer`` or names it."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kbroker.protocol.records import BatchHeader
from tests.cluster import batches
from tests.integration.workload import make_topic, read_partition


def on_disk(broker, topic: str) -> list[BatchHeader]:
    return [BatchHeader.parse(b) for b in batches(broker.data_dir, topic, 0)]


@pytest.mark.parametrize("sent, kept, level", [("lz4", "zstd", ("compression.zstd.level", "9")),
                                               ("gzip", "uncompressed", None), ("none", "lz4", None),
                                               ("zstd", "gzip", ("compression.gzip.level", "1")),
                                               ("snappy", "producer", None), ("gzip", "gzip", None)])
def test_batches_are_stored_in_the_topics_codec_and_read_as_sent(broker, topic_name, sent, kept, level):
    make_topic(broker.bootstrap, topic_name, 1, {"compression.type": kept, **dict([level] if level else [])})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": sent, "linger.ms": 20,
                         "enable.idempotence": True})
    for i in range(500):
        producer.produce(topic_name, key=b"k%d" % i, value=b"value %d " % i + b"y" * 300, headers=[("n", b"%d" % i)])
    assert producer.flush(30) == 0
    codecs = {"none": 0, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    stored = on_disk(broker, topic_name)
    assert {h.compression for h in stored} == {codecs[sent if kept == "producer" else kept]}
    assert all(h.has_producer_id and h.base_sequence >= 0 for h in stored)   # the idempotent producer's fields
    read = read_partition(broker.bootstrap, topic_name)
    assert [(m.key(), m.value(), m.headers()) for m in read] == \
        [(b"k%d" % i, b"value %d " % i + b"y" * 300, [("n", b"%d" % i)]) for i in range(500)]


def test_a_transaction_recompressed_commits_and_aborts_as_sent(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, 1, {"compression.type": "zstd"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "gzip",
                         "transactional.id": f"{topic_name}-txn"})
    producer.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(50):
            producer.produce(topic_name, value=b"%s %d" % (outcome.encode(), i))
        (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(30)
    data = [h for h in on_disk(broker, topic_name) if not h.is_control]
    assert data and all(h.compression == 4 and h.is_transactional for h in data)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic_name}-g",
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    values = []
    while True:
        m = consumer.poll(10)
        assert m is not None
        if m.error():
            break
        values.append(m.value())
    consumer.close()
    assert values == [b"commit %d" % i for i in range(50)] * 2


def test_a_batch_larger_recompressed_than_the_topic_allows_is_refused(broker, topic_name):
    """Recompression may grow a batch (a compressed one stored uncompressed): past max.message.bytes it is
    MESSAGE_TOO_LARGE, as Kafka checks the size again after recompressing."""
    make_topic(broker.bootstrap, topic_name, 1, {"compression.type": "uncompressed", "max.message.bytes": "20000"})
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "zstd",
                         "message.max.bytes": 1_000_000})
    # One record of 200 KB of zeros, a batch of its own whatever the machine's pace (records produced one by one
    # could leave in several batches, the first small enough to be stored): a few hundred bytes compressed.
    producer.produce(topic_name, value=bytes(200_000), on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert errors and all(e is not None and e.name() == "MSG_SIZE_TOO_LARGE" for e in errors)
    assert on_disk(broker, topic_name) == []


def test_the_group_coordinators_writes_are_compressed_by_offsets_topic_compression_codec(tmp_path, topic_name):
    """``offsets.topic.compression.codec`` (zstd here) compresses every batch the group coordinator writes to
    __consumer_offsets, as Kafka's does, and a restarted broker loads the committed offsets from them."""
    import os

    from tests.brokerproc import BrokerProcess

    broker = BrokerProcess(str(tmp_path / "data"), {"offsets.topic.compression.codec": "4"}).start()
    try:
        make_topic(broker.bootstrap, topic_name, 3)
        group = f"group-{topic_name}"
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        wanted = [TopicPartition(topic_name, p, 10 + p) for p in range(3)]
        consumer.commit(offsets=wanted, asynchronous=False)
        consumer.close()
        assert broker.stop() == 0
        folders = [n for n in os.listdir(broker.data_dir) if n.startswith("__consumer_offsets-")]
        stored = [h for n in folders for h in (BatchHeader.parse(b) for b in batches(
            broker.data_dir, "__consumer_offsets", int(n.rsplit("-", 1)[1]))) if not h.is_control]
        assert stored and {h.compression for h in stored} == {4}
        broker.start()
        reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        try:
            committed = reader.committed([TopicPartition(topic_name, p) for p in range(3)], timeout=10)
        finally:
            reader.close()
        assert [(tp.partition, tp.offset) for tp in committed] == [(p, 10 + p) for p in range(3)]
    finally:
        broker.kill()
