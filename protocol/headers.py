"""Request headers v1-v2 and response headers v0-v1.

Which header a message uses follows from its API version: flexible versions use
request header v2 / response header v1 (tagged fields), others v1 / v0. The
one quirk: ApiVersions responses always use header v0, so that a client whose
request version the broker cannot parse can still read the answer (KIP-511).
The client id is a plain (never compact) nullable string in every version.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from construct import StreamError

from kbroker.protocol import types as t

API_VERSIONS_KEY = 18
_HEAD = struct.Struct(">hhi")
_HEAD_AND_ID_LENGTH = struct.Struct(">hhih")   # the fixed part, then the client id's int16 length
_CORRELATION = struct.Struct(">i")


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a frame, without touching the rest."""
    if len(frame) < _HEAD.size:
        raise StreamError("frame shorter than a request header")
    return _HEAD.unpack_from(frame, 0)


def decode_request_header(reader: t.BufferReader, flexible: bool) -> RequestHeader:
    """The header, by one ``struct`` call for its fixed part (every request pays for it, so no construct)."""
    head = reader.read(_HEAD_AND_ID_LENGTH.size)
    if len(head) < _HEAD_AND_ID_LENGTH.size:
        raise StreamError("frame shorter than a request header")
    api_key, api_version, correlation_id, n = _HEAD_AND_ID_LENGTH.unpack(head)
    client_id = None
    if n >= 0:   # any negative length is a null client id
        raw = reader.read(n)
        if len(raw) < n:
            raise StreamError(f"client_id: wanted {n} bytes, only {len(raw)} left")
        client_id = raw.decode("utf-8")
    if flexible:
        skip_tagged_fields(reader)
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def skip_tagged_fields(reader) -> None:
    for _ in range(t.read_uvarint(reader)):
        t.read_uvarint(reader)
        reader.read(t.read_uvarint(reader))


def encode_request_header(header: RequestHeader, flexible: bool) -> bytes:
    out = bytearray(_HEAD.pack(header.api_key, header.api_version, header.correlation_id))
    if header.client_id is None:
        out += b"\xff\xff"
    else:
        data = header.client_id.encode()
        out += struct.pack(">h", len(data)) + data
    if flexible:
        out += b"\x00"
    return bytes(out)


def response_header(correlation_id: int, api_key: int, flexible: bool) -> bytes:
    """Response header bytes: v1 (with empty tagged fields) for flexible versions, except ApiVersions."""
    if flexible and api_key != API_VERSIONS_KEY:
        return _CORRELATION.pack(correlation_id) + b"\x00"
    return _CORRELATION.pack(correlation_id)


def decode_response_header(reader: t.BufferReader, api_key: int, flexible: bool) -> int:
    (correlation_id,) = _CORRELATION.unpack(reader.read(4))
    if flexible and api_key != API_VERSIONS_KEY:
        skip_tagged_fields(reader)
    return correlation_id
