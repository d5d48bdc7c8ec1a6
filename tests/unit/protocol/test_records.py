import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.protocol.records import (CONTROL_ABORT, CONTROL_COMMIT, HEADER_SIZE, BatchHeader, InvalidBatch,
                                      build_batch, build_marker_batch, control_type, iter_records,
                                      compress, patch_base_offset, recompress, validate_produce_records,
                                      verify_crc)


def test_patching_the_base_offset_keeps_the_crc_valid():
    batch = bytearray(build_batch([(b"k", b"v", [("h", b"1")])] * 3))
    patch_base_offset(batch, 0, 1234, 7)
    header = BatchHeader.parse(batch)
    assert (header.base_offset, header.partition_leader_epoch, header.last_offset) == (1234, 7, 1236)
    assert verify_crc(batch, 0, header)
    assert [r.offset for r in iter_records(batch)] == [1234, 1235, 1236]


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_decode(codec):
    batch = build_batch([(None, b"value-%d" % i, []) for i in range(100)], compression=codec)
    assert [r.value for r in iter_records(batch)] == [b"value-%d" % i for i in range(100)]


def test_lz4_frames_have_independent_blocks_as_kafkas_java_reader_requires():
    frame = compress(3, b"abc" * 100_000)   # several 64 KiB blocks
    assert frame[:4] == b"\x04\x22\x4d\x18"   # the LZ4 frame magic
    flags = frame[4]
    assert flags >> 6 == 1 and flags & 0x20 and not flags & 0x03   # version 1, independent blocks, no reserved bits


@pytest.mark.parametrize("source, target", [(0, 4), (1, 0), (2, 3), (3, 1), (4, 2)])
def test_recompressing_changes_the_codec_and_keeps_everything_else(source, target):
    batch = build_batch([(b"k%d" % i, b"v" * i, [("h", b"%d" % i)]) for i in range(50)], compression=source,
                        producer_id=7, producer_epoch=2, base_sequence=40, transactional=True, base_offset=0,
                        timestamp_ms=1_700_000_000_000)
    before = BatchHeader.parse(batch)
    again = recompress(batch, before, target, None, 1 << 20)
    after = BatchHeader.parse(again)
    assert after.compression == target and after.size == len(again) and verify_crc(again, 0, after)
    keep = ("base_offset", "partition_leader_epoch", "last_offset_delta", "base_timestamp", "max_timestamp",
            "producer_id", "producer_epoch", "base_sequence", "records_count", "is_transactional")
    assert [getattr(after, f) for f in keep] == [getattr(before, f) for f in keep]
    assert [(r.key, r.value, r.headers) for r in iter_records(again)] == \
        [(r.key, r.value, r.headers) for r in iter_records(batch)]
    if source:
        with pytest.raises(InvalidBatch):   # past what the batch may decompress to
            recompress(batch, before, target, None, 100)


@pytest.mark.parametrize("mutate,error", [
    (lambda b: b.__setitem__(-1, b[-1] ^ 1), "CORRUPT_MESSAGE"),
    (lambda b: b.__setitem__(16, 1), "INVALID_RECORD"),
    (lambda b: b.extend(b[:]), "INVALID_RECORD"),
    (lambda b: b.__delitem__(slice(40, None)), "CORRUPT_MESSAGE"),
])
def test_invalid_batches_name_their_kafka_error(mutate, error):
    batch = bytearray(build_batch([(b"k", b"v", [])]))
    mutate(batch)
    with pytest.raises(InvalidBatch) as exc:
        validate_produce_records(memoryview(batch), 1 << 20)
    assert exc.value.error == error


def test_message_max_bytes():
    batch = build_batch([(None, b"x" * 2000, [])])
    with pytest.raises(InvalidBatch) as exc:
        validate_produce_records(memoryview(batch), 1000)
    assert exc.value.error == "MESSAGE_TOO_LARGE"


def test_xerial_framed_snappy_from_java_clients_decodes():
    import struct

    import cramjam

    from kbroker.protocol.records import decompress

    payload = b"record bytes " * 500
    blocks = [payload[:3000], payload[3000:]]
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for block in blocks:
        raw = bytes(cramjam.snappy.compress_raw(block))
        framed += struct.pack(">i", len(raw)) + raw
    assert decompress(2, framed) == payload


# ---------------------------------------------------------------- record decoding against a stream reference

