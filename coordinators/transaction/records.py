"""The records of ``__transaction_state``: key and value, each after an int16 version, as Kafka writes them."""

from __future__ import annotations

import functools
import struct

from kbroker.protocol import schema

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_NULL_ARRAY = _INT32.pack(-1)
_VALUE_HEAD = struct.Struct(">hqhib")   # version, producer id, epoch, timeout, status
_VALUE_TAIL = struct.Struct(">qq")      # last update, start
KEY_VERSION = 0
VALUE_VERSION = 0


@functools.lru_cache(maxsize=4096)
def key(transactional_id: str) -> bytes:
    """(Cached: every state change of a transactional id writes its key again.)"""
    return schema.encode_record("TransactionLogKey", KEY_VERSION, {"transactional_id": transactional_id})


def value(fields: dict) -> bytes:
    """TransactionLogValue: v0, as the schema encodes it (a unit test holds the two equal) but packed directly
    (a transaction writes three of these, on the path of AddPartitionsToTxn's and EndTxn's answers); v1, with
    its tagged fields, where a transaction of version 2 (KIP-890) needs them: the client's transaction
    version, and the producer ids before and after an epoch that ran out."""
    if fields.get("client_transaction_version", 0) >= 2 or fields.get("next_producer_id", -1) >= 0 \
            or fields.get("previous_producer_id", -1) >= 0:
        return schema.encode_record("TransactionLogValue", 1, {"previous_producer_id": -1, "next_producer_id": -1,
                                                               "client_transaction_version": 0, **fields})
    partitions = fields["transaction_partitions"]
    parts = [_VALUE_HEAD.pack(VALUE_VERSION, fields["producer_id"], fields["producer_epoch"],
                              fields["transaction_timeout_ms"], fields["transaction_status"])]
    if partitions is None:
        parts.append(_NULL_ARRAY)
    else:
        parts.append(_INT32.pack(len(partitions)))
        for entry in partitions:
            topic, ids = entry["topic"].encode(), entry["partition_ids"]
            parts += [_INT16.pack(len(topic)), topic, struct.pack(f">i{len(ids)}i", len(ids), *ids)]
    parts.append(_VALUE_TAIL.pack(fields["transaction_last_update_timestamp_ms"],
                                  fields["transaction_start_timestamp_ms"]))
    return b"".join(parts)


def decode_key(data: bytes) -> str:
    return schema.decode_record("TransactionLogKey", data)[1].transactional_id


def decode_value(data: bytes | None):
    if data is None:
        return None
    return schema.decode_record("TransactionLogValue", data)[1]
