"""Produce at its edges, as raw frames side by side: two batches for one partition, a partition or topic named twice,
odd base offsets and timestamps, a last offset delta that disagrees with the count, an idempotent producer
retrying an older batch and wrapping its sequence, and what each leaves in the log."""

from __future__ import annotations

import re
import struct
import time

import crc32c
import pytest

from kbroker.protocol.records import ATTRIBUTES_OFFSET, CRC_OFFSET, build_batch
from tests.reference.differential import call, same
from tests.reference.test_produce_fetch import create, init_producer_id, list_offset, produced, records

pytestmark = pytest.mark.reference

PRODUCE = 0
LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + 2   # (a batch header's attributes, then its last offset delta)
INT_MAX = 0x7FFFFFFF


def _partition(records_, index=0) -> dict:
    return {"index": index, "records": records_}


async def _produce(target, topic_data, acks=-1):
    answer = await call(target, PRODUCE, 9, {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
                                             "topic_data": topic_data})
    return sorted(((t.name, [(p.index, _without_numbers(produced(p))) for p in t.partition_responses])
                   for t in answer.responses), key=lambda t: t[0])


def _without_numbers(answer: dict) -> dict:
    """A record error's message names timestamps of the moment: its words are compared, not its numbers."""
    for error in answer["record_errors"]:
        message = error.get("batch_index_error_message")
        if message:
            error["batch_index_error_message"] = re.sub(r"-?[0-9]+", "N", message)
    return answer


SHAPES = {
    "two batches for one partition": lambda topic: [{"name": topic, "partition_data": [
        _partition(build_batch(records(1)) + build_batch(records(1)))]}],
    "a partition named twice": lambda topic: [{"name": topic, "partition_data": [
        _partition(build_batch(records(1))), _partition(build_batch(records(2)))]}],
    "a topic named twice": lambda topic: [{"name": topic, "partition_data": [_partition(build_batch(records(1)))]},
                                          {"name": topic, "partition_data": [_partition(build_batch(records(2)))]}],
    "a base offset other than 0": lambda topic: [{"name": topic, "partition_data": [
        _partition(build_batch(records(2), base_offset=1000))]}],
    "a timestamp an hour ahead": lambda topic: [{"name": topic, "partition_data": [
        _partition(build_batch(records(1), timestamp_ms=int(time.time() * 1000) + 7_200_000))]}],
    "timestamp -1": lambda topic: [{"name": topic, "partition_data": [
        _partition(build_batch(records(1), timestamp_ms=-1))]}],
    "a negative partition": lambda topic: [{"name": topic, "partition_data": [
        _partition(build_batch(records(1)), index=-1)]}],
    "no partitions": lambda topic: [{"name": topic, "partition_data": []}],
    "a leader epoch in the batch": lambda topic: [{"name": topic, "partition_data": [
        _partition(build_batch(records(1), partition_leader_epoch=77))]}],
    "a last offset delta that is not the count's": lambda topic: [{"name": topic, "partition_data": [
        _partition(_last_offset_delta(build_batch(records(3)), 4))]}],
    "a batch whose CRC is wrong": lambda topic: [{"name": topic, "partition_data": [
        _partition(_crc_broken(build_batch(records(2))))]}],
    "a batch past max.message.bytes": lambda topic: [{"name": topic, "partition_data": [
        _partition(build_batch([(b"k", b"x" * 1_100_000, [])]))]}],
}


def _crc_broken(batch: bytes) -> bytes:
    out = bytearray(batch)
    out[CRC_OFFSET] ^= 0xFF
    return bytes(out)


def _last_offset_delta(batch: bytes, delta: int) -> bytes:
    """``batch`` claiming another last offset delta than its records count, its CRC made anew."""
    out = bytearray(batch)
    struct.pack_into(">i", out, LAST_OFFSET_DELTA_OFFSET, delta)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c.crc32c(bytes(out[ATTRIBUTES_OFFSET:])))
    return bytes(out)


