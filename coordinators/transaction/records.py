"""The records of ``__transaction_state``: key and value, each after an int16 version, as Kafka writes them."""

from __future__ import annotations

import struct

from kbroker.protocol import schema
from kbroker.protocol.types import BufferReader

_VERSION = struct.Struct(">h")
KEY_VERSION = 0
VALUE_VERSION = 0


def key(transactional_id: str) -> bytes:
    out, _ = schema.encode(schema.data_struct("TransactionLogKey", KEY_VERSION), {"transactional_id": transactional_id})
    return _VERSION.pack(KEY_VERSION) + out.getvalue()


def value(fields: dict) -> bytes:
    out, _ = schema.encode(schema.data_struct("TransactionLogValue", VALUE_VERSION), fields)
    return _VERSION.pack(VALUE_VERSION) + out.getvalue()


def decode_key(data: bytes) -> str:
    (version,) = _VERSION.unpack_from(data)
    return schema.decode(schema.data_struct("TransactionLogKey", version), BufferReader(data, 2)).transactional_id


def decode_value(data: bytes | None):
    if data is None:
        return None
    (version,) = _VERSION.unpack_from(data)
    return schema.decode(schema.data_struct("TransactionLogValue", version), BufferReader(data, 2))
