import pytest

from kbroker.protocol.records import (BatchHeader, InvalidBatch, build_batch, iter_records, patch_base_offset,
                              validate_produce_records, verify_crc)


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


@pytest.mark.parametrize("mutate,error", [
    (lambda b: b.__setitem__(-1, b[-1] ^ 1), "CORRUPT_MESSAGE"),
    (lambda b: b.__setitem__(16, 1), "UNSUPPORTED_FOR_MESSAGE_FORMAT"),
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
