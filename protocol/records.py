"""RecordBatch v2 (magic 2): header access without decoding records.

Layout of the 61-byte header (offsets in bytes)::

    0 base_offset int64        12 partition_leader_epoch int32   16 magic int8
    8 batch_length int32       17 crc uint32 (CRC32C of bytes 21..end)
    21 attributes int16        23 last_offset_delta int32        27 base_timestamp int64
    35 max_timestamp int64     43 producer_id int64              51 producer_epoch int16
    53 base_sequence int32     57 records_count int32

``base_offset`` and ``partition_leader_epoch`` lie outside the CRC, so the
broker patches them in place without recomputing it. Records themselves are
decoded only where the broker truly needs them (control records, the CLI).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Iterable, Iterator

import crc32c
from construct import StreamError

from kbroker.protocol.inflate import CorruptBody, InflateLimit, inflate
from kbroker.protocol.types import encode_varint

HEADER_SIZE = 61
LOG_OVERHEAD = 12            # base_offset + batch_length: bytes before the length counts
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08    # 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

COMPRESSION = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
# What one batch may decompress to where no topic says otherwise (the broker derives a topic's bound from its
# max.message.bytes and kbroker.compression.max.ratio): far above any honest batch, far below a bomb's.
DEFAULT_MAX_INFLATED = 128 << 20


class InvalidBatch(Exception):
    """A batch that cannot be appended; ``error`` names the Kafka error code to answer. ``record_errors``:
    (index in the batch, why) of each record that alone is invalid (KIP-467), which a client fails while it
    retries the batch's other records. ``in_request``: the records are not one v2 batch at all, which Kafka
    refuses while it reads the request, before it looks at the partition."""

    def __init__(self, error: str, message: str, record_errors: tuple[tuple[int, str], ...] = (),
                 in_request: bool = False) -> None:
        super().__init__(message)
        self.error = error
        self.record_errors = record_errors
        self.in_request = in_request


@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, data, offset: int = 0) -> "BatchHeader":
        return cls(*_HEADER.unpack_from(data, offset))

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


def split_batches(data) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each complete batch in ``data``, stopping at the first torn one.

    Checks framing only (length and magic), not CRCs; callers that need the
    CRC call ``verify_crc``.
    """
    pos, end = 0, len(data)
    while end - pos >= HEADER_SIZE:
        _, length = _OFFSET_AND_LENGTH.unpack_from(data, pos)
        if length < HEADER_SIZE - LOG_OVERHEAD or pos + LOG_OVERHEAD + length > end:
            return
        if data[pos + MAGIC_OFFSET] != 2:
            return
        yield pos, BatchHeader.parse(data, pos)
        pos += LOG_OVERHEAD + length


def crc_of(data, position: int, size: int) -> int:
    return crc32c.crc32c(data[position + ATTRIBUTES_OFFSET:position + size])


def verify_crc(data, position: int, header: BatchHeader) -> bool:
    return crc_of(data, position, header.size) == header.crc


