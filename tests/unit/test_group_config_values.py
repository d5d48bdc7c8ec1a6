"""Group config values read as Kafka's Java reads them: ISO-8601 durations (java.time.Duration.parse), and
String.hashCode, which orders the configs Kafka's controller checks (storage/java_order.py)."""

import pytest

from kbroker.broker.configuration.group_configs import checked, duration_ms
from kbroker.storage.java_order import hash_order, string_hash


@pytest.mark.parametrize("text, ms", [
    ("PT0S", 0), ("P1D", 86_400_000), ("pt1h", 3_600_000), ("PT1.5S", 1500), ("PT1H-30M", 1_800_000),
    ("PT-0.5S", -500), ("-PT1H", -3_600_000), ("P-1DT25H", 3_600_000), ("PT0,5S", 500), ("PT0.0000001S", 0), ("PT,5S", None),
    ("P1DT", None), ("PT", None), ("P", None), ("P1W", None), ("1H", None), ("PT1.1234567891S", None),
    ("P9223372036854775807D", None), ("PT1H ", None),
])
def test_durations_as_java_reads_them(text, ms):
    assert duration_ms(text) == ms


def test_string_hash_is_javas():
    assert [string_hash(s) for s in ("", "hello", "polygenelubricants", "é")] == [0, 99162322, -(1 << 31), 233]


def test_hash_order_is_by_bucket_then_insertion():
    # (Kafka 4.2.1 named consumer.session.timeout.ms first of these three APPENDs: tests/reference)
    assert hash_order(["share.delivery.count.limit", "streams.initial.rebalance.delay.ms",
                       "consumer.session.timeout.ms"])[0] == "consumer.session.timeout.ms"


def test_a_stored_value_is_the_parsed_one():
    config = {"group.consumer.session.timeout.ms": 45000, "group.consumer.heartbeat.interval.ms": 5000,
              "group.consumer.min.session.timeout.ms": 45000, "group.consumer.max.session.timeout.ms": 60000,
              "group.consumer.min.heartbeat.interval.ms": 5000, "group.consumer.max.heartbeat.interval.ms": 15000,
              "group.share.min.session.timeout.ms": 45000, "group.share.max.session.timeout.ms": 60000,
              "group.share.min.heartbeat.interval.ms": 5000, "group.share.max.heartbeat.interval.ms": 15000,
              "group.share.min.record.lock.duration.ms": 15000, "group.share.max.record.lock.duration.ms": 60000,
              "group.streams.min.session.timeout.ms": 45000, "group.streams.max.session.timeout.ms": 60000,
              "group.streams.min.heartbeat.interval.ms": 5000, "group.streams.max.heartbeat.interval.ms": 15000,
              "group.streams.max.standby.replicas": 2}
    assert checked({"consumer.session.timeout.ms": " +50000", "share.auto.offset.reset": "earliest "}, config) == (
        {"consumer.session.timeout.ms": "50000", "share.auto.offset.reset": "earliest"}, None)
    assert checked({"share.delivery.count.limit": "3"}, config) == (
        None, "Unknown group config name: share.delivery.count.limit")
