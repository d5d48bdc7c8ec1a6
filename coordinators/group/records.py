"""The records of __consumer_offsets, in Kafka's format.

A record's key is an int16 schema version followed by the key struct, and so
is its value; a null value is a tombstone (a deleted offset or group). The key
version tells the record kind: 0 and 1 are offset commits, 2 is classic group metadata, 3 and 5-8 are a
KIP-848 consumer group's epoch, member, target assignment epoch, target of a member and current assignment
of a member, 10-15 a share group's member, epoch, target assignment epoch, target of a member, current
assignment of a member and share partitions, 17 and 19-23 a streams group's epoch, member, target assignment
epoch, target of a member, current assignment of a member and topology.
Decoding accepts every version Kafka has written; encoding writes the
versions Kafka 3.x writes (offset commit v3 values, group metadata v3 values).
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

from kbroker.protocol import schema

_VERSION = struct.Struct(">h")
_VALUE_V3_HEAD = struct.Struct(">hqih")   # version, offset, leader epoch, metadata's length
_VALUE_V1_HEAD = struct.Struct(">hqh")    # version, offset, metadata's length
_INT64, _TWO_INT64 = struct.Struct(">q"), struct.Struct(">qq")
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class ConsumerGroupKey:
    """A KIP-848 record's key: ``kind`` is its key version (3, 5, 6, 7 or 8), ``member`` empty for 3 and 6."""
    kind: int
    group: str
    member: str = ""


@dataclass(frozen=True)
class ShareGroupKey:
    """A share group's record, by key version: a member (10), the group's epoch (11), the target assignment's
    epoch (12), a member's target (13), a member's current assignment (14), the share partitions (15)."""
    group: str
    kind: int = 11
    member: str = ""


@dataclass(frozen=True)
class StreamsGroupKey:
    """A streams group's record, by key version: the group's epoch (17), a member (19), the target assignment's
    epoch (20), a member's target (21), a member's current assignment (22), the topology (23)."""
    kind: int
    group: str
    member: str = ""


STREAMS_GROUP_RECORDS = {17: "StreamsGroupMetadata", 19: "StreamsGroupMemberMetadata",
                         20: "StreamsGroupTargetAssignmentMetadata", 21: "StreamsGroupTargetAssignmentMember",
                         22: "StreamsGroupCurrentMemberAssignment", 23: "StreamsGroupTopology"}
SHARE_GROUP_RECORDS = {10: "ShareGroupMemberMetadata", 11: "ShareGroupMetadata",
                       12: "ShareGroupTargetAssignmentMetadata", 13: "ShareGroupTargetAssignmentMember",
                       14: "ShareGroupCurrentMemberAssignment", 15: "ShareGroupStatePartitionMetadata"}
CONSUMER_GROUP_RECORDS = {3: "ConsumerGroupMetadata", 4: "ConsumerGroupPartitionMetadata",
                          5: "ConsumerGroupMemberMetadata", 6: "ConsumerGroupTargetAssignmentMetadata",
                          7: "ConsumerGroupTargetAssignmentMember", 8: "ConsumerGroupCurrentMemberAssignment"}


# Values kbroker 0.1 wrote in a layout of its own (protocol/messages/share_records.py), still read.
_EARLIER = {"ShareGroupMetadataValue": "ShareGroupMetadataValueKbroker01",
            "ShareGroupStatePartitionMetadataValue": "ShareGroupStatePartitionMetadataValueKbroker01"}


def _encode(name: str, version: int, obj: dict) -> bytes:
    return schema.encode_record(name, version, obj)


def _decode(name: str, data: bytes) -> tuple[int, schema.Message]:
    return schema.decode_record(name, data, _EARLIER.get(name))


@functools.lru_cache(maxsize=16384)
def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """(Cached: a group commits the same partitions again and again, each commit writing their keys.)"""
    return _encode("OffsetCommitKey", OFFSET_COMMIT_KEY_VERSION,
                   {"group": group, "topic": topic, "partition": partition})


def offset_commit_value(offset: int, leader_epoch: int, metadata: str, commit_timestamp: int,
                        expire_timestamp: int = -1) -> bytes:
    """Value v3, or v1 when the commit carries its own expiry (OffsetCommit v2-4 retention_time), as Kafka.

    Packed directly, not through the schema (a property test holds the two equal): every OffsetCommit writes
    one per partition, on the path of its answer."""
    meta = metadata.encode()
    if expire_timestamp >= 0:
        return _VALUE_V1_HEAD.pack(1, offset, len(meta)) + meta + _TWO_INT64.pack(commit_timestamp,
                                                                                   expire_timestamp)
    return (_VALUE_V3_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, offset, leader_epoch, len(meta)) + meta
            + _INT64.pack(commit_timestamp))


