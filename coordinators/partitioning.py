"""Which partition of an internal topic coordinates a key: Kafka's ``Utils.abs(key.hashCode()) % partitions``.

Java's ``String.hashCode`` runs over UTF-16 code units with 32-bit
wraparound, and Kafka's ``Utils.abs`` maps Integer.MIN_VALUE to 0 (where
``Math.abs`` would stay negative). Both must match exactly: clients and other
brokers compute the same partition.
"""

from __future__ import annotations

from functools import lru_cache

INT32_MIN = -(1 << 31)


def java_string_hash(value: str) -> int:
    """``String.hashCode()``: h = 31 * h + unit, over UTF-16 code units, as a signed 32-bit int."""
    data = value.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    return 0 if n == INT32_MIN else abs(n)


@lru_cache(maxsize=65536)   # every group request asks; group ids repeat
def partition_for(key: str, partitions: int) -> int:
    """The internal-topic partition (and so the coordinator) for a group id or transactional id."""
    return kafka_abs(java_string_hash(key)) % partitions