def validate_produce_records(records, max_message_bytes: int, allow_control: bool = False) -> BatchHeader:
    """Validate the records of one partition of a Produce request: exactly one v2 batch.

    Raises InvalidBatch with the Kafka error to answer. The batch bytes are
    not copied; the header is returned for the append path. Control batches
    (transaction markers), and batches whose base offset is not 0, are only
    accepted from the broker itself (``allow_control``), as Kafka checks a
    client's batch.
    """
    size = len(records)
    if size == 0:   # (Kafka: a Produce v3+ partition holds exactly one batch; none is an invalid record)
        raise InvalidBatch("INVALID_RECORD", "records of 0 bytes hold no batch", in_request=True)
    if size < LOG_OVERHEAD + 5:
        raise InvalidBatch("CORRUPT_MESSAGE", f"records of {size} bytes hold no batch")
    magic = records[MAGIC_OFFSET]
    if magic != 2:   # (INVALID_RECORD, as Kafka answers Produce v3+ carrying magic 0 or 1)
        raise InvalidBatch("INVALID_RECORD", f"record batch magic {magic}: only magic 2 is accepted", in_request=True)
    if size < HEADER_SIZE:
        raise InvalidBatch("CORRUPT_MESSAGE", "batch shorter than its header")
    header = BatchHeader.parse(records, 0)
    if header.size != size:
        if header.size < HEADER_SIZE or header.size > size:
            raise InvalidBatch("CORRUPT_MESSAGE", f"batch length {header.batch_length} does not fit {size} bytes")
        raise InvalidBatch("INVALID_RECORD", "a produce request carries exactly one batch per partition",
                           in_request=True)
    if header.base_offset != 0 and not allow_control:   # (the broker assigns offsets; a client's batch starts at 0)
        raise InvalidBatch("INVALID_RECORD", f"the baseOffset of the record batch should be 0, but it is "
                                             f"{header.base_offset}")
    if size > max_message_bytes:
        raise InvalidBatch("MESSAGE_TOO_LARGE", f"batch of {size} bytes exceeds message.max.bytes {max_message_bytes}")
    if crc_of(records, 0, size) != header.crc:
        raise InvalidBatch("CORRUPT_MESSAGE", "record batch CRC mismatch")
    if header.records_count <= 0 or header.last_offset_delta < 0:
        raise InvalidBatch("INVALID_RECORD", "batch has no records")
    if header.last_offset_delta + 1 != header.records_count and not allow_control:
        raise InvalidBatch("INVALID_RECORD", f"Inconsistent batch offset range [0, {header.last_offset_delta}] and "
                                             f"count of records {header.records_count}")
    if header.is_control and not allow_control:
        raise InvalidBatch("INVALID_RECORD", "clients may not produce control batches")
    return header


def patch_base_offset(buf: bytearray | memoryview, position: int, base_offset: int, leader_epoch: int) -> None:
    """Assign the batch its offsets: both fields lie outside the CRC."""
    _BASE_OFFSET.pack_into(buf, position, base_offset)
    _LEADER_EPOCH.pack_into(buf, position + 12, leader_epoch)


# ---------------------------------------------------------------- records inside a batch

@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _compressors() -> dict:
    """codec id -> compress(data, level), over cramjam (imported on first use); decompression is ``inflate``'s.
    A level of None is the codec's default (Kafka's: 6 for gzip, 9 for lz4, 3 for zstd); snappy has none."""
    import cramjam

    def lz4(data, level):
        # An LZ4 frame of independent blocks: Kafka's Java clients and brokers read no other kind ("Dependent
        # block stream is unsupported"), and cramjam.lz4.compress links its blocks.
        frame = cramjam.lz4.Compressor(level=9 if level is None else level, content_checksum=False,
                                       block_linked=False)
        frame.compress(data)
        return frame.finish()

    return {1: lambda data, level: cramjam.gzip.compress(data, level=6 if level is None else level),
            2: lambda data, level: cramjam.snappy.compress_raw(data),
            3: lz4,
            4: lambda data, level: cramjam.zstd.compress(data, level=3 if level is None else level)}


_COMPRESSORS: dict = {}


def decompress(codec: int, data: bytes, max_inflated: int = DEFAULT_MAX_INFLATED) -> bytes:
    """The body decompressed, streaming, to at most ``max_inflated`` bytes (``inflate.InflateLimit`` past it)."""
    return data if codec == 0 else inflate(codec, data, max_inflated)


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    if codec == 0:
        return data
    if not _COMPRESSORS:
        _COMPRESSORS.update(_compressors())
    if codec not in _COMPRESSORS:
        raise ValueError(f"unknown compression codec {codec}")
    return bytes(_COMPRESSORS[codec](data, level))


