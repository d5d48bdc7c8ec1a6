"""The records of ``__share_group_state``: one snapshot of a share partition's state per key, as Kafka writes
it (ShareSnapshotKey v0 / ShareSnapshotValue v0); a tombstone deletes the state."""

from __future__ import annotations

import struct

from kbroker.protocol import schema
from kbroker.protocol.types import BufferReader

_VERSION = struct.Struct(">h")


def _encode(name: str, version: int, obj: dict) -> bytes:
    out, _ = schema.encode(schema.data_struct(name, version), obj)
    return _VERSION.pack(version) + out.getvalue()


def _decode(name: str, data: bytes) -> schema.Message:
    (version,) = _VERSION.unpack_from(data)
    return schema.decode(schema.data_struct(name, version), BufferReader(data, 2))


def snapshot_key(group: str, topic_id: bytes, partition: int) -> bytes:
    return _encode("ShareSnapshotKey", 0, {"group_id": group, "topic_id": topic_id, "partition": partition})


def snapshot_value(snapshot_epoch: int, state_epoch: int, leader_epoch: int, start_offset: int,
                   batches: list[tuple[int, int, int, int]]) -> bytes:
    return _encode("ShareSnapshotValue", 0, {
        "snapshot_epoch": snapshot_epoch & 0xFFFF, "state_epoch": state_epoch, "leader_epoch": leader_epoch,
        "start_offset": start_offset, "state_batches": [
            {"first_offset": f, "last_offset": l, "delivery_state": s, "delivery_count": c}
            for f, l, s, c in batches]})


def decode_key(data: bytes) -> tuple[str, bytes, int]:
    key = _decode("ShareSnapshotKey", data)
    return key.group_id, bytes(key.topic_id), key.partition


def decode_value(data: bytes) -> schema.Message:
    return _decode("ShareSnapshotValue", data)
