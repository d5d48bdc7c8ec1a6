"""Bounded streaming decompression (protocol.inflate) and the streaming record check of compacted topics
(protocol.record_check): honest batches of every codec pass as the records they hold, bombs stop at the bound
having produced at most a piece past it, and every way a batch's records can fail to add up is INVALID_RECORD."""

import struct
import zlib

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbroker.protocol.inflate import CHUNK_BYTES, CorruptBody, InflateLimit, chunks, inflate
from kbroker.protocol.record_check import check_keyed_batch
from kbroker.protocol.records import (ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, LOG_OVERHEAD, BatchHeader,
                                      InvalidBatch, build_batch, compress, encode_record)
from tests.hostile import bomb_batch

CODECS = [0, 1, 2, 3, 4]


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(CODECS[1:]), st.binary(max_size=300_000))
def test_every_codec_streams_back_what_was_compressed(codec, data):
    packed = compress(codec, data)
    pieces = list(chunks(codec, packed, len(data)))
    assert b"".join(pieces) == data
    assert codec == 2 or all(len(p) <= CHUNK_BYTES for p in pieces)   # (snappy: a block at a time)
    assert inflate(codec, packed, len(data)) == data


@pytest.mark.parametrize("codec", CODECS[1:])
def test_a_bomb_stops_at_the_bound(codec):
    # (raw snappy declares its length up front: refused before anything is decompressed)
    packed = compress(codec, bytes(8 << 20) if codec != 2 else bytes(4 << 20))
    produced = 0
    with pytest.raises(InflateLimit):
        for piece in chunks(codec, packed, 1 << 20):
            produced += len(piece)
    assert produced <= 1 << 20


@pytest.mark.parametrize("codec", CODECS[1:])
def test_a_whole_body_past_the_bound_is_refused_and_within_it_comes_back(codec):
    """``inflate`` (the cleaner's and the loaders' whole bodies; gzip through a bounded buffer of its own)."""
    packed = compress(codec, bytes(4 << 20))
    with pytest.raises(InflateLimit):
        inflate(codec, packed, 1 << 20)
    assert inflate(codec, packed, 4 << 20) == bytes(4 << 20)


@pytest.mark.parametrize("codec", CODECS[1:])
def test_garbage_is_a_corrupt_body_not_a_crash(codec):
    """Broken input raises CorruptBody, or (a zstd frame cut short, which its reader ends quietly) comes out
    short, which the record check then refuses as records that end before their count."""
    good = compress(codec, b"x" * 10_000)
    for broken in (good[:len(good) // 2], b"\xff" * 64, good[:5] + b"\0" * 40):
        try:
            out = b"".join(chunks(codec, broken, 1 << 20))
        except (CorruptBody, InflateLimit):
            continue
        assert len(out) < 10_000


def gzipped(data: bytes) -> bytes:
    stream = zlib.compressobj(wbits=31)
    return stream.compress(data) + stream.flush()


def test_gzip_members_are_read_one_after_another():
    assert inflate(1, gzipped(b"first ") + gzipped(b"second"), 100) == b"first second"


def batch_of(body: bytes, count: int, codec: int = 0) -> bytes:
    """A v2 batch around a records section as given (not re-encoded), its CRC right."""
    packed = compress(codec, body)
    header = bytearray(struct.pack(">qiibIhiqqqhii", 0, HEADER_SIZE - LOG_OVERHEAD + len(packed), -1, 2, 0, codec,
                                   count - 1, 0, 0, -1, -1, -1, count))
    batch = header + packed
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


def check(batch: bytes, bound: int = 1 << 30) -> None:
    check_keyed_batch(batch, 0, BatchHeader.parse(batch), bound)


@pytest.mark.parametrize("codec", CODECS)
def test_honest_keyed_batches_pass(codec):
    check(build_batch([(b"k%d" % i, b"v" * i, [("h", b"1"), ("g", None)]) for i in range(300)], compression=codec))
    check(build_batch([(b"k", None, [])], compression=codec))   # a tombstone


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("body,count,why", [
    (encode_record(0, 0, None, b"v", []), 1, "without key"),
    (encode_record(0, 0, b"k", b"v", []) + b"\0", 1, "after the 1 records"),
    (encode_record(0, 0, b"k", b"v", []), 2, "truncated"),                     # fewer than counted
    (b"\x12" + encode_record(0, 0, b"k", b"v", [])[1:], 1, "declares"),       # a length that lies
    (bytes(1000), 1, "declares"),                                             # zeros
    (encode_record(0, 0, b"k", b"v", [])[:-3], 1, "structure"),              # cut short
])
def test_records_that_do_not_add_up_are_invalid_record(codec, body, count, why):
    with pytest.raises(InvalidBatch) as raised:
        check(batch_of(body, count, codec))
    assert raised.value.error == "INVALID_RECORD" and why in str(raised.value)


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_a_well_formed_bomb_is_refused_at_the_bound_and_zeros_at_once(codec):
    with pytest.raises(InvalidBatch, match="decompresses to more than"):
        check(bomb_batch(codec, 64 << 20, True), bound=8 << 20)
    with pytest.raises(InvalidBatch, match="declares"):
        check(bomb_batch(codec, 64 << 20, False), bound=8 << 20)
    check(bomb_batch(codec, 4 << 20, True), bound=8 << 20)   # within the bound: a big record, and valid