def _stream_records(batch: bytes):
    """The records of a batch read through the protocol's stream reader, one varint byte at a time: the
    reference that ``iter_records`` (indexing the bytes directly, for speed) must agree with."""
    from construct import StreamError

    from kbroker.protocol.types import BufferReader, read_uvarint

    def varint(reader):
        v = read_uvarint(reader)
        return (v >> 1) ^ -(v & 1)

    def nullable(reader):
        n = varint(reader)
        return None if n < 0 else reader.read(n)

    header = BatchHeader.parse(batch)
    reader = BufferReader(bytes(batch[61:header.size]))
    for _ in range(header.records_count):
        if reader.tell() < 0:   # a damaged length pointed before the body: not Python's index from the end
            raise StreamError("truncated varint")
        length = varint(reader)
        start = reader.tell()
        reader.read(1)
        ts_delta, offset_delta = varint(reader), varint(reader)
        key, value = nullable(reader), nullable(reader)
        headers = [((nullable(reader) or b"").decode(), nullable(reader)) for _ in range(varint(reader))]
        reader.seek(start + length)
        yield (header.base_offset + offset_delta, header.base_timestamp + ts_delta, key, value, headers)


def _outcome(records):
    try:
        return [tuple(r) if isinstance(r, tuple) else (r.offset, r.timestamp, r.key, r.value, r.headers)
                for r in records]
    except Exception as exc:   # the same kind of failure from both, or it is a difference
        return type(exc).__name__


_bytes_or_none = st.none() | st.binary(max_size=20) | st.binary(min_size=127, max_size=20_000)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_bytes_or_none, _bytes_or_none,
                          st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=200)), max_size=3)),
                min_size=1, max_size=30))
def test_records_decode_as_they_were_built(records):
    batch = build_batch(records, timestamp_ms=1_000)
    decoded = [(r.key, r.value, r.headers) for r in iter_records(batch)]
    assert decoded == [(k, v, list(h)) for k, v, h in records]
    assert _outcome(iter_records(batch)) == _outcome(_stream_records(batch))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_records_decode_as_the_stream_reader_does(data):
    """CRC aside (checked elsewhere), a damaged body gives the same records or the same kind of error."""
    records = data.draw(st.lists(st.tuples(_bytes_or_none, _bytes_or_none,
                                           st.lists(st.tuples(st.just("h"), st.binary(max_size=3)), max_size=2)),
                                 min_size=1, max_size=6))
    batch = bytearray(build_batch(records, timestamp_ms=1_000))
    for _ in range(data.draw(st.integers(1, 4))):
        batch[data.draw(st.integers(61, len(batch) - 1))] = data.draw(st.integers(0, 255))
    assert _outcome(iter_records(batch)) == _outcome(_stream_records(batch))


@settings(max_examples=300, deadline=None)
@given(commit=st.booleans(), producer_id=st.integers(0, 2**62), epoch=st.integers(0, 32766),
       coordinator_epoch=st.integers(-1, 2**31 - 1), timestamp=st.integers(0, 2**45), codec=st.sampled_from([0, 1, 4]),
       key_padding=st.binary(max_size=300))
def test_control_type_reads_the_marker_key_as_the_record_decoding_does(commit, producer_id, epoch, coordinator_epoch,
                                                                      timestamp, codec, key_padding):
    """The in-place read of an uncompressed marker's key (with any record-field widths: long keys make a
    two-byte length) gives what decoding the record gives; a compressed marker goes through the decoding."""
    key = struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT) + key_padding
    value = struct.pack(">hi", 0, coordinator_epoch)
    batch = build_batch([(key, value, [])], timestamp_ms=timestamp, producer_id=producer_id, producer_epoch=epoch,
                        transactional=True, control=True, compression=codec)
    decoded = struct.unpack_from(">hh", next(iter_records(batch)).key)[1]
    assert control_type(batch) == control_type(memoryview(batch)) == decoded
    if not key_padding:
        assert control_type(build_marker_batch(producer_id, epoch, commit, coordinator_epoch, timestamp)) == decoded


def test_control_type_of_a_marker_cut_short_fails_as_the_decoding_does():
    batch = build_marker_batch(1, 0, True, 0, 1)
    for cut in (HEADER_SIZE + 1, HEADER_SIZE + 3, HEADER_SIZE + 6):
        with pytest.raises(Exception) as fast:
            control_type(batch[:cut])
        with pytest.raises(Exception) as full:
            struct.unpack_from(">hh", next(iter_records(batch[:cut])).key)
        assert type(fast.value) is type(full.value)
