"""The options of the kbroker Spark data source, named and checked as Spark's own Kafka source and sink name them.

Every problem is a ``ValueError`` naming the option, raised on the driver
when the query is planned, so a job fails before any task runs.

Options that start with ``kafka.`` (other than the few read here) go to
librdkafka unchanged without the prefix, as Spark passes them to the Java
client: ``kafka.security.protocol``, ``kafka.sasl.mechanism`` ...
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

EARLIEST, LATEST = -2, -1
# Handled here, not passed to librdkafka.
_OWN_KAFKA_KEYS = {"kafka.bootstrap.servers", "kafka.isolation.level", "kafka.delivery",
                   "kafka.transaction.timeout.ms", "kafka.default.api.timeout.ms"}


def _lower(options) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


def _get(options: dict[str, str], name: str, default: str | None = None) -> str | None:
    return options.get(name.lower(), default)


def _int(options, name: str, default: int | None, minimum: int | None = None) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"option '{name}' must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"option '{name}' must be at least {minimum}, got {value}")
    return value


def _bool(options, name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.lower() not in ("true", "false"):
        raise ValueError(f"option '{name}' must be true or false, got {raw!r}")
    return raw.lower() == "true"


def _choice(options, name: str, choices: tuple[str, ...], default: str) -> str:
    """One of ``choices`` (case-insensitive)."""
    value = (_get(options, name) or default).lower()
    if value not in choices:
        raise ValueError(f"option '{name}' must be {' or '.join(choices)}, got {value!r}")
    return value


def client_config(options, original) -> dict[str, str]:
    """librdkafka settings: ``kafka.bootstrap.servers`` plus every other ``kafka.*`` option, prefix removed."""
    bootstrap = _get(options, "kafka.bootstrap.servers")
    if not bootstrap:
        raise ValueError("option 'kafka.bootstrap.servers' is required")
    config = {"bootstrap.servers": bootstrap}
    for key, value in dict(original).items():
        if key.lower().startswith("kafka.") and key.lower() not in _OWN_KAFKA_KEYS:
            config[key[len("kafka."):]] = str(value)
    return config


@dataclass(frozen=True)
class OffsetSpec:
    """Where reading starts or ends: EARLIEST/LATEST for every partition, per-partition offsets, or timestamps."""
    default: int = LATEST
    per_partition: dict = field(default_factory=dict)   # (topic, partition) -> offset, or timestamp ms
    by_timestamp: bool = False

    def for_partition(self, topic: str, partition: int) -> int:
        return self.per_partition.get((topic, partition), self.default)


def parse_offsets(name: str, raw: str | None, default: int) -> OffsetSpec:
    """``earliest`` | ``latest`` | Spark's JSON ``{"topic":{"0":23}}`` (-2 earliest, -1 latest)."""
    if raw is None:
        return OffsetSpec(default)
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(EARLIEST if text.lower() == "earliest" else LATEST)
    per = _parse_partition_json(name, text)
    for (topic, partition), offset in per.items():
        if offset < EARLIEST:
            raise ValueError(f"option '{name}': offset {offset} for {topic}-{partition} is not valid "
                             "(use -2 for earliest, -1 for latest, or an offset >= 0)")
    return OffsetSpec(default, per)


def _parse_partition_json(name: str, text: str) -> dict[tuple[str, int], int]:
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"option '{name}' is not valid JSON ({exc}): {text!r}; "
                         'expected earliest, latest or {"topic":{"0":offset}}') from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise ValueError(f"option '{name}' must be a JSON object of topics to objects of partitions, "
                         f'like {{"topic":{{"0":23}}}}; got {text!r}')
    out: dict[tuple[str, int], int] = {}
    for topic, partitions in parsed.items():
        for partition, value in partitions.items():
            try:
                out[(topic, int(partition))] = int(value)
            except (TypeError, ValueError):
                raise ValueError(f"option '{name}': partition {partition!r} of topic {topic!r} must map "
                                 f"an integer partition to an integer, got {value!r}") from None
    return out


@dataclass(frozen=True)
class Subscription:
    kind: str                       # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: re.Pattern | None = None
    assigned: tuple[tuple[str, int], ...] = ()


