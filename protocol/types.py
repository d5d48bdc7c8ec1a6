"""Kafka's primitive wire types as construct classes.

Every class here is a pure function of bytes: no I/O beyond the stream it is
handed. Streams are either ``io.BytesIO`` (building) or ``BufferReader``
(parsing a received frame without copying large fields).
"""

from __future__ import annotations

import base64
import os
import struct
from typing import Any

from construct import Construct, FormatField, StreamError, stream_read

__all__ = [
    "BufferReader", "FileRegion", "INT8", "INT16", "UINT16", "INT32", "UINT32", "INT64",
    "FLOAT64", "BOOL", "UUID", "KString", "KBytes", "KRecords",
    "KArray", "read_uvarint", "write_uvarint", "encode_uvarint", "encode_varint",
]

INT8 = FormatField(">", "b")
INT16 = FormatField(">", "h")
UINT16 = FormatField(">", "H")
INT32 = FormatField(">", "l")
UINT32 = FormatField(">", "L")
INT64 = FormatField(">", "q")
FLOAT64 = FormatField(">", "d")
_S_INT16 = struct.Struct(">h")
_S_INT32 = struct.Struct(">i")


class BufferReader:
    """A read-only stream over one received frame.

    ``view(n)`` hands out a zero-copy ``memoryview`` slice: record batches are
    read this way so that produce payloads are never copied while decoding.
    """

    __slots__ = ("_mv", "_pos", "_end")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self._mv = memoryview(data)
        self._pos = pos
        self._end = len(self._mv)

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            n = self._end - self._pos
        start = self._pos
        self._pos = min(start + n, self._end)
        return self._mv[start:self._pos].tobytes()

    def view(self, n: int) -> memoryview:
        start = self._pos
        if start + n > self._end:
            raise StreamError(f"wanted {n} bytes, only {self._end - start} left")
        self._pos = start + n
        return self._mv[start:self._pos]

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = 0) -> int:
        self._pos = pos if whence == 0 else (self._pos + pos if whence == 1 else self._end + pos)
        return self._pos

    def remaining(self) -> int:
        return self._end - self._pos


class Rows(list):
    """An array of structs given as tuples instead of dicts: each tuple holds the struct's fields in the order
    they are declared, the fields of every version included (one tuple serves any version; a field the
    version lacks is skipped, a None is written as the field's default unless it is nullable). For arrays of
    many small structs (a Metadata answer's partitions), which the generated encoder then writes without a
    dict and a lookup per field. Only the generated encoder (``protocol.codegen``) takes it."""

    __slots__ = ()


class Encoded(bytes):
    """One struct of an array of structs, already encoded for the message and version it goes into
    (``protocol.schema.element_encoder``): the generated encoder writes it as it is. For an answer whose
    elements change far less often than they are asked for (a Metadata answer's topics, each encoded once
    per change). Only the generated encoder (``protocol.codegen``) takes it."""

    __slots__ = ()


class FileRegion:
    """Bytes of a log file to be sent as they are: ``length`` bytes of ``file`` at ``position``.

    Building a message that holds a FileRegion writes only its length prefix and
    records where the region goes (``context._params.regions``); the connection
    then sends the file bytes itself, without copying them through Python where
    the platform allows.
    """

    __slots__ = ("file", "position", "length")

    def __init__(self, file: Any, position: int, length: int) -> None:
        self.file = file
        self.position = position
        self.length = length

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        return read_region(self.file, self.position, self.length)


def read_region(file: Any, position: int, length: int) -> bytes:
    return os.pread(file.fileno(), length, position)


def read_uvarint(stream) -> int:
    shift = result = 0
    while True:
        b = stream.read(1)
        if not b:
            raise StreamError("truncated varint")
        byte = b[0]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result
        shift += 7
        if shift > 63:
            raise StreamError("varint too long")


def encode_uvarint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zig-zag signed varint (64-bit), as used inside records."""
    return encode_uvarint((value << 1) ^ (value >> 63))


def write_uvarint(stream, value: int) -> None:
    stream.write(encode_uvarint(value))


class _Bool(Construct):
    def _parse(self, stream, context, path):
        return stream_read(stream, 1, path) != b"\x00"

    def _build(self, obj, stream, context, path):
        stream.write(b"\x01" if obj else b"\x00")
        return obj


class _Uuid(Construct):
    """16 raw bytes; the all-zero uuid is Kafka's 'no id'."""

    def _parse(self, stream, context, path):
        return stream_read(stream, 16, path)

    def _build(self, obj, stream, context, path):
        data = bytes(obj) if obj else bytes(16)
        if len(data) != 16:
            raise StreamError("uuid must be 16 bytes")
        stream.write(data)
        return obj


BOOL = _Bool()
UUID = _Uuid()


