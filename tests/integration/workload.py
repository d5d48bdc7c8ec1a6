"""A deterministic record set used by every client's tests, and its checks."""

from __future__ import annotations

from dataclasses import dataclass

CODECS = ["gzip", "snappy", "lz4", "zstd"]


@dataclass(frozen=True)
class Sent:
    i: int
    key: bytes | None
    value: bytes | None
    headers: tuple


def records(count: int, tag: str = "") -> list[Sent]:
    out = []
    for i in range(count):
        key = None if i % 7 == 0 and i % 11 else f"key-{i % 40}".encode()  # never both null
        value = None if i % 11 == 0 else f"{tag}value-{i}-".encode() * (1 + i % 5)
        headers = (("i", str(i).encode()), ("h2", b"" if i % 3 else b"x"))
        out.append(Sent(i, key, value, headers))
    return out


def check_received(sent: list[Sent], received: list[tuple[int, int, bytes | None, bytes | None, list]]) -> None:
    """received: (partition, offset, key, value, headers). Every record once, intact, in order per key."""
    by_i = {}
    for partition, offset, key, value, headers in received:
        hdrs = dict(headers)
        i = int(hdrs["i"])
        assert i not in by_i, f"record {i} received twice"
        by_i[i] = (partition, offset, key, value, headers)
    assert len(by_i) == len(sent), f"received {len(by_i)} of {len(sent)}"
    last_offset_of_key: dict = {}
    for s in sent:
        partition, offset, key, value, headers = by_i[s.i]
        assert key == s.key and value == s.value, f"record {s.i} differs"
        assert [(k, v) for k, v in headers] == [(k, v) for k, v in s.headers], f"headers of {s.i}"
        if s.key is not None:
            prev = last_offset_of_key.get(s.key)
            if prev is not None:
                assert prev[0] == partition and prev[1] < offset, f"key {s.key!r} out of order"
            last_offset_of_key[s.key] = (partition, offset)


def make_topic(bootstrap: str, name: str, partitions: int = 1, configs: dict | None = None) -> None:
    """Create a topic with librdkafka's admin client (kept alive until the result arrives)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(10)


def read_partition(bootstrap: str, topic: str, poll_timeout: float = 10) -> list:
    """Every message of partition 0, start to end (librdkafka, partition EOF); fails if a poll times out."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    messages = []
    try:
        while True:
            m = consumer.poll(poll_timeout)
            assert m is not None, f"no end of partition within {poll_timeout} s"
            if m.error():
                return messages
            messages.append(m)
    finally:
        consumer.close()
