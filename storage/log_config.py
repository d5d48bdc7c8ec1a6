"""Per-topic log settings, with Kafka's topic-level names and their broker-level defaults."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from kbroker.storage.config_values import Refused, java_double, parse

# topic config name -> (LogConfig attribute, parser)
TOPIC_CONFIGS = {
    "segment.bytes": ("segment_bytes", int),
    "segment.ms": ("segment_ms", int),
    "segment.index.bytes": ("segment_index_bytes", int),
    "index.interval.bytes": ("index_interval_bytes", int),
    "retention.ms": ("retention_ms", int),
    "retention.bytes": ("retention_bytes", int),
    "flush.messages": ("flush_messages", int),
    "flush.ms": ("flush_ms", int),
    "max.message.bytes": ("max_message_bytes", int),
    "cleanup.policy": ("cleanup_policy", str),
    "message.timestamp.type": ("message_timestamp_type", str),
    # KIP-937: how far before and after the broker's clock a CreateTime record's timestamp may be.
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", int),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", int),
    "min.insync.replicas": ("min_insync_replicas", int),
    "delete.retention.ms": ("delete_retention_ms", int),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", float),
    "file.delete.delay.ms": ("file_delete_delay_ms", int),
    "compression.type": ("compression_type", str),
    # KIP-390: the level a batch is recompressed at when compression.type names a codec other than its own
    "compression.gzip.level": ("compression_gzip_level", int),
    "compression.lz4.level": ("compression_lz4_level", int),
    "compression.zstd.level": ("compression_zstd_level", int),
    # segment.ms less a random part of this, drawn per segment, so that partitions made together do not
    # all roll at once
    "segment.jitter.ms": ("segment_jitter_ms", int),
    # Kafka's hint to preallocate segment files; accepted and described, without effect here
    # (docs/COMPATIBILITY.md)
    "preallocate": ("preallocate", lambda v: str(v).lower() == "true"),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", lambda v: str(v).lower() == "true"),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", int),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", int),
    # Replication throttles (``partition:broker,...`` or ``*``): the replicas whose replication traffic
    # counts against the brokers' leader/follower.replication.throttled.rate; no broker-level default.
    "leader.replication.throttled.replicas": ("leader_replication_throttled_replicas", str),
    "follower.replication.throttled.replicas": ("follower_replication_throttled_replicas", str),
    # Deprecated in Kafka 3.x and without effect here (record batches are v2 only, fetches are never
    # down-converted), but accepted and described: clients written for 3.x still set them.
    "message.format.version": ("message_format_version", str),
    "message.downconversion.enable": ("message_downconversion_enable", lambda v: str(v).lower() == "true"),
    # Kafka 4's testing-only segment size (defineInternal: no minimum, never described), which wins over
    # segment.bytes: a test rolls segments of a few KiB where segment.bytes may not go below 1 MiB.
    "internal.segment.bytes": ("segment_bytes", int),
}
INTERNAL_CONFIGS = frozenset({"internal.segment.bytes"})
# The order Kafka 4.2's LogConfig defines its topic configs in (where two names share a hash bucket, the order
# Kafka's hash maps of them keep); kbroker's own names after them.
DEFINED_ORDER = (
    "segment.bytes", "segment.ms", "segment.jitter.ms", "segment.index.bytes", "flush.messages", "flush.ms",
    "retention.bytes", "retention.ms", "max.message.bytes", "index.interval.bytes", "delete.retention.ms",
    "min.compaction.lag.ms", "max.compaction.lag.ms", "file.delete.delay.ms", "min.cleanable.dirty.ratio",
    "cleanup.policy", "unclean.leader.election.enable", "min.insync.replicas", "compression.type",
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level", "preallocate",
    "message.timestamp.type", "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
    "leader.replication.throttled.replicas", "follower.replication.throttled.replicas", "message.format.version",
    "message.downconversion.enable")

# topic config name -> broker config name that supplies its default
BROKER_SYNONYMS = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "max.message.bytes": "message.max.bytes",
    "cleanup.policy": "log.cleanup.policy",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "min.insync.replicas": "min.insync.replicas",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "preallocate": "log.preallocate",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "message.format.version": "log.message.format.version",
    "message.downconversion.enable": "log.message.downconversion.enable",
}

LONG_MAX = (1 << 63) - 1
CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}   # compression.type -> batch codec


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    cleanup_policy: str = "delete"
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = (1 << 63) - 1
    message_timestamp_after_max_ms: int = 3600000      # (Kafka 4's default: an hour ahead at most)
    min_insync_replicas: int = 1
    delete_retention_ms: int = 86400000
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60000
    compression_type: str = "producer"
    compression_gzip_level: int = -1     # (zlib's default, 6)
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    segment_jitter_ms: int = 0
    preallocate: bool = False
    unclean_leader_election_enable: bool = False
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    message_format_version: str = "3.0-IV1"
    message_downconversion_enable: bool = True
    # Not a topic config: the broker's kbroker.compression.max.ratio, which with max.message.bytes bounds
    # what one batch may decompress to (max_inflated_bytes).
    compression_max_ratio: int = 100

    @property
    def max_inflated_bytes(self) -> int:
        """What one batch of this topic may decompress to: past it the batch is refused (produce) or left as
        it is (the cleaner), never inflated further."""
        return self.max_message_bytes * self.compression_max_ratio

    @property
    def target_codec(self) -> int | None:
        """The codec every batch is stored with (compression.type), or None to keep the producer's."""
        return CODECS.get(self.compression_type)

    def compression_level(self, codec: int) -> int | None:
        """The level ``codec`` compresses at for this topic (None: the codec's own default)."""
        levels = {1: self.compression_gzip_level, 3: self.compression_lz4_level, 4: self.compression_zstd_level}
        level = levels.get(codec)
        return None if level == -1 else level

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    def with_overrides(self, overrides: dict[str, str]) -> "LogConfig":
        """This config with topic-level overrides applied; raises ValueError on a bad value or name."""
        changes = {}
        for name, value in overrides.items():
            if name not in TOPIC_CONFIGS:
                raise ValueError(f"unknown topic config {name}")
            attr, parse = TOPIC_CONFIGS[name]
            if name not in INTERNAL_CONFIGS and attr in changes and INTERNAL_CONFIGS & overrides.keys():
                continue   # (internal.segment.bytes wins over segment.bytes, whatever the order)
            changes[attr] = parse(value)
        return replace(self, **changes)

    def value_of(self, name: str) -> str:
        value = getattr(self, TOPIC_CONFIGS[name][0])
        if isinstance(value, float):
            return java_double(value)
        return str(value).lower() if isinstance(value, bool) else str(value)


def validate_topic_config(name: str, value: str | None) -> str | None:
    """An error message for an invalid (name, value), in Kafka's words, else None (storage/config_values.py)."""
    if name not in TOPIC_CONFIGS:
        return f"Unknown topic config name: {name}"
    if value is None:
        return None
    try:
        parse(name, value)
    except Refused as exc:
        return str(exc)
    return None


def throttled_replicas(text: str) -> frozenset[tuple[int, int]] | str | None:
    """A ``*.replication.throttled.replicas`` value: ``"*"`` (every replica), the set of (partition, broker)
    it lists, or None if it is malformed. Read as Kafka reads the list: items split at commas and trimmed,
    empty ones skipped, and items that join to ``*`` mean every replica."""
    items = [item.strip() for item in text.split(",")]
    if "".join(items) == "*":
        return "*"
    out = set()
    for item in filter(None, items):
        if not re.fullmatch(r"[0-9]+:[0-9]+", item):
            return None
        partition, _, broker = item.partition(":")
        out.add((int(partition), int(broker)))
    return frozenset(out)
