"""Bad input gets Kafka's error or a closed connection, is logged, and costs nobody else anything."""

import asyncio
import struct
import time

import crc32c

import pytest

from kbroker.client.connection import ConnectionClosed, KafkaConnection
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records import build_batch
from tests.integration.test_metrics import metrics_port, scrape, value

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 2, 3, 18, 19
CREATE_PARTITIONS = 37


async def connect(broker) -> KafkaConnection:
    return await KafkaConnection.open("127.0.0.1", broker.port)


async def still_serving(broker, topic: str) -> None:
    """Another client, on a fresh connection, can still produce and read back."""
    conn = await connect(broker)
    try:
        resp = await produce(conn, topic, build_batch([(None, b"alive", [])]))
        p = resp.responses[0].partition_responses[0]
        assert p.error_code == 0
        fetched = await fetch(conn, topic, p.base_offset)
        assert b"alive" in bytes(fetched.responses[0].partitions[0].records)
    finally:
        await conn.close()


async def produce(conn, topic, records, partition=0, acks=-1):
    return await conn.request(PRODUCE, 9, {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
                                           "topic_data": [{"name": topic, "partition_data": [
                                               {"index": partition, "records": records}]}]})


async def fetch(conn, topic, offset, partition=0):
    return await conn.request(FETCH, 12, {"replica_id": -1, "max_wait_ms": 100, "min_bytes": 1,
                                          "max_bytes": 1 << 20, "isolation_level": 0, "session_epoch": -1,
                                          "topics": [{"topic": topic, "partitions": [
                                              {"partition": partition, "fetch_offset": offset,
                                               "partition_max_bytes": 1 << 20}]}]})


async def create_topic(broker, name: str) -> None:
    """A one-partition topic, created with a CreateTopics request of the project's own client."""
    conn = await connect(broker)
    try:
        resp = await conn.request(CREATE_TOPICS, 7, {"topics": [{"name": name, "num_partitions": 1,
                                                                 "replication_factor": 1}], "timeout_ms": 5000})
        assert resp.topics[0].error_code == 0
    finally:
        await conn.close()


@pytest.fixture
async def topic(broker, topic_name):
    await create_topic(broker, topic_name)
    return topic_name


@pytest.mark.parametrize("garbage", [
    b"\x00\x00\x00\x03abc",                                      # shorter than a request header
    b"\x00\x00\x00\x0c" + struct.pack(">hhi", 3, 12, 1) + b"\xff\xff\x00\x05",  # truncated body
    b"\xff\xff\xff\xfe",                                          # negative size
    b"\x00\x00\x00\x10" + b"\xde\xad\xbe\xef" * 4,               # random bytes
])
async def test_garbage_closes_only_that_connection(broker, topic, garbage):
    conn = await connect(broker)
    await conn.send_raw(garbage)
    assert await conn.wait_closed()
    await still_serving(broker, topic)


async def test_oversized_frame_is_refused_before_reading_it(broker, topic):
    conn = await connect(broker)
    await conn.send_raw(struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 16)
    assert await conn.wait_closed()
    await still_serving(broker, topic)


async def test_unknown_api_key_closes_the_connection(broker, topic):
    conn = await connect(broker)
    await conn.send_raw(struct.pack(">ihhih", 10, 999, 0, 7, -1))
    assert await conn.wait_closed()
    await still_serving(broker, topic)


async def test_unsupported_api_versions_version_answers_v0_with_our_ranges(broker):
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    body = struct.pack(">hhih", API_VERSIONS, 99, 42, -1)
    writer.write(struct.pack(">i", len(body)) + body)
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    frame = await reader.readexactly(size)
    correlation, error, count = struct.unpack_from(">ihi", frame)
    assert (correlation, error) == (42, ErrorCode.UNSUPPORTED_VERSION)
    ranges = {struct.unpack_from(">hhh", frame, 10 + 6 * i)[0]: struct.unpack_from(">hhh", frame, 10 + 6 * i)[1:]
              for i in range(count)}
    from kbroker.protocol.schema import REGISTRY
    assert ranges[API_VERSIONS] == (0, 4)
    assert ranges[PRODUCE] == (REGISTRY[PRODUCE].versions.low, REGISTRY[PRODUCE].versions.high)
    writer.close()


