"""The records of ``__share_group_state``: one snapshot of a share partition's state per key, as Kafka 4.2
writes it (ShareSnapshotKey v0 / ShareSnapshotValue v0, which ``kafka-dump-log --share-group-state-decoder``
reads); a tombstone deletes the state. kbroker writes a whole snapshot at every change, so it writes no
ShareUpdate records (key version 1), and each snapshot's create and write timestamps are the same."""

from __future__ import annotations

import time

from kbroker.protocol import schema


def snapshot_key(group: str, topic_id: bytes, partition: int) -> bytes:
    return schema.encode_record("ShareSnapshotKey", 0, {"group_id": group, "topic_id": topic_id,
                                                        "partition": partition})


def snapshot_value(snapshot_epoch: int, state_epoch: int, leader_epoch: int, start_offset: int,
                   batches: list[tuple[int, int, int, int]], delivery_complete_count: int = -1) -> bytes:
    now = int(time.time() * 1000)
    return schema.encode_record("ShareSnapshotValue", 0, {
        "snapshot_epoch": snapshot_epoch, "state_epoch": state_epoch, "leader_epoch": leader_epoch,
        "start_offset": start_offset, "delivery_complete_count": delivery_complete_count,
        "create_timestamp": now, "write_timestamp": now, "state_batches": [
            {"first_offset": f, "last_offset": l, "delivery_state": s, "delivery_count": c}
            for f, l, s, c in batches]})


def decode_key(data: bytes) -> tuple[str, bytes, int]:
    key = schema.decode_record("ShareSnapshotKey", data)[1]
    return key.group_id, bytes(key.topic_id), key.partition


def decode_value(data: bytes) -> schema.Message:
    return schema.decode_record("ShareSnapshotValue", data, earlier="ShareSnapshotValueKbroker01")[1]