def _read_length(stream, compact: bool, wide: bool) -> int:
    """Length prefix: -1 means null. Compact lengths are stored plus one."""
    if compact:
        return read_uvarint(stream) - 1
    if wide:
        return _S_INT32.unpack(stream_read(stream, 4, "length"))[0]
    return _S_INT16.unpack(stream_read(stream, 2, "length"))[0]


def _write_length(stream, n: int, compact: bool, wide: bool) -> None:
    if compact:
        stream.write(encode_uvarint(n + 1))
    elif wide:
        stream.write(_S_INT32.pack(n))
    else:
        stream.write(_S_INT16.pack(n))


class _LengthPrefixed(Construct):
    """A nullable, length-prefixed value: STRING, BYTES and their COMPACT forms."""

    wide = False   # BYTES use an int32 length, STRING an int16 one

    def __init__(self, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.compact, self.nullable = compact, nullable

    def _decode(self, stream, n: int, path):
        raise NotImplementedError

    def _encode(self, obj):
        raise NotImplementedError

    def _parse(self, stream, context, path):
        n = _read_length(stream, self.compact, self.wide)
        if n < 0:
            if not self.nullable:
                raise StreamError(f"null in non-nullable {type(self).__name__} {path}")
            return None
        return self._decode(stream, n, path)

    def _build(self, obj, stream, context, path):
        if obj is None:
            if not self.nullable:
                raise StreamError(f"null in non-nullable {type(self).__name__} {path}")
            _write_length(stream, -1, self.compact, self.wide)
            return obj
        data = self._encode(obj)
        _write_length(stream, len(data), self.compact, self.wide)
        stream.write(data)
        return obj


class KString(_LengthPrefixed):
    """STRING / COMPACT_STRING, optionally NULLABLE."""

    def _decode(self, stream, n, path):
        return stream_read(stream, n, path).decode("utf-8")

    def _encode(self, obj):
        return obj.encode("utf-8")


class KBytes(_LengthPrefixed):
    """BYTES / COMPACT_BYTES, optionally NULLABLE; parses to a zero-copy view where it can."""

    wide = True

    def _decode(self, stream, n, path):
        if isinstance(stream, BufferReader):
            return stream.view(n)
        return stream_read(stream, n, path)

    def _encode(self, obj):
        return obj


class KRecords(KBytes):
    """RECORDS: like bytes, but a FileRegion is left for the connection to send."""

    def _build(self, obj, stream, context, path):
        if isinstance(obj, FileRegion):
            _write_length(stream, obj.length, self.compact, True)
            context._params.regions.append((stream.tell(), obj))
            return obj
        if isinstance(obj, list):  # several regions and byte chunks back to back
            _write_length(stream, sum(len(part) for part in obj), self.compact, True)
            for part in obj:
                if isinstance(part, FileRegion):
                    context._params.regions.append((stream.tell(), part))
                else:
                    stream.write(part)
            return obj
        return super()._build(obj, stream, context, path)


class KArray(Construct):
    """ARRAY / COMPACT_ARRAY of one element construct; -1 (compact: 0) is null."""

    def __init__(self, element: Construct, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.element, self.compact, self.nullable = element, compact, nullable

    def _parse(self, stream, context, path):
        n = _read_length(stream, self.compact, True)
        if n < 0:
            if not self.nullable:
                raise StreamError(f"null in non-nullable array {path}")
            return None
        if isinstance(stream, BufferReader) and n > stream.remaining():
            raise StreamError(f"array of {n} longer than the frame {path}")
        parse = self.element._parse
        return [parse(stream, context, path) for _ in range(n)]

    def _build(self, obj, stream, context, path):
        if obj is None:
            if not self.nullable:
                raise StreamError(f"null in non-nullable array {path}")
            _write_length(stream, -1, self.compact, True)
            return obj
        _write_length(stream, len(obj), self.compact, True)
        build = self.element._build
        for item in obj:
            build(item, stream, context, path)
        return obj


class KNullableStruct(Construct):
    """A struct that may be null: an int8 marker first, -1 for null, 1 before the struct's fields (Kafka's
    encoding of a struct field with nullableVersions)."""

    def __init__(self, struct: Construct) -> None:
        super().__init__()
        self.struct = struct

    def _parse(self, stream, context, path):
        marker = stream.read(1)
        if len(marker) < 1:
            raise StreamError(f"stream read less than specified amount, expected 1, found 0 {path}")
        if marker[0] >= 0x80:
            return None
        return self.struct._parse(stream, context, path)

    def _build(self, obj, stream, context, path):
        if obj is None:
            stream.write(b"\xff")
            return obj
        stream.write(b"\x01")
        self.struct._build(obj, stream, context, path)
        return obj


def uuid_to_str(raw: bytes) -> str:
    """Kafka prints a Uuid (a topic id, a member id it makes) as URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")


def uuid_from_str(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