async def test_unsupported_version_of_another_api_closes_the_connection(broker, topic):
    conn = await connect(broker)
    await conn.send_raw(struct.pack(">ihhih", 10, PRODUCE, 1, 7, -1))  # Produce v1: below our range
    assert await conn.wait_closed()
    await still_serving(broker, topic)


async def test_crc_mismatch_is_corrupt_message(broker, topic):
    batch = bytearray(build_batch([(b"k", b"value", [])]))
    batch[-1] ^= 0xFF
    conn = await connect(broker)
    resp = await produce(conn, topic, bytes(batch))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
    await conn.close()
    await still_serving(broker, topic)


async def test_old_magic_is_an_invalid_record(broker, topic):
    """Kafka answers Produce v3+ carrying a magic 0 or 1 message with INVALID_RECORD (tests/reference)."""
    v1 = bytearray(build_batch([(b"k", b"value", [])]))
    v1[16] = 1
    conn = await connect(broker)
    resp = await produce(conn, topic, bytes(v1))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD
    await conn.close()


async def test_batch_over_message_max_bytes_is_too_large(broker, topic):
    conn = await connect(broker)
    resp = await produce(conn, topic, build_batch([(None, b"x" * (1024 * 1024 + 100), [])]))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE
    await conn.close()
    await still_serving(broker, topic)


