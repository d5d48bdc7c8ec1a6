"""What the Spark source and sink ask the brokers, through librdkafka (confluent-kafka).

Driver side: which partitions a subscription covers and their earliest,
latest and by-timestamp offsets. Nothing here commits to a consumer group:
Spark checkpoints the offsets itself.
"""

from __future__ import annotations

import uuid

from kbroker.client.spark.options import EARLIEST, LATEST, Subscription


def consumer(client: dict, read_committed: bool, **extra):
    """A consumer for assign()/offset queries only: a throwaway group id, nothing ever committed or stored."""
    from confluent_kafka import Consumer

    # fetch.queue.backoff.ms: librdkafka 2.x pauses fetching for this long (default 1 s) whenever its local
    # queue passes queued.min.messages; a range reader drains that queue as fast as it fills, so the pause only
    # idles it (a 250,000-record range read 6.5 times faster without it). A ``kafka.*`` option overrides it.
    config = {"group.id": f"kbroker-spark-{uuid.uuid4()}", "enable.auto.commit": False,
              "enable.auto.offset.store": False, "fetch.queue.backoff.ms": 0,
              "isolation.level": "read_committed" if read_committed else "read_uncommitted", **client, **extra}
    return Consumer(config)


def unreachable(client: dict, exc: Exception) -> RuntimeError:
    return RuntimeError(f"cannot reach kbroker at kafka.bootstrap.servers={client['bootstrap.servers']}: {exc}")


def partitions_of(c, client: dict, subscription: Subscription, timeout: float) -> list[tuple[str, int]]:
    """The topic-partitions the subscription covers now; a named topic or partition that is missing is an error."""
    from confluent_kafka import KafkaException

    try:
        metadata = c.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise unreachable(client, exc) from None
    topics = {name: sorted(t.partitions) for name, t in metadata.topics.items()
              if t.error is None and not name.startswith("__")}
    if subscription.kind == "subscribe":
        missing = [t for t in subscription.topics if t not in topics]
        if missing:
            raise ValueError(f"option 'subscribe': topic(s) {', '.join(missing)} do not exist")
        return [(t, p) for t in subscription.topics for p in topics[t]]
    if subscription.kind == "subscribePattern":
        return [(t, p) for t in sorted(topics) if subscription.pattern.fullmatch(t) for p in topics[t]]
    missing = [f"{t}-{p}" for t, p in subscription.assigned if p not in topics.get(t, [])]
    if missing:
        raise ValueError(f"option 'assign': partition(s) {', '.join(missing)} do not exist")
    return list(subscription.assigned)


def watermarks(c, client: dict, tps: list[tuple[str, int]], timeout: float) -> dict[tuple[str, int], tuple[int, int]]:
    """(earliest, latest) per partition; latest is the last stable offset for a read_committed consumer."""
    from confluent_kafka import KafkaException, TopicPartition

    out = {}
    for topic, partition in tps:
        try:
            out[(topic, partition)] = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout,
                                                              cached=False)
        except KafkaException as exc:
            raise unreachable(client, exc) from None
    return out


def offsets_for_times(c, client: dict, wanted: dict[tuple[str, int], int], timeout: float
                      ) -> dict[tuple[str, int], int]:
    """The first offset at or after each timestamp; None where no record is that new."""
    from confluent_kafka import KafkaException, TopicPartition

    if not wanted:
        return {}
    try:
        found = c.offsets_for_times([TopicPartition(t, p, ts) for (t, p), ts in wanted.items()], timeout=timeout)
    except KafkaException as exc:
        raise unreachable(client, exc) from None
    return {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None for tp in found}


def resolve(spec_offset: int, bounds: tuple[int, int]) -> int:
    """An EARLIEST/LATEST/absolute offset made absolute within (earliest, latest)."""
    low, high = bounds
    if spec_offset == EARLIEST:
        return low
    if spec_offset == LATEST:
        return high
    return spec_offset
