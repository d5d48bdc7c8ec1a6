"""A batch's records checked as a stream, the way Kafka's validator reads a batch bound for a compacted topic.

``check_keyed_batch`` reads the records the batch header counts, one at a
time, through the decompressing stream of ``inflate.chunks``: each record's
length, its fields and its headers must account for exactly that length,
every record must have a key (compaction works by key), and nothing may follow
the last record. A value or a header is skipped, not held, so memory is one
decompressed piece however large the records claim to be, and a bomb is
refused after a few bytes of output (its first record does not add up) or,
for a well-formed one, once the output passes the bound.

Every failure is ``InvalidBatch("INVALID_RECORD", why)``; nothing is appended.

``check_timestamps`` holds a CreateTime batch's records within the topic's
``message.timestamp.before/after.max.ms`` of the broker's clock (KIP-937);
``check_no_log_append_time`` refuses a producer's batch that says its
timestamps are the log's to a LogAppendTime topic, as Kafka does.
"""

from __future__ import annotations

from construct import StreamError

from kbroker.protocol.inflate import CorruptBody, InflateLimit, chunks
from kbroker.protocol.records import (HEADER_SIZE, TIMESTAMP_TYPE_BIT, BatchHeader, InvalidBatch, iter_records,
                                      zigzag_at)


LONG_MAX = (1 << 63) - 1   # message.timestamp.before.max.ms unset: no lower bound


class RecordStream:
    """Decompressed bytes read in order without keeping what was read: varints, skips and short reads."""

    __slots__ = ("_pieces", "_buf", "_pos", "_before")

    def __init__(self, pieces) -> None:
        self._pieces = pieces
        self._buf = b""
        self._pos = 0
        self._before = 0   # bytes read before ``_buf``

    @property
    def position(self) -> int:
        return self._before + self._pos

    def _have(self, n: int) -> bool:
        """At least ``n`` unread bytes in the buffer, pulling pieces as needed; False if the stream ends first."""
        unread = len(self._buf) - self._pos
        if unread >= n:
            return True
        parts = [self._buf[self._pos:]] if unread else []
        while unread < n:
            piece = next(self._pieces, None)
            if piece is None:
                break
            parts.append(piece)
            unread += len(piece)
        self._before += self._pos
        self._buf, self._pos = b"".join(parts), 0
        return unread >= n

    def varint(self) -> int:
        if len(self._buf) - self._pos < 10:
            self._have(10)   # (fewer at the end of the stream: the decoder says if the varint is cut)
        value, self._pos = zigzag_at(self._buf, self._pos)
        return value

    def skip(self, n: int) -> None:
        if n < 0:
            raise StreamError(f"negative length {n}")
        while n > len(self._buf) - self._pos:
            n -= len(self._buf) - self._pos
            self._before += len(self._buf)
            piece = next(self._pieces, None)
            if piece is None:
                raise StreamError("the records end before their declared sizes")
            self._buf, self._pos = piece, 0
        self._pos += n

    def at_end(self) -> bool:
        return not self._have(1)


def check_keyed_batch(data, position: int, header: BatchHeader, max_inflated: int) -> None:
    """Check every record of the batch at ``position`` (its CRC already checked) as described above."""
    body = memoryview(data)[position + HEADER_SIZE:position + header.size]
    stream = RecordStream(chunks(header.compression, body, max_inflated))
    keyless = []
    try:
        for n in range(header.records_count):
            length = stream.varint()
            start = stream.position
            stream.skip(1)           # attributes
            stream.varint()          # timestamp delta
            stream.varint()          # offset delta
            key_length = stream.varint()
            if key_length < 0:
                keyless.append(n)
            stream.skip(max(key_length, 0))
            value_length = stream.varint()
            if value_length >= 0:
                stream.skip(value_length)
            headers = stream.varint()
            if headers < 0:
                raise StreamError(f"record {n} has {headers} headers")
            for _ in range(headers):
                name_length = stream.varint()
                if name_length < 0:
                    raise StreamError(f"record {n} has a header without a name")
                stream.skip(name_length)
                header_value = stream.varint()
                if header_value >= 0:
                    stream.skip(header_value)
            if stream.position - start != length:
                raise StreamError(f"record {n} declares {length} bytes but holds {stream.position - start}")
        if not stream.at_end():
            raise StreamError(f"data after the {header.records_count} records the batch counts")
    except InflateLimit as exc:
        raise InvalidBatch("INVALID_RECORD", str(exc)) from None
    except (StreamError, CorruptBody) as exc:
        raise InvalidBatch("INVALID_RECORD", f"invalid record structure: {exc}") from None
    if keyless:   # (each keyless record fails alone, as Kafka's per-record errors say: the rest may be retried)
        shown = f"{keyless[:3]}{'...' if len(keyless) > 3 else ''}"
        raise InvalidBatch("INVALID_RECORD", f"One or more records have been rejected due to {len(keyless)} record "
                           f"errors in total: {NO_KEY} (batch indexes {shown})", tuple((n, NO_KEY) for n in keyless))


NO_KEY = "Compacted topic cannot accept message without key"   # (Kafka adds "in topic partition <tp>")


def check_timestamps(data, header: BatchHeader, now_ms: int, before_ms: int, after_ms: int,
                     max_inflated: int) -> None:
    """INVALID_TIMESTAMP, naming each record whose timestamp lies outside [now - before, now + after], as
    Kafka's per-record errors do. The header's max timestamp bounds every record from above, so with the
    default ``before`` (unbounded) a batch is decided without reading a record; a bounded ``before`` reads
    the records, since a record's timestamp delta may be negative (the header gives no minimum)."""
    low, high = now_ms - before_ms, now_ms + after_ms
    if header.max_timestamp <= high and before_ms == LONG_MAX:
        return
    bad = [(n, record.timestamp) for n, record in enumerate(iter_records(data, 0, max_inflated))
           if not low <= record.timestamp <= high]
    if bad:
        raise InvalidBatch("INVALID_TIMESTAMP", f"One or more records have been rejected due to {len(bad)} record "
                           f"errors in total: timestamps out of [{low}, {high}]",
                           tuple((n, f"Timestamp {ts} of message with offset {n} is out of range. The timestamp "
                                     f"should be within [{low}, {high}]") for n, ts in bad))


def check_no_log_append_time(data, header: BatchHeader, max_inflated: int) -> None:
    """INVALID_TIMESTAMP, naming every record as Kafka's validator prints it, for a producer's batch with the
    LogAppendTime bit bound for a LogAppendTime topic (Kafka's validator: the producer may not set that type; a
    CreateTime topic takes the batch, and reads its timestamps as the batch's maximum)."""
    if header.attributes & TIMESTAMP_TYPE_BIT:
        why = "Producer should not set timestamp type to LogAppendTime."
        raise InvalidBatch("INVALID_TIMESTAMP", f"One or more records have been rejected due to "
                           f"{header.records_count} record errors in total: {why}", tuple(
                               (n, f"Invalid timestamp type in message DefaultRecord(offset={r.offset}, timestamp="
                                   f"{header.max_timestamp}, key={len(r.key or b'')} bytes, value="
                                   f"{len(r.value or b'')} bytes). {why}")
                               for n, r in enumerate(iter_records(data, 0, max_inflated))))
