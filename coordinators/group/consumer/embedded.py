"""A classic member's embedded consumer protocol, read and written where it meets a consumer group.

A classic consumer says what it subscribes to (and, from v1, what it owns) in its JoinGroup protocol
metadata, a ConsumerProtocolSubscription, and learns its partitions from SyncGroup's ConsumerProtocolAssignment.
A KIP-848 coordinator that serves classic members (online migration) reads the first and writes the second
itself, in the version the member speaks. As Kafka's ConsumerProtocol, a version above the highest known is
read as the highest (later fields are ignorable); a negative version or bytes that do not parse are
``MalformedProtocol``.
"""

from __future__ import annotations

import struct

from construct import ConstructError

from kbroker.protocol import schema
from kbroker.protocol.types import BufferReader

HIGHEST_VERSION = 3
_VERSION = struct.Struct(">h")


class MalformedProtocol(ValueError):
    pass


def version_of(metadata: bytes) -> int:
    """The embedded protocol's version (an int16 ahead of every version's fields)."""
    if len(metadata) < 2:
        raise MalformedProtocol("embedded consumer protocol too short")
    (version,) = _VERSION.unpack_from(metadata)
    if version < 0:
        raise MalformedProtocol(f"embedded consumer protocol version {version}")
    return version


def _read(name: str, data: bytes) -> schema.Message:
    data = bytes(data)
    version = min(version_of(data), HIGHEST_VERSION)
    try:
        return schema.decode(schema.data_struct(name, version), BufferReader(data, 2))
    except (ConstructError, UnicodeDecodeError, ValueError, IndexError, struct.error) as exc:
        raise MalformedProtocol(f"malformed {name}: {exc}") from exc


def subscription(metadata: bytes) -> schema.Message:
    """``topics``, ``owned_partitions`` (empty before v1), ``rack_id`` (None before v3)."""
    return _read("ConsumerProtocolSubscription", metadata)


def assignment(data: bytes) -> dict[str, frozenset[int]]:
    """Topic name -> partitions; no bytes at all is no assignment (a member that never synced)."""
    if not data:
        return {}
    read = _read("ConsumerProtocolAssignment", data)
    out: dict[str, frozenset[int]] = {}
    for tp in read.assigned_partitions:
        out[tp.topic] = out.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    return out


def assignment_bytes(partitions: dict[str, frozenset[int]], version: int) -> bytes:
    version = min(version, HIGHEST_VERSION)
    body, _ = schema.encode(schema.data_struct("ConsumerProtocolAssignment", version), {
        "assigned_partitions": [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(partitions.items())],
        "user_data": None})
    return _VERSION.pack(version) + body.getvalue()