@pytest.mark.parametrize("name", ["bad name", "a" * 250, "..", "sl/ash", ""])
async def test_invalid_topic_names(broker, name):
    conn = await connect(broker)
    created = await conn.request(CREATE_TOPICS, 7, {"topics": [{"name": name, "num_partitions": 1,
                                                                "replication_factor": 1}], "timeout_ms": 5000})
    assert created.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    if name:
        md = await conn.request(METADATA, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": True})
        assert md.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    await conn.close()


@pytest.mark.parametrize("api", ["CreateTopics", "CreatePartitions"])
async def test_a_million_partitions_in_one_request_are_refused_whole(broker, topic, api):
    """More than 10,000 partitions asked in one request (over all its topics) is POLICY_VIOLATION for every
    topic in it, as Kafka's controller answers CreateTopics, before anything is made: the broker does not
    spend minutes and its disk making a million logs for one client."""
    conn = await connect(broker)
    if api == "CreateTopics":
        answer = await conn.request(CREATE_TOPICS, 7, {"topics": [
            {"name": f"{topic}-small", "num_partitions": 1, "replication_factor": 1},
            {"name": f"{topic}-huge", "num_partitions": 1_000_000, "replication_factor": 1}], "timeout_ms": 5000})
        errors = [t.error_code for t in answer.topics]
    else:
        answer = await conn.request(CREATE_PARTITIONS, 3, {"topics": [{"name": topic, "count": 1_000_000,
                                                                       "assignments": None}],
                                                           "timeout_ms": 5000, "validate_only": False})
        errors = [r.error_code for r in answer.results]
    assert errors and all(e == ErrorCode.POLICY_VIOLATION for e in errors), answer
    listed = await conn.request(METADATA, 12, {"topics": [{"name": topic}, {"name": f"{topic}-small"}],
                                               "allow_auto_topic_creation": False})
    assert [(len(t.partitions), t.error_code) for t in listed.topics] == [
        (1, 0), (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]   # nothing made, nothing grown
    await conn.close()
    await still_serving(broker, topic)


async def test_fetch_beyond_log_end_is_offset_out_of_range(broker, topic):
    conn = await connect(broker)
    await produce(conn, topic, build_batch([(None, b"one", [])]))
    resp = await fetch(conn, topic, 1000)
    assert resp.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    resp = await conn.request(LIST_OFFSETS, 7, {"replica_id": -1, "topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "timestamp": -1}]}]})
    assert resp.topics[0].partitions[0].offset == 1
    await conn.close()


async def test_produce_to_unknown_partition(broker, topic):
    conn = await connect(broker)
    resp = await produce(conn, topic, build_batch([(None, b"v", [])]), partition=7)
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    await conn.close()


async def test_failed_acks0_produce_closes_the_connection(broker, topic):
    conn = await connect(broker)
    batch = bytearray(build_batch([(b"k", b"value", [])]))
    batch[-1] ^= 0xFF
    await conn.request(PRODUCE, 9, {"transactional_id": None, "acks": 0, "timeout_ms": 5000,
                                    "topic_data": [{"name": topic, "partition_data": [
                                        {"index": 0, "records": bytes(batch)}]}]}, expect_response=False)
    assert await conn.wait_closed()
    await still_serving(broker, topic)


async def test_pipelined_requests_are_answered_in_order(broker, topic):
    conn = await connect(broker)
    try:
        # A long poll first: the produces behind it must not wait for it, yet answers stay in order.
        poll = asyncio.ensure_future(conn.request(FETCH, 12, {
            "replica_id": -1, "max_wait_ms": 2000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}))
        await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        started = loop.time()
        produced = await asyncio.gather(*[produce(conn, topic, build_batch([(None, b"p%d" % i, [])]))
                                          for i in range(5)])
        fetched = await poll
        assert [r.responses[0].partition_responses[0].base_offset for r in produced] == [0, 1, 2, 3, 4]
        assert b"p0" in bytes(fetched.responses[0].partitions[0].records)
        assert loop.time() - started < 1.5, "the first append must wake the parked fetch"
    finally:
        await conn.close()


async def test_closed_connection_raises_for_pending_requests(broker):
    conn = await connect(broker)
    await conn.send_raw(b"\xff\xff\xff\xfe")
    with pytest.raises(ConnectionClosed):
        await conn.request(METADATA, 12, {"topics": None}, timeout=5)


async def park_fetch(conn, topic: str, broker) -> asyncio.Future:
    """A long-polling fetch (60 s) of an empty partition, once the broker's fetch purgatory holds it (``broker``
    serves its metrics: started with ``metrics.port`` 0)."""
    body = {"replica_id": -1, "max_wait_ms": 60000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    port = metrics_port(broker)
    parked = asyncio.ensure_future(conn.request(FETCH, 12, body, timeout=90))
    deadline = asyncio.get_running_loop().time() + 10
    while value(await asyncio.to_thread(scrape, port), "kafka_server_delayedoperationpurgatory_purgatorysize",
                delayedOperation="Fetch") < 1:
        assert asyncio.get_running_loop().time() < deadline and not parked.done(), "the fetch never parked"
        await asyncio.sleep(0.02)
    return parked


async def test_a_bad_frame_behind_a_parked_fetch_closes_at_once_and_abandons_it(fresh_broker, topic_name):
    """Kafka drops a channel that sent garbage with whatever it had in flight. The parked fetch leaves the
    purgatory then, so the next append (which would have completed it) finds nobody, and nothing is logged."""
    fresh_broker.overrides["metrics.port"] = "0"
    fresh_broker.start()
    await create_topic(fresh_broker, topic_name)
    conn = await connect(fresh_broker)
    parked = await park_fetch(conn, topic_name, fresh_broker)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await conn.send_raw(b"\x00\x00\x00\x03abc")
    assert await conn.wait_closed(timeout=10)
    assert loop.time() - started < 5, "the connection waited for its parked fetch before closing"
    with pytest.raises(ConnectionClosed):
        await parked
    await still_serving(fresh_broker, topic_name)   # appends to the partition the abandoned fetch watched
    assert fresh_broker.stop() == 0
    with open(fresh_broker.log_path, encoding="utf-8", errors="replace") as f:
        log = f.read()
    assert "Traceback" not in log and "Exception in callback" not in log, log[-3000:]


async def test_a_fetch_parked_when_the_broker_stops_is_answered_before_the_connection_closes(fresh_broker,
                                                                                             topic_name):
    """Shutdown is not a hang-up: requests already read are answered (parked ones at once), then it closes."""
    fresh_broker.overrides["metrics.port"] = "0"
    fresh_broker.start()
    await create_topic(fresh_broker, topic_name)
    conn = await connect(fresh_broker)
    parked = await park_fetch(conn, topic_name, fresh_broker)
    assert not parked.done()
    stopped = asyncio.ensure_future(asyncio.to_thread(fresh_broker.stop))
    answer = await asyncio.wait_for(parked, 20)
    assert answer.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert await stopped == 0
    assert await conn.wait_closed()


async def test_records_broken_inside_a_valid_batch_are_invalid_record_on_a_compacted_topic(broker, topic):
    """The CRC is right but a record's structure is not (a key length past the batch's end): a compacted topic
    reads every record for its key check, and answers INVALID_RECORD as Kafka does, keeping the connection."""
    conn = await connect(broker)
    compacted = f"{topic}-compacted"
    created = await conn.request(CREATE_TOPICS, 7, {"topics": [{"name": compacted, "num_partitions": 1,
                                                                "replication_factor": 1, "configs": [
                                                                    {"name": "cleanup.policy", "value": "compact"}]}],
                                                    "timeout_ms": 5000})
    assert created.topics[0].error_code == 0
    good = build_batch([(b"k", b"value", [])])
    # The record's key length varint: rewritten to a long run of continuation bytes, CRC recomputed.
    body = bytearray(good[61:])
    body[4:] = b"\xff" * (len(body) - 4)
    broken = bytearray(good[:61]) + body
    struct.pack_into(">I", broken, 17, crc32c.crc32c(bytes(broken[21:])))
    resp = await produce(conn, compacted, bytes(broken))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD
    resp = await produce(conn, compacted, good)   # the same connection goes on
    assert resp.responses[0].partition_responses[0].error_code == 0
    await conn.close()
    await still_serving(broker, topic)


@pytest.mark.parametrize("compressed", [False, True])
async def test_keyless_records_fail_alone_on_a_compacted_topic(broker, topic_name, compressed):
    """KIP-467: the batch is refused with INVALID_RECORD naming the keyless records' indexes, so a client
    fails those and retries the rest (a compressed batch is read on a worker thread, an uncompressed one at
    the append: both answer alike)."""
    conn = await connect(broker)
    try:
        created = await conn.request(CREATE_TOPICS, 7, {"topics": [{
            "name": topic_name, "num_partitions": 1, "replication_factor": 1,
            "configs": [{"name": "cleanup.policy", "value": "compact"}]}], "timeout_ms": 5000})
        assert created.topics[0].error_code == 0
        batch = build_batch([(b"a", b"1", []), (None, b"2", []), (b"c", b"3", []), (None, b"4", [])],
                            compression=1 if compressed else 0)
        answer = (await produce(conn, topic_name, batch)).responses[0].partition_responses[0]
        assert answer.error_code == ErrorCode.INVALID_RECORD and answer.base_offset == -1
        assert [e.batch_index for e in answer.record_errors] == [1, 3]
        assert all("without key" in e.batch_index_error_message for e in answer.record_errors)
        fine = (await produce(conn, topic_name, build_batch([(b"a", b"1", []), (b"c", b"3", [])])))
        assert fine.responses[0].partition_responses[0].base_offset == 0   # nothing of the refused batch landed
    finally:
        await conn.close()


async def test_timestamps_out_of_the_topics_bounds_are_invalid_timestamp(broker, topic_name):
    """KIP-937: a CreateTime record older than message.timestamp.before.max.ms, or further ahead than
    message.timestamp.after.max.ms (an hour, by default), refuses its batch with INVALID_TIMESTAMP and the
    record's index; a LogAppendTime topic takes any timestamp, since the broker stamps its own."""
    conn = await connect(broker)
    now = int(time.time() * 1000)
    try:
        for name, configs in [(topic_name, {"message.timestamp.before.max.ms": "60000"}),
                              (topic_name + "-append", {"message.timestamp.type": "LogAppendTime"})]:
            created = await conn.request(CREATE_TOPICS, 7, {"topics": [{
                "name": name, "num_partitions": 1, "replication_factor": 1,
                "configs": [{"name": k, "value": v} for k, v in configs.items()]}], "timeout_ms": 5000})
            assert created.topics[0].error_code == 0
        for timestamp in (now - 3_600_000, now + 7_200_000):
            answer = (await produce(conn, topic_name, build_batch([(b"k", b"v", [])], timestamp_ms=timestamp)))
            refused = answer.responses[0].partition_responses[0]
            assert refused.error_code == ErrorCode.INVALID_TIMESTAMP
            assert [e.batch_index for e in refused.record_errors] == [0]
            taken = await produce(conn, topic_name + "-append", build_batch([(b"k", b"v", [])], timestamp_ms=timestamp))
            assert taken.responses[0].partition_responses[0].error_code == 0
        fine = await produce(conn, topic_name, build_batch([(b"k", b"v", [])], timestamp_ms=now - 30_000))
        assert fine.responses[0].partition_responses[0].base_offset == 0   # nothing refused landed
    finally:
        await conn.close()
