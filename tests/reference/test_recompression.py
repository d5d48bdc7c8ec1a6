"""A topic's compression.type and compression.<codec>.level (KIP-390) side by side: a batch sent with another
codec than the topic's is stored recompressed to it, every header field but the codec kept; one sent with the
topic's codec, or to a topic keeping the producer's, is stored as sent."""

from __future__ import annotations

import pytest

from kbroker.protocol.records import BatchHeader, build_batch, iter_records, split_batches
from tests.reference.differential import same
from tests.reference.test_produce_fetch import create, fetch, init_producer_id, produce

pytestmark = pytest.mark.reference

CASES = {   # case -> (topic configs, codec sent)
    "gzip to a zstd topic": ({"compression_type": "zstd", "compression_zstd_level": 7}, 1),
    "lz4 to an uncompressed topic": ({"compression_type": "uncompressed"}, 3),
    "uncompressed to a gzip topic": ({"compression_type": "gzip", "compression_gzip_level": 1}, 0),
    "snappy to an lz4 topic": ({"compression_type": "lz4", "compression_lz4_level": 12}, 2),
    "zstd to a zstd topic": ({"compression_type": "zstd"}, 4),
    "gzip to a topic keeping the producer's": ({}, 1),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_batch_is_stored_in_its_topics_codec(targets, topic, case):
    configs, codec = CASES[case]
    sent = build_batch([(f"k{i}".encode(), f"value {i} ".encode() * 20, [("h", b"x")]) for i in range(30)],
                       compression=codec, timestamp_ms=1_700_000_000_000)

    async def scenario(target):
        # (the batches are dated 2023, beyond the default 7-day retention that both brokers check every second
        # here: a check between the writes and the read would delete them, so the topic keeps them)
        await create(target, topic, retention_ms=-1, **configs)
        init = await init_producer_id(target)
        idempotent = build_batch([(b"k", b"v" * 100, [])] * 5, compression=codec, producer_id=init.producer_id,
                                 producer_epoch=init.producer_epoch, base_sequence=0,
                                 timestamp_ms=1_700_000_000_000)
        answers = [(p.error_code, p.base_offset) for p in
                   [await produce(target, topic, sent), await produce(target, topic, idempotent)]]
        error, partition = await fetch(target, topic, 0)
        stored = []
        for position, header in split_batches(partition.records):
            stored.append({
                "codec": header.compression, "count": header.records_count, "offsets": (header.base_offset,
                                                                                        header.last_offset_delta),
                "timestamps": (header.base_timestamp, header.max_timestamp),
                "producer": (header.producer_id >= 0, header.producer_epoch >= 0, header.base_sequence),
                "as sent": bytes(partition.records[position + 61:position + header.size]) == (
                    sent if header.producer_id < 0 else idempotent)[61:],
                "records": [(r.offset, r.timestamp, r.key, r.value, r.headers)
                            for r in iter_records(partition.records, position)]})
        return answers, error, stored
    await same(targets, scenario)


def test_the_scenarios_batches_are_what_they_say():
    """(A check of the scenario itself: the batch sent carries the codec each case names.)"""
    for _, codec in CASES.values():
        assert BatchHeader.parse(build_batch([(b"k", b"v", [])], compression=codec)).compression == codec


async def test_a_batch_too_large_once_recompressed_is_refused(targets, topic):
    """Kafka checks max.message.bytes again after recompressing: a batch of zeros, small in zstd, is too
    large stored uncompressed."""
    sent = build_batch([(None, bytes(1000), [])] * 100, compression=4)

    async def scenario(target):
        await create(target, topic, compression_type="uncompressed", max_message_bytes=20000)
        answer = await produce(target, topic, sent)
        error, partition = await fetch(target, topic, 0)
        return len(sent) < 20000, answer.error_code, error, partition.high_watermark
    await same(targets, scenario)