def parse_subscription(options) -> Subscription:
    given = [k for k in ("subscribe", "subscribePattern", "assign") if _get(options, k) is not None]
    if len(given) != 1:
        found = ", ".join(given) if given else "none"
        raise ValueError(f"exactly one of the options 'subscribe', 'subscribePattern', 'assign' must be set "
                         f"(found: {found})")
    kind = given[0]
    raw = _get(options, kind).strip()
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise ValueError("option 'subscribe' names no topic")
        return Subscription(kind, topics=topics)
    if kind == "subscribePattern":
        try:
            return Subscription(kind, pattern=re.compile(raw))
        except re.error as exc:
            raise ValueError(f"option 'subscribePattern' is not a valid pattern: {exc}") from None
    assigned = tuple(sorted(_parse_partition_json_lists(raw)))
    if not assigned:
        raise ValueError("option 'assign' names no partition")
    return Subscription(kind, assigned=assigned)


def _parse_partition_json_lists(text: str) -> list[tuple[str, int]]:
    try:
        parsed = json.loads(text)
        return [(topic, int(p)) for topic, partitions in parsed.items() for p in partitions]
    except (ValueError, TypeError, AttributeError):
        raise ValueError(f"option 'assign' must be JSON like {{\"topic\":[0,1]}}, got {text!r}") from None


@dataclass(frozen=True)
class SourceOptions:
    subscription: Subscription
    client: dict
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    read_committed: bool
    api_timeout_s: float
    poll_timeout_s: float
    # Spark's startingOffsetsByTimestampStrategy: a partition with no record that new fails the query
    # ("error", the default) or starts at its end ("latest").
    timestamp_miss_latest: bool = False

    @classmethod
    def parse(cls, original, *, streaming: bool) -> "SourceOptions":
        options = _lower(original)
        subscription = parse_subscription(options)
        isolation = _choice(options, "kafka.isolation.level", ("read_committed", "read_uncommitted"),
                            "read_uncommitted")
        starting = _starting(options, default=LATEST if streaming else EARLIEST)
        if streaming and _get(options, "endingOffsets") is not None:
            raise ValueError("option 'endingOffsets' is for batch queries only")
        ending = parse_offsets("endingOffsets", _get(options, "endingOffsets"), LATEST)
        strategy = _choice(options, "startingOffsetsByTimestampStrategy", ("error", "latest"), "error")
        if ending.default == EARLIEST or EARLIEST in ending.per_partition.values():
            raise ValueError("option 'endingOffsets' cannot be earliest (-2)")
        if not streaming and (starting.default == LATEST and not starting.per_partition
                              and not starting.by_timestamp):
            raise ValueError("option 'startingOffsets' cannot be latest for a batch query")
        return cls(subscription=subscription, client=client_config(options, original), starting=starting,
                   ending=ending,
                   max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger", None, minimum=1),
                   min_partitions=_int(options, "minPartitions", None, minimum=1),
                   fail_on_data_loss=_bool(options, "failOnDataLoss", True),
                   include_headers=_bool(options, "includeHeaders", False),
                   read_committed=isolation == "read_committed",
                   api_timeout_s=_int(options, "kafka.default.api.timeout.ms", 60000, minimum=1) / 1000,
                   poll_timeout_s=_int(options, "kafkaConsumer.pollTimeoutMs", 120000, minimum=1) / 1000,
                   timestamp_miss_latest=strategy == "latest")


def _starting(options, default: int) -> OffsetSpec:
    by_ts = _get(options, "startingOffsetsByTimestamp")
    single_ts = _get(options, "startingTimestamp")
    if by_ts is not None and single_ts is not None:
        raise ValueError("options 'startingOffsetsByTimestamp' and 'startingTimestamp' cannot both be set")
    if single_ts is not None:
        return OffsetSpec(_int(options, "startingTimestamp", 0, minimum=0), by_timestamp=True)
    if by_ts is not None:
        return OffsetSpec(LATEST, _parse_partition_json("startingOffsetsByTimestamp", by_ts), by_timestamp=True)
    return parse_offsets("startingOffsets", _get(options, "startingOffsets"), default)


@dataclass(frozen=True)
class SinkOptions:
    client: dict
    topic: str | None
    exactly_once: bool
    transaction_timeout_ms: int
    commit_topic: str

    @classmethod
    def parse(cls, original) -> "SinkOptions":
        options = _lower(original)
        delivery = _choice(options, "kafka.delivery", ("exactly-once", "at-least-once"), "exactly-once")
        return cls(client=client_config(options, original), topic=_get(options, "topic"),
                   exactly_once=delivery == "exactly-once",
                   transaction_timeout_ms=_int(options, "kafka.transaction.timeout.ms", 60000, minimum=1),
                   commit_topic=_get(options, "commitTopic") or "_kbroker_spark_commits")