def recompress(records, header: BatchHeader, codec: int, level: int | None, max_inflated: int) -> bytes:
    """The batch at the start of ``records`` with its records compressed with ``codec`` instead (a topic's
    compression.type naming another codec than the producer's, as Kafka's broker recompresses). The records'
    bytes are kept as they are, and every header field but the codec, the length and the CRC: offsets,
    timestamps, producer id, epoch and sequence, the transactional bit. A body that does not decompress
    within ``max_inflated`` bytes is ``InvalidBatch("INVALID_RECORD")``."""
    body = bytes(records[HEADER_SIZE:header.size])
    try:
        body = compress(codec, decompress(header.compression, body, max_inflated), level)
    except (InflateLimit, CorruptBody) as exc:
        raise InvalidBatch("INVALID_RECORD", str(exc)) from None
    return _around(header, body, (header.attributes & ~COMPRESSION_MASK) | codec, header.records_count)


def iter_records(data, position: int = 0, max_inflated: int = DEFAULT_MAX_INFLATED) -> Iterator[Record]:
    """Decode every record of the batch at ``position`` (decompressing if needed, to at most ``max_inflated``
    bytes: past that, or for a body its codec cannot read, ``InvalidBatch("INVALID_RECORD")``)."""
    header = BatchHeader.parse(data, position)
    body = bytes(data[position + HEADER_SIZE:position + header.size])
    try:
        body = decompress(header.compression, body, max_inflated)
    except (InflateLimit, CorruptBody) as exc:
        raise InvalidBatch("INVALID_RECORD", str(exc)) from None
    # Over the bytes with an index, not through a stream reader (4-5x faster): the log cleaner and the
    # coordinators' loading decode every record this way. It reads what the stream reader reads, damage
    # included (a short key or value is cut, a broken varint raises StreamError): the unit tests compare the two.
    base_offset, base_timestamp = header.base_offset, header.base_timestamp
    pos = 0
    for _ in range(header.records_count):
        length, pos = zigzag_at(body, pos)
        start = pos
        ts_delta, pos = zigzag_at(body, pos + 1)   # (after the record attributes, unused)
        offset_delta, pos = zigzag_at(body, pos)
        key, pos = _nullable_at(body, pos)
        value, pos = _nullable_at(body, pos)
        headers = []
        count, pos = zigzag_at(body, pos)
        for _ in range(count):
            hkey, pos = _nullable_at(body, pos)
            hkey = (hkey or b"").decode()   # (before the value is read, as the stream reader did)
            hvalue, pos = _nullable_at(body, pos)
            headers.append((hkey, hvalue))
        pos = start + length
        yield Record(base_offset + offset_delta, base_timestamp + ts_delta, key, value, headers)


