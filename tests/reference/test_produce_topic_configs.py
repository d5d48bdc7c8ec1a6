"""What a topic's configs and a batch's producer fields make of a Produce, side by side: min.insync.replicas above
the replicas a partition has, at each acks; LogAppendTime stamping the batch, and refusing a producer's batch
that claims that type; a transactional batch in a
request naming no transactional id; an idempotent batch of a producer id the broker never gave.

(A batch whose records count does not match its records is left out: Kafka reads every record and refuses it,
kbroker keeps batches opaque on the produce path; docs/COMPATIBILITY.md.)"""

from __future__ import annotations

import struct

import crc32c
import pytest

from kbroker.protocol.records import ATTRIBUTES_OFFSET, CRC_OFFSET, TIMESTAMP_TYPE_BIT, BatchHeader, build_batch
from tests.reference.differential import same
from tests.reference.test_produce_fetch import create, fetch, init_producer_id, produce, records

pytestmark = pytest.mark.reference


CASES = ["min.insync.replicas 2 at acks all", "min.insync.replicas 2 at acks 1", "LogAppendTime",
         "LogAppendTime, the producer's batch saying so", "a transactional batch outside a transaction",
         "an idempotent batch of an unknown producer"]


@pytest.mark.parametrize("case", CASES)
async def test_a_produce_against_the_topics_configs(targets, topic, case):
    async def scenario(target):
        configs = {"min_insync_replicas": 2} if "min.insync" in case else \
            {"message_timestamp_type": "LogAppendTime"} if case.startswith("LogAppendTime") else {}
        # (the batch is dated 2023, beyond the default 7-day retention that both brokers check every second here:
        # a check between the write and the read would delete it, so the topic keeps it)
        await create(target, topic, retention_ms=-1, **configs)
        batch, acks = build_batch(records(3), timestamp_ms=1_700_000_000_000), -1
        if case.endswith("acks 1"):
            acks = 1
        elif case == "a transactional batch outside a transaction":
            init = await init_producer_id(target)
            batch = build_batch(records(3), producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                                base_sequence=0, transactional=True)
        elif case == "LogAppendTime, the producer's batch saying so":   # (refused: the type is the broker's to set)
            batch = bytearray(batch)
            batch[ATTRIBUTES_OFFSET + 1] |= TIMESTAMP_TYPE_BIT
            struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
            batch = bytes(batch)
        elif case == "an idempotent batch of an unknown producer":
            batch = build_batch(records(3), producer_id=987654, producer_epoch=0, base_sequence=0)
        answer = await produce(target, topic, batch, acks=acks)
        error, fetched = await fetch(target, topic, 0)
        stored = [(h.base_offset, h.records_count, h.attributes & 0x08, h.max_timestamp == 1_700_000_000_000)
                  for h in (BatchHeader.parse(bytes(fetched.records or b"")),)] if fetched.records else []
        return (answer.error_code, answer.base_offset, answer.log_append_time_ms > 0, fetched.high_watermark,
                stored, [e.batch_index for e in answer.record_errors or []])
    await same(targets, scenario)
