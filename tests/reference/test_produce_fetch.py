"""Produce, Fetch, ListOffsets and DeleteRecords as raw frames: offsets, log start and end, and the
error code of every kind of bad write or read."""

import struct
import time

import pytest

from kbroker.protocol.records import build_batch
from tests.reference.differential import call, plain, same
from tests.waiting import settled

pytestmark = pytest.mark.reference

PRODUCE, FETCH, LIST_OFFSETS, CREATE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID = 0, 1, 2, 19, 21, 22


async def create(target, topic, partitions=1, **configs):
    """CreateTopics, then Metadata until the broker knows every partition's leader, then ListOffsets until the
    leader serves each one: Kafka's broker learns of a topic from its controller a moment after CreateTopics
    answered, and takes leadership a moment after its metadata names it (a client retries in between)."""
    answer = await call(target, CREATE_TOPICS, 7, {"topics": [{
        "name": topic, "num_partitions": partitions, "replication_factor": 1,
        "configs": [{"name": k.replace("_", "."), "value": str(v)} for k, v in configs.items()]}],
        "timeout_ms": 10000})
    assert answer.topics[0].error_code == 0, answer
    await settled(lambda: call(target, 3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False}),
                  lambda a: a.topics[0].error_code == 0 and len(a.topics[0].partitions) == partitions
                  and all(p.leader_id >= 0 for p in a.topics[0].partitions))
    for partition in range(partitions):
        await settled(lambda: list_offset(target, topic, -1, partition), lambda found: found[0] == 0)


async def create_written(target, topic, counts: list[int]) -> None:
    """A topic of ``len(counts)`` partitions with ``counts[i]`` records in partition i, each write retried until
    accepted: Kafka's partitions take leadership a moment after the topic is in its Metadata."""
    from kbroker.protocol.records import build_batch

    await create(target, topic, len(counts))
    for partition, count in enumerate(counts):
        await settled(lambda: produce(target, topic, build_batch([(None, b"v", [])] * count), partition),
                      lambda a: a.error_code == 0)


async def produce(target, topic, records: bytes, partition=0, acks=-1, transactional_id=None):
    answer = await call(target, PRODUCE, 9, {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 5000,
                                             "topic_data": [{"name": topic, "partition_data": [
                                                 {"index": partition, "records": records}]}]})
    return answer.responses[0].partition_responses[0]


async def fetch(target, topic, offset, partition=0, leader_epoch=-1, isolation=0):
    answer = await call(target, FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": isolation,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "current_leader_epoch": leader_epoch, "fetch_offset": offset,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
    return answer.error_code, answer.responses[0].partitions[0]


async def list_offset(target, topic, timestamp, partition=0, leader_epoch=-1, isolation=0):
    answer = await call(target, LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [{
        "name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": leader_epoch,
                                       "timestamp": timestamp}]}]})
    p = answer.topics[0].partitions[0]
    return p.error_code, p.offset


def records(n, size=10, key=b"k"):
    return [(key, b"v" * size, []) for _ in range(n)]


def produced(p) -> dict:
    return {"error_code": p.error_code, "base_offset": p.base_offset, "log_start_offset": p.log_start_offset,
            "log_append_time_ms": p.log_append_time_ms, "record_errors": plain(p.record_errors),
            "error_message": p.error_message}


async def test_produce_offsets_and_log_end(targets, topic):
    async def scenario(target):
        await create(target, topic)
        answers = [produced(await produce(target, topic, build_batch(records(n)))) for n in (1, 3, 5)]
        return answers, await list_offset(target, topic, -2), await list_offset(target, topic, -1)
    answers, earliest, latest = await same(targets, scenario)
    assert [a["base_offset"] for a in answers] == [0, 1, 4] and latest == (0, 9)


