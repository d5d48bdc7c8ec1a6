"""The order in which Kafka's Java code meets the keys of a small hash map, where that order decides which of
several faults an answer names (the first config that fails a check) or how an answer is ordered.

Invariant: ``hash_order`` lists keys as a java.util.HashMap made with ``capacity`` iterates them once they are
put in: by bucket (the spread String.hashCode modulo the table size, which doubles past three quarters full),
then in insertion order within one. A ConcurrentHashMap of the default size orders alike below its resize.
"""

from __future__ import annotations


def string_hash(text: str) -> int:
    """java.lang.String.hashCode: over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    units = text.encode("utf-16-le")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "little")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def table_size(keys: int, capacity: int = 16) -> int:
    """The buckets of a HashMap made with ``capacity`` once ``keys`` distinct keys are in it."""
    size = 1
    while size < capacity:
        size *= 2
    for count in range(1, keys + 1):
        if count > int(size * 0.75):
            size *= 2
    return size


def spread(h: int) -> int:
    """HashMap's spread of a hash (its high half folded into the low)."""
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def hash_order(keys, capacity: int = 16, hash_of=string_hash, computed: bool = False) -> list:
    """``keys`` (in insertion order; repeats keep their first place) as a Java HashMap made with ``capacity``
    iterates them, each hashed by ``hash_of`` (Java's hashCode of the key; strings' by default). ``computed``:
    the map was filled by computeIfAbsent, which puts a new key at the head of its bucket, not the tail, and
    grows the table before an insertion once past three quarters full, not after (so one key later)."""
    keys = list(dict.fromkeys(keys))
    buckets = table_size(max(len(keys) - 1, 0) if computed else len(keys), capacity)
    place = {k: (-i if computed else i) for i, k in enumerate(keys)}
    return sorted(keys, key=lambda k: (spread(hash_of(k)) & (buckets - 1), place[k]))


_TIMELINE_MULTIPLIER = -7046029254386353131 & (1 << 64) - 1


def timeline_table_length(most: int) -> int:
    """The slots of a Kafka TimelineHashMap made empty that once held ``most`` entries and was written again
    then: from two slots, it doubles before any put (a replacement too) that would leave it past three
    quarters full counting one more entry, and never shrinks."""
    length = 2
    while most and (most + 1) * 0.75 > length:
        length *= 2
    return length


def timeline_order(keys, length: int) -> list:
    """``keys`` (strings, in insertion order) as Kafka's TimelineHashMap of ``length`` slots iterates them: by
    slot, the top bits of the hash times a 64-bit constant, and within a slot from the last inserted back."""
    bits = length.bit_length() - 1
    keys = list(dict.fromkeys(keys))
    place = {k: i for i, k in enumerate(keys)}

    def slot(key: str) -> int:
        return ((string_hash(key) * _TIMELINE_MULTIPLIER) & (1 << 64) - 1) >> (64 - bits)
    return sorted(keys, key=lambda k: (slot(k), -place[k]))