REFUSED_ONE_BY_ONE = {   # case -> (topic configs, the records' batch)
    "records without keys, to a compacted topic": (
        {"cleanup_policy": "compact"}, lambda: build_batch([(None, b"a", []), (b"k", b"b", []), (None, b"c", []),
                                                            (None, b"d", []), (None, b"e", [])])),
    "a producer's LogAppendTime batch": (
        {"message_timestamp_type": "LogAppendTime"}, lambda: _log_append_time(build_batch(
            [(b"k", b"v" * 5, []), (None, b"w", [])], timestamp_ms=1_700_000_000_000))),
}


def _log_append_time(batch: bytes) -> bytes:
    """``batch`` with its timestamp type LogAppendTime, as only a broker may set it, its CRC made anew."""
    out = bytearray(batch)
    struct.pack_into(">h", out, ATTRIBUTES_OFFSET, struct.unpack_from(">h", out, ATTRIBUTES_OFFSET)[0] | 0x08)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c.crc32c(bytes(out[ATTRIBUTES_OFFSET:])))
    return bytes(out)


@pytest.mark.parametrize("case", list(REFUSED_ONE_BY_ONE))
async def test_records_refused_one_by_one_are_told_in_kafkas_words(targets, topic, case):
    """Where Kafka's validator refuses records one by one, the partition's message sums them up in its words
    (the first three, for INVALID_RECORD) and each record's names it as Kafka prints it; elsewhere a refused
    partition carries no message."""
    configs, batch = REFUSED_ONE_BY_ONE[case]

    async def scenario(target):
        await create(target, topic, **configs)
        return await _produce(target, [{"name": topic, "partition_data": [_partition(batch())]}])
    await same(targets, scenario)


@pytest.mark.parametrize("case", list(SHAPES))
async def test_a_produce_of_an_odd_shape(targets, topic, case):
    async def scenario(target):
        await create(target, topic)
        answered = await _produce(target, SHAPES[case](topic))
        return {"answered": answered, "log end": await list_offset(target, topic, -1)}
    await same(targets, scenario)


async def test_an_idempotent_retry_of_an_older_batch_and_a_wrapping_sequence(targets, topic):
    async def scenario(target):
        await create(target, topic)
        init = await init_producer_id(target)

        async def send(seq, n=1):
            batch = build_batch(records(n), producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                                base_sequence=seq)
            p = (await _produce(target, [{"name": topic, "partition_data": [_partition(batch)]}]))[0][1][0][1]
            return p["error_code"], p["base_offset"]
        seen = {"batches": [await send(seq) for seq in range(7)]}
        seen["retry of the last"] = await send(6)
        seen["retry of the fourth from last"] = await send(3)
        seen["retry of the sixth from last"] = await send(1)
        seen["next"] = await send(7)
        wrap = await init_producer_id(target)

        async def wrapped(seq, n):
            batch = build_batch(records(n), producer_id=wrap.producer_id, producer_epoch=wrap.producer_epoch,
                                base_sequence=seq)
            p = (await _produce(target, [{"name": topic, "partition_data": [_partition(batch)]}]))[0][1][0][1]
            return p["error_code"]
        seen["a new producer starting near the top"] = await wrapped(INT_MAX - 1, 1)
        seen["at int max, two records (wrap within the batch)"] = await wrapped(INT_MAX, 2)
        seen["after the wrap"] = await wrapped(1, 1)
        seen["log end"] = await list_offset(target, topic, -1)
        return seen
    await same(targets, scenario)


async def test_a_producer_whose_batches_carry_no_epoch(targets, topic):
    """A batch with a producer id and epoch -1 (no client sends one) leaves that producer with no epoch here, and
    Kafka then takes any sequence from it, as from a producer it does not know: not a gap, not a duplicate."""
    async def scenario(target):
        await create(target, topic)
        init = await init_producer_id(target)

        async def send(seq, n, epoch=-1):
            batch = build_batch(records(n), producer_id=init.producer_id, producer_epoch=epoch, base_sequence=seq)
            p = (await _produce(target, [{"name": topic, "partition_data": [_partition(batch)]}]))[0][1][0][1]
            return p["error_code"], p["base_offset"]
        return {"first": await send(0, 2), "a sequence again": await send(0, 1), "a gap": await send(9, 1),
                "the same batch again": await send(9, 1), "an epoch, from 3": await send(3, 1, init.producer_epoch),
                "then no epoch": await send(4, 1), "then a gap in the epoch": await send(7, 1, init.producer_epoch)}
    await same(targets, scenario)