async def test_acks_zero_gets_no_answer_and_the_records_land(targets, topic):
    async def scenario(target):
        await create(target, topic)
        await call(target, PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": []})
        from kbroker.client.connection import KafkaConnection
        conn = await KafkaConnection.open("127.0.0.1", target.port)
        try:
            await conn.request(PRODUCE, 9, {"transactional_id": None, "acks": 0, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": build_batch(records(2))}]}]},
                expect_response=False)
            latest = await conn.request(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{
                "name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        finally:
            await conn.close()
        return latest.topics[0].partitions[0].offset
    assert await same(targets, scenario) == 2


def corrupt(batch: bytes) -> bytes:
    return batch[:-1] + bytes([batch[-1] ^ 0xFF])


@pytest.mark.parametrize("case", [
    "unknown partition", "unknown topic", "too large", "corrupt crc", "acks 2",
    "no key on a compacted topic", "timestamp too old",
    "magic 1", "control batch from a client", "empty records",
])
async def test_bad_produce_is_refused_with_kafkas_error(targets, topic, case):
    async def scenario(target):
        await create(target, topic, max_message_bytes=2000,
                     cleanup_policy="compact" if "compacted" in case else "delete",
                     **({"message_timestamp_before_max_ms": 60000} if "timestamp" in case else {}))
        batch, partition, name, acks = build_batch(records(1)), 0, topic, -1
        if case == "unknown partition":
            partition = 3
        elif case == "unknown topic":
            name = topic + "-missing"
        elif case == "too large":
            batch = build_batch(records(1, size=5000))
        elif case == "corrupt crc":
            batch = corrupt(batch)
        elif case == "acks 2":
            acks = 2
        elif case == "no key on a compacted topic":
            batch = build_batch([(b"a", b"1", []), (None, b"2", []), (b"c", b"3", [])])
        elif case == "timestamp too old":
            batch = build_batch(records(1), timestamp_ms=int(time.time() * 1000) - 3_600_000)
        elif case == "magic 1":
            batch = _magic1(b"k", b"v")
        elif case == "control batch from a client":
            batch = build_batch([(b"\0\0\0\0", b"\0\0\0\0\0\0", [])], control=True)
        elif case == "empty records":
            batch = b""
        answer = await produce(target, name, batch, partition=partition, acks=acks)
        # (error_message is free text: kbroker says what was wrong where Kafka often says nothing)
        return {"error_code": answer.error_code, "base_offset": answer.base_offset,
                "record_errors": sorted(e.batch_index for e in answer.record_errors)}
    await same(targets, scenario)


def _magic1(key: bytes, value: bytes) -> bytes:
    """One v1 message (magic 1, CRC32 over the rest), as clients before 0.11 sent them."""
    body = struct.pack(">bbq", 1, 0, int(time.time() * 1000)) + struct.pack(">i", len(key)) + key + \
        struct.pack(">i", len(value)) + value
    import zlib
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


async def test_delete_records_moves_the_log_start(targets, topic):
    async def scenario(target):
        await create(target, topic)
        for _ in range(4):
            await produce(target, topic, build_batch(records(5)))
        answers = []
        for offset in (7, 3, -1, 100):
            answer = await call(target, DELETE_RECORDS, 2, {"timeout_ms": 5000, "topics": [{
                "name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}]})
            answers.append(plain(answer.topics[0].partitions[0]))
        return {"deleted": answers, "earliest": await list_offset(target, topic, -2),
                "latest": await list_offset(target, topic, -1),
                "below start": (await fetch(target, topic, 5))[1].error_code,
                "fetched from start": (await fetch(target, topic, 20))[1].log_start_offset}
    seen = await same(targets, scenario)
    assert seen["earliest"] == (0, 20)


async def test_time_retention_empties_a_log_whose_every_record_is_past_it(targets, topic):
    """Records dated 2023, past the default 7-day retention: the retention check (every second here; Kafka's
    first runs 30 s after it starts) deletes the active segment too, the log start moves to the log end, and the
    next write goes on from there."""
    async def scenario(target):
        await create(target, topic)
        written = await produce(target, topic, build_batch(records(3), timestamp_ms=1_700_000_000_000))
        emptied = await settled(lambda: list_offset(target, topic, -2), lambda found: found == (0, 3), timeout=60)
        below = await fetch(target, topic, 0)
        return {"written": written.error_code, "earliest": emptied, "latest": await list_offset(target, topic, -1),
                "below start": (below[1].error_code, below[1].log_start_offset, below[1].high_watermark),
                "next write": (await produce(target, topic, build_batch(records(1)))).base_offset}
    seen = await same(targets, scenario)
    assert seen["earliest"] == (0, 3)


async def test_list_offsets_by_timestamp_and_max_timestamp(targets, topic):
    base = int(time.time() * 1000) - 10_000

    async def scenario(target):
        await create(target, topic)
        for i, ts in enumerate((base, base + 5000, base + 2000)):
            await produce(target, topic, build_batch(records(2), timestamp_ms=ts))
        asked = {ts: await list_offset(target, topic, ts) for ts in (base - 1, base + 1, base + 3000, base + 9000)}
        return {"by time": asked, "max": await list_offset(target, topic, -3)}
    seen = await same(targets, scenario)
    assert seen["by time"][base + 9000] == (0, -1)


async def test_reads_with_a_future_leader_epoch(targets, topic):
    """(An older epoch needs a leader change: the cluster suite asks that.)"""
    async def scenario(target):
        await create(target, topic)
        await produce(target, topic, build_batch(records(1)))
        _, p = await fetch(target, topic, 0)
        current = await call(target, 3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False})
        leader_epoch = current.topics[0].partitions[0].leader_epoch
        asked = leader_epoch + 1
        return {"fetch": (await fetch(target, topic, 0, leader_epoch=asked))[1].error_code,
                "list offsets": (await list_offset(target, topic, -1, leader_epoch=asked))[0],
                "current": ((await fetch(target, topic, 0, leader_epoch=leader_epoch))[1].error_code)}
    assert await same(targets, scenario) == {"fetch": 75, "list offsets": 75, "current": 0}


async def test_fetch_errors(targets, topic):
    async def scenario(target):
        await create(target, topic)
        await produce(target, topic, build_batch(records(3)))
        return {"past the end": (await fetch(target, topic, 4))[1].error_code,
                "at the end": (await fetch(target, topic, 3))[1].error_code,
                "unknown partition": (await fetch(target, topic, 0, partition=2))[1].error_code,
                "unknown topic": (await fetch(target, topic + "-missing", 0))[1].error_code}
    await same(targets, scenario)


async def init_producer_id(target, producer_id=-1, producer_epoch=-1):
    """Retried while the broker answers COORDINATOR_LOAD_IN_PROGRESS, as a client does (Kafka's broker
    asks its controller for a block of producer ids when it first needs one)."""
    return await settled(lambda: call(target, INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": producer_id,
        "producer_epoch": producer_epoch}), lambda answer: answer.error_code != 14)


async def test_idempotent_sequences(targets, topic):
    async def scenario(target):
        await create(target, topic)
        init = await init_producer_id(target)
        pid, epoch = init.producer_id, init.producer_epoch

        async def send(seq, n=2, producer_epoch=epoch, producer_id=pid):
            p = await produce(target, topic, build_batch(records(n), producer_id=producer_id,
                                                         producer_epoch=producer_epoch, base_sequence=seq))
            return p.error_code, p.base_offset
        seen = {"first": await send(0), "duplicate": await send(0), "next": await send(2),
                "gap": await send(9), "behind": await send(1, n=1),
                "unknown producer id": await send(0, producer_id=pid + 999)}
        bumped = await init_producer_id(target, pid, epoch)
        seen["bump"] = (bumped.error_code, bumped.producer_id == pid, bumped.producer_epoch - epoch)
        seen["old epoch"] = await send(4)
        seen["new epoch from 0"] = await send(0, producer_epoch=bumped.producer_epoch)
        seen["new epoch from 7"] = await send(7, producer_epoch=bumped.producer_epoch + 1)
        return seen
    await same(targets, scenario)


@pytest.mark.parametrize("version", [7, 8, 9, 10, 11])
async def test_list_offsets_special_timestamps_at_every_version(targets, topic, version):
    """-1 latest, -2 earliest, -3 max timestamp, -4 earliest local (v8+), -5 latest tiered (v9+), -6 earliest
    pending upload (v11+): without tiered storage, as Kafka 4.2 answers them, and what an older version
    makes of a newer timestamp."""
    async def scenario(target):
        await create(target, topic)
        now_ms = int(time.time() * 1000)
        for n, ago_ms in ((2, 2000), (3, 1000)):   # (a later timestamp each: no tie for the max, whatever the pace)
            await produce(target, topic, build_batch(records(n), timestamp_ms=now_ms - ago_ms))
        await call(target, 21, 2, {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 1}]}],
                                   "timeout_ms": 5000})
        answers = {}
        for timestamp in (-1, -2, -3, -4, -5, -6, -7):
            answer = await call(target, LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": 0, "topics": [{
                "name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                               "timestamp": timestamp}]}], "timeout_ms": 1000})
            p = answer.topics[0].partitions[0]
            answers[timestamp] = (p.error_code, p.offset, p.leader_epoch, p.timestamp >= 0)
        return answers
    await same(targets, scenario)


async def test_topics_named_by_id(targets, topic):
    """Fetch v13+ and Produce v13 (KIP-516): the id Metadata gives reads and writes the topic; an id no
    topic has is UNKNOWN_TOPIC_ID, answered under that id."""
    stranger = bytes(range(16))

    async def scenario(target):
        await create(target, topic)
        meta = await call(target, 3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                          "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
        topic_id = bytes(meta.topics[0].topic_id)
        seen = {}
        for version in (13, 16, 17, 18):
            answer = await call(target, FETCH, version, {
                "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
                "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [], "topics": [
                    {"topic_id": t, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                    "last_fetched_epoch": -1, "log_start_offset": -1,
                                                    "partition_max_bytes": 1 << 20}]} for t in (topic_id, stranger)]})
            seen[f"fetch v{version}"] = (answer.error_code, sorted(
                (bytes(t.topic_id) == topic_id, p.error_code, p.high_watermark)
                for t in answer.responses for p in t.partitions))
        for version in (10, 11, 12, 13):
            by = {"topic_id": topic_id} if version >= 13 else {"name": topic}
            answer = await call(target, PRODUCE, version, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                                                           "topic_data": [{**by, "partition_data": [{
                                                               "index": 0, "records": build_batch(records(1))}]}]})
            p = answer.responses[0].partition_responses[0]
            seen[f"produce v{version}"] = (p.error_code, p.base_offset)
        answer = await call(target, PRODUCE, 13, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                                                  "topic_data": [{"topic_id": stranger, "partition_data": [{
                                                      "index": 0, "records": build_batch(records(1))}]}]})
        seen["produce v13 to an unknown id"] = [(bytes(t.topic_id) == stranger, p.error_code, p.base_offset)
                                               for t in answer.responses for p in t.partition_responses]
        return seen
    await same(targets, scenario)