def _nullable_at(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    """The length-prefixed bytes at ``pos`` (None for a negative length; cut short at the end of ``buf``)."""
    n, pos = zigzag_at(buf, pos)
    if n < 0:
        return None, pos
    return buf[pos:pos + n], min(pos + n, len(buf))


def zigzag_at(buf: bytes, pos: int) -> tuple[int, int]:
    """The zigzag varint at ``pos`` and the position after it (one byte, the usual case, without a loop)."""
    if 0 <= pos < len(buf) - 1:
        byte = buf[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
        second = buf[pos + 1]
        if second < 0x80:   # two bytes: a length up to 8 KiB
            value = (byte & 0x7F) | (second << 7)
            return (value >> 1) ^ -(value & 1), pos + 2
    result = shift = 0
    while True:
        if pos >= len(buf) or pos < 0:
            raise StreamError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise StreamError("varint too long")


def _encode_nullable(data: bytes | None) -> bytes:
    if data is None:
        return encode_varint(-1)
    return encode_varint(len(data)) + data


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: Iterable[tuple[str, bytes | None]] = ()) -> bytes:
    headers = list(headers)
    body = bytearray(b"\x00")
    body += encode_varint(timestamp_delta) + encode_varint(offset_delta)
    body += _encode_nullable(key) + _encode_nullable(value)
    body += encode_varint(len(headers))
    for hkey, hvalue in headers:
        body += _encode_nullable(hkey.encode()) + _encode_nullable(hvalue)
    return encode_varint(len(body)) + bytes(body)


def build_batch(records: list[tuple[bytes | None, bytes | None, list]], *, base_offset: int = 0,
                timestamp_ms: int | None = None, compression: int = 0, producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False,
                control: bool = False, partition_leader_epoch: int = -1) -> bytes:
    """Encode a v2 batch of (key, value, headers) records, with its CRC."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    body = b"".join(encode_record(i, 0, k, v, h) for i, (k, v, h) in enumerate(records))
    body = compress(compression, body)
    attributes = compression | (TRANSACTIONAL_BIT if transactional else 0) | (CONTROL_BIT if control else 0)
    length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    header = bytearray(_HEADER.pack(base_offset, length, partition_leader_epoch, 2, 0, attributes,
                                    len(records) - 1, ts, ts, producer_id, producer_epoch,
                                    base_sequence, len(records)))
    batch = header + body
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


def rebuild_batch(header: BatchHeader, kept: list[Record]) -> bytes:
    """The batch ``header`` with only the ``kept`` records, for the log cleaner.

    Everything else stays: base offset, last offset delta (so the batch still
    ends where it did and producer state is unchanged), timestamps, producer
    id, epoch and base sequence, attributes and codec. Kept records keep their
    offset and timestamp deltas. An empty ``kept`` gives a header-only batch.
    """
    body = b"".join(encode_record(r.offset - header.base_offset, r.timestamp - header.base_timestamp,
                                  r.key, r.value, r.headers) for r in kept)
    if kept:
        body = compress(header.compression, body)
    return _around(header, body, header.attributes, len(kept))


def _around(header: BatchHeader, body: bytes, attributes: int, records_count: int) -> bytes:
    """A v2 batch of ``header``'s offsets, timestamps and producer fields around ``body`` (its records, compressed
    as ``attributes`` say), with its length and CRC made anew."""
    out = bytearray(_HEADER.pack(header.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body),
                                 header.partition_leader_epoch, 2, 0, attributes, header.last_offset_delta,
                                 header.base_timestamp, header.max_timestamp, header.producer_id,
                                 header.producer_epoch, header.base_sequence, records_count))
    out += body
    struct.pack_into(">I", out, CRC_OFFSET, crc32c.crc32c(bytes(out[ATTRIBUTES_OFFSET:])))
    return bytes(out)


CONTROL_ABORT, CONTROL_COMMIT = 0, 1
_CONTROL_KEY = struct.Struct(">hh")       # version, type
_MARKER_VALUE = struct.Struct(">hi")      # version, coordinator epoch (EndTransactionMarker v0)


def control_type(batch) -> int:
    """COMMIT or ABORT, from the key of a control batch's single record."""
    if len(batch) > HEADER_SIZE and batch[ATTRIBUTES_OFFSET + 1] & 0x07 == 0:
        # Uncompressed (every marker Kafka writes): the key is read in place, without decoding the record
        # (its length, attributes, timestamp delta, offset delta, key length, then the key); anything odd is
        # left to the full decoding below, and its errors.
        try:
            _, pos = zigzag_at(batch, HEADER_SIZE)
            _, pos = zigzag_at(batch, pos + 1)
            _, pos = zigzag_at(batch, pos)
            length, pos = zigzag_at(batch, pos)
        except StreamError:
            pass
        else:
            if length >= _CONTROL_KEY.size and pos + _CONTROL_KEY.size <= len(batch):
                return _CONTROL_KEY.unpack_from(batch, pos)[1]
    record = next(iter_records(batch))
    return _CONTROL_KEY.unpack_from(record.key)[1]


def marker_coordinator_epoch(batch) -> int:
    """The transaction coordinator's epoch that a marker (a control batch) carries in its record's value."""
    record = next(iter_records(batch))
    return _MARKER_VALUE.unpack_from(record.value)[1]


def build_marker_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                       timestamp_ms: int) -> bytes:
    """A transaction marker: a control batch of one record, as WriteTxnMarkers appends it."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    return build_batch([(key, value, [])], timestamp_ms=timestamp_ms, producer_id=producer_id,
                       producer_epoch=producer_epoch, transactional=True, control=True)
