"""KIP-937's timestamp bounds (protocol.record_check.check_timestamps): a CreateTime record whose timestamp
lies outside [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms] refuses its batch
with INVALID_TIMESTAMP naming that record's index; records out of order within a batch are each checked."""

import struct

import crc32c
import pytest

from kbroker.protocol.record_check import LONG_MAX, check_timestamps
from kbroker.protocol.records import (ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, LOG_OVERHEAD, BatchHeader,
                                      InvalidBatch, compress, encode_record)

NOW, HOUR = 1_700_000_000_000, 3_600_000


def batch_at(base: int, deltas: list[int], codec: int = 0) -> bytes:
    """A v2 batch whose records sit at base + delta, the header's max timestamp the largest of them."""
    body = compress(codec, b"".join(encode_record(n, d, b"k", b"v", []) for n, d in enumerate(deltas)))
    count = len(deltas)
    header = bytearray(struct.pack(">qiibIhiqqqhii", 0, HEADER_SIZE - LOG_OVERHEAD + len(body), -1, 2, 0, codec,
                                   count - 1, base, base + max(deltas), -1, -1, -1, count))
    batch = header + body
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


def check(batch: bytes, before: int = LONG_MAX, after: int = HOUR) -> None:
    check_timestamps(batch, BatchHeader.parse(batch), NOW, before, after, 1 << 30)


@pytest.mark.parametrize("codec", [0, 1])
def test_records_within_the_bounds_pass(codec):
    check(batch_at(NOW - 59_000, [0, 1000, 60_000], codec), before=60_000)
    check(batch_at(0, [0, 5]))                                   # no lower bound by default
    check(batch_at(NOW + HOUR, [0]))                             # the bound itself is inside


@pytest.mark.parametrize("codec", [0, 1])
def test_a_record_too_far_ahead_is_named(codec):
    with pytest.raises(InvalidBatch) as raised:
        check(batch_at(NOW, [0, HOUR + 1, 5], codec))
    assert raised.value.error == "INVALID_TIMESTAMP"
    assert [n for n, _ in raised.value.record_errors] == [1]


@pytest.mark.parametrize("codec", [0, 1])
def test_a_record_older_than_the_first_is_checked_too(codec):
    """The header's base timestamp is the first record's, not the smallest: a negative delta can reach below
    the bound, so a bounded ``before`` reads every record."""
    with pytest.raises(InvalidBatch) as raised:
        check(batch_at(NOW, [0, -61_000, -1000, -70_000], codec), before=60_000)
    assert raised.value.error == "INVALID_TIMESTAMP"
    assert [n for n, _ in raised.value.record_errors] == [1, 3]
    assert "out of range" in raised.value.record_errors[0][1]