def group_metadata_key(group: str) -> bytes:
    return _encode("GroupMetadataKey", GROUP_METADATA_KEY_VERSION, {"group": group})


def group_metadata_value(value: dict) -> bytes:
    return _encode("GroupMetadataValue", GROUP_METADATA_VALUE_VERSION, value)


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    (version,) = _VERSION.unpack_from(data)
    if version in (0, 1):
        _, key = _decode("OffsetCommitKey", data)
        return OffsetKey(key.group, key.topic, key.partition)
    if version == GROUP_METADATA_KEY_VERSION:
        _, key = _decode("GroupMetadataKey", data)
        return GroupKey(key.group)
    if version in CONSUMER_GROUP_RECORDS and version != 4:
        _, key = _decode(CONSUMER_GROUP_RECORDS[version] + "Key", data)
        return ConsumerGroupKey(version, key.group_id, key.get("member_id", ""))
    if version in SHARE_GROUP_RECORDS:
        _, key = _decode(SHARE_GROUP_RECORDS[version] + "Key", data)
        return ShareGroupKey(key.group_id, version, key.get("member_id", ""))
    if version in STREAMS_GROUP_RECORDS:
        _, key = _decode(STREAMS_GROUP_RECORDS[version] + "Key", data)
        return StreamsGroupKey(version, key.group_id, key.get("member_id", ""))
    if version == 4:   # written by Kafka 4.0 only (KIP-1101 replaced it with a hash): nothing to restore
        return ConsumerGroupKey(4, data[4:4 + int.from_bytes(data[2:4], "big")].decode())
    raise ValueError(f"unknown __consumer_offsets key version {version}")


def consumer_group_key(kind: int, group: str, member: str = "") -> bytes:
    fields = {"group_id": group, "member_id": member} if kind in (5, 7, 8) else {"group_id": group}
    return _encode(CONSUMER_GROUP_RECORDS[kind] + "Key", kind, fields)


def consumer_group_value(kind: int, value: dict) -> bytes:
    return _encode(CONSUMER_GROUP_RECORDS[kind] + "Value", 0, value)


def streams_group_key(kind: int, group: str, member: str = "") -> bytes:
    fields = {"group_id": group, "member_id": member} if kind in (19, 21, 22) else {"group_id": group}
    return _encode(STREAMS_GROUP_RECORDS[kind] + "Key", kind, fields)


def streams_group_value(kind: int, value: dict) -> bytes:
    return _encode(STREAMS_GROUP_RECORDS[kind] + "Value", 0, value)


def share_group_key(group: str) -> bytes:
    return _encode("ShareGroupMetadataKey", 11, {"group_id": group})


def share_group_value(epoch: int, metadata_hash: int = 0) -> bytes:
    return _encode("ShareGroupMetadataValue", 0, {"epoch": epoch, "metadata_hash": metadata_hash})


def share_member_key(kind: int, group: str, member: str = "") -> bytes:
    """The key of a share group's member (10), target assignment epoch (12), target (13) or current
    assignment (14) record."""
    fields = {"group_id": group} if kind == 12 else {"group_id": group, "member_id": member}
    return _encode(SHARE_GROUP_RECORDS[kind] + "Key", kind, fields)


def share_member_value(kind: int, value: dict) -> bytes:
    return _encode(SHARE_GROUP_RECORDS[kind] + "Value", 0, value)


def share_partitions_key(group: str) -> bytes:
    return _encode("ShareGroupStatePartitionMetadataKey", 15, {"group_id": group})


def share_partitions_value(initialized: dict[bytes, tuple[str, frozenset[int]]],
                           initializing: dict[bytes, tuple] | None = None) -> bytes:
    """``initialized``: topic id -> (name, partitions); ``initializing``: topic id -> (name, partitions, ...)."""
    def topics(partitions):
        return [{"topic_id": t, "topic_name": name, "partitions": sorted(ps)}
                for t, (name, ps, *_) in sorted(partitions.items())]
    return _encode("ShareGroupStatePartitionMetadataValue", 0, {"initializing_topics": topics(initializing or {}),
                                                                "initialized_topics": topics(initialized),
                                                                "deleting_topics": []})


def decode_value(key, data: bytes | None) -> schema.Message | None:
    """The value's fields, or None for a tombstone."""
    if data is None:
        return None
    if isinstance(key, ShareGroupKey):
        return _decode(SHARE_GROUP_RECORDS[key.kind] + "Value", data)[1]
    if isinstance(key, StreamsGroupKey):
        return _decode(STREAMS_GROUP_RECORDS[key.kind] + "Value", data)[1]
    if isinstance(key, ConsumerGroupKey):
        return None if key.kind == 4 else _decode(CONSUMER_GROUP_RECORDS[key.kind] + "Value", data)[1]
    name = "OffsetCommitValue" if isinstance(key, OffsetKey) else "GroupMetadataValue"
    return _decode(name, data)[1]
