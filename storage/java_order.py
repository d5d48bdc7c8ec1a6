"""The order in which Kafka's Java code meets the keys of a small hash map, where that order decides which of
several faults an answer names (the first config that fails a check).

Invariant: for at most 12 keys (a java.util.HashMap or ConcurrentHashMap of the default 16 buckets, below its
resize), ``hash_order`` lists keys as Java iterates them: by bucket, then in insertion order within one.
"""

from __future__ import annotations


def string_hash(text: str) -> int:
    """java.lang.String.hashCode: over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    units = text.encode("utf-16-le")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "little")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _bucket(key: str, buckets: int = 16) -> int:
    h = string_hash(key) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (buckets - 1)


def hash_order(keys) -> list:
    """``keys`` (distinct, in insertion order) as a Java hash map of 16 buckets iterates them."""
    keys = list(keys)
    return sorted(keys, key=lambda k: (_bucket(k), keys.index(k)))
