"""Topic config values as Kafka's Java reads and renders them (storage/config_values.py): what is taken, what
DescribeConfigs then shows, and the words of a refusal."""

import pytest

from kbroker.storage.config_values import Refused, java_double, normalized, parse, problem
from kbroker.storage.log_config import throttled_replicas


@pytest.mark.parametrize("x, text", [(0.5, "0.5"), (1.0, "1.0"), (0.1, "0.1"), (1e-4, "1.0E-4"), (5e-4, "5.0E-4"),
                                     (1.5e-5, "1.5E-5"), (0.001, "0.001"), (-0.0, "-0.0"), (float("nan"), "NaN"),
                                     (1e7, "1.0E7"), (12345.5, "12345.5")])
def test_doubles_are_printed_as_java_prints_them(x, text):
    assert java_double(x) == text


@pytest.mark.parametrize("name, raw, shown", [
    ("retention.ms", "+0050000", "50000"), ("min.cleanable.dirty.ratio", "0x1p-1", "0.5"),
    ("min.cleanable.dirty.ratio", " 0.10 ", "0.1"), ("min.cleanable.dirty.ratio", "NaN", "NaN"),
    ("min.cleanable.dirty.ratio", "0.5d", "0.5"), ("preallocate", " TRUE ", "true"),
    ("cleanup.policy", " compact , delete ", "compact,delete"), ("cleanup.policy", "compact,compact", "compact"),
    ("cleanup.policy", "", ""), ("leader.replication.throttled.replicas", "*,", "*,"),
    ("leader.replication.throttled.replicas", "0:0,,1:1", "0:0,,1:1"), ("compression.gzip.level", "-1", "-1"),
])
def test_values_kafka_takes_are_shown_as_it_shows_them(name, raw, shown):
    assert normalized(name, raw) == shown


@pytest.mark.parametrize("name, raw, message", [
    ("retention.ms", "5_000", "Invalid value 5_000 for configuration retention.ms: Not a number of type LONG"),
    ("segment.bytes", "2147483648",
     "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"),
    ("retention.ms", " -02", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ("cleanup.policy", ",compact", "Configuration 'cleanup.policy' values must not be empty."),
    ("cleanup.policy", "Compact", "Invalid value Compact for configuration cleanup.policy: String must be one of: "
                                  "compact, delete"),
    ("leader.replication.throttled.replicas", "0 : 1", "Invalid value [0 : 1] for configuration "
     "leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a list "
     "of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."),
    ("compression.gzip.level", "0", "Invalid value 0 for configuration compression.gzip.level: Value must be between "
                                    "1 and 9 or equal to -1"),
    ("min.cleanable.dirty.ratio", "1e-1x", "Invalid value 1e-1x for configuration min.cleanable.dirty.ratio: Not a "
                                           "number of type DOUBLE"),
])
def test_values_kafka_refuses_are_refused_in_its_words(name, raw, message):
    with pytest.raises(Refused) as refused:
        parse(name, raw)
    assert str(refused.value) == message


def test_a_set_is_checked_names_first_then_in_kafkas_order_then_the_compaction_lags():
    assert problem({"retention.ms": "y", "no.such.config": "1"}) == "Unknown topic config name: no.such.config"
    assert problem({"retention.ms": "y", "segment.bytes": "x"}).startswith("Invalid value x for configuration "
                                                                           "segment.bytes")
    assert problem({"min.compaction.lag.ms": "100"}, {"max.compaction.lag.ms": 50}) == (
        "conflict topic config setting min.compaction.lag.ms (100) > max.compaction.lag.ms (50)")
    assert problem({"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "100"}) is None


def test_throttled_replicas_are_read_as_kafka_reads_the_list():
    assert throttled_replicas("*,") == "*"
    assert throttled_replicas(" 0:0 , 1:1 ") == frozenset({(0, 0), (1, 1)})
    assert throttled_replicas("0 : 1") is None and throttled_replicas("0:x") is None


def test_every_topic_config_has_its_place_in_kafkas_order():
    """DescribeConfigs lists a topic's configs as Kafka's hash map of them iterates, which for two names in one
    bucket depends on the order Kafka defines them in: a config added to kbroker must be given its place."""
    from kbroker.storage.log_config import DEFINED_ORDER, INTERNAL_CONFIGS, TOPIC_CONFIGS
    assert sorted(DEFINED_ORDER) == sorted(set(TOPIC_CONFIGS) - INTERNAL_CONFIGS)
