"""The transaction APIs over the wire: the happy path step by step, and each bad input's Kafka error."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.records import build_batch, build_marker_batch
from tests.integration.test_bad_input import still_serving

PRODUCE, FIND_COORDINATOR, INIT_PID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN = 0, 10, 22, 24, 25, 26
TXN_OFFSET_COMMIT, DESCRIBE_TXNS, LIST_TXNS, DESCRIBE_PRODUCERS, CREATE_TOPICS, OFFSET_FETCH = 28, 65, 66, 61, 19, 9


@pytest.fixture
async def topic(conn, topic_name):
    resp = await conn.request(CREATE_TOPICS, 7, {"topics": [{"name": topic_name, "num_partitions": 2,
                                                             "replication_factor": 1}], "timeout_ms": 5000})
    assert resp.topics[0].error_code == 0
    return topic_name


async def init(conn, txn_id, timeout_ms=60000, version=4, producer_id=-1, epoch=-1):
    found = await conn.request(FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [txn_id]})
    assert found.coordinators[0].error_code == 0
    return await conn.request(INIT_PID, version, {"transactional_id": txn_id, "transaction_timeout_ms": timeout_ms,
                                                  "producer_id": producer_id, "producer_epoch": epoch})


async def add(conn, txn_id, pid, epoch, topic, partitions=(0,), version=3):
    resp = await conn.request(ADD_PARTITIONS, version, {
        "v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": list(partitions)}]})
    return [p.partition_error_code for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition]


async def end(conn, txn_id, pid, epoch, commit=True, version=3):
    return (await conn.request(END_TXN, version, {"transactional_id": txn_id, "producer_id": pid,
                                                  "producer_epoch": epoch, "committed": commit})).error_code


async def produce(conn, txn_id, topic, batch, partition=0, version=9):
    resp = await conn.request(PRODUCE, version, {"transactional_id": txn_id, "acks": -1, "timeout_ms": 5000,
                                           "topic_data": [{"name": topic, "partition_data": [
                                               {"index": partition, "records": batch}]}]})
    return resp.responses[0].partition_responses[0].error_code


def txn_batch(pid, epoch, seq, value=b"v"):
    return build_batch([(None, value, [])], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=True)


async def test_a_transaction_step_by_step(conn, topic):
    txn_id = f"steps-{topic}"
    started = await init(conn, txn_id)
    assert started.error_code == 0 and started.producer_epoch == 0
    pid = started.producer_id
    assert await add(conn, txn_id, pid, 0, topic) == [0]
    assert await produce(conn, txn_id, topic, txn_batch(pid, 0, 0)) == 0
    described = await conn.request(DESCRIBE_TXNS, 0, {"transactional_ids": [txn_id, "nobody"]})
    mine, nobody = described.transaction_states
    assert (mine.transaction_state, mine.producer_id, [(t.topic, t.partitions) for t in mine.topics]) == \
        ("Ongoing", pid, [(topic, [0])])
    assert nobody.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    listed = await conn.request(LIST_TXNS, 1, {"state_filters": ["Ongoing"], "producer_id_filters": [],
                                               "duration_filter": -1})
    assert txn_id in {t.transactional_id for t in listed.transaction_states}
    producers = await conn.request(DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
    [active] = producers.topics[0].partitions[0].active_producers
    assert (active.producer_id, active.current_txn_start_offset) == (pid, 0)
    # Not yet committed: invisible to read_committed, visible to read_uncommitted.
    assert await end(conn, txn_id, pid, 0, commit=True) == 0
    # A retried commit: CONCURRENT_TRANSACTIONS while the markers are written, then NONE.
    retried = await end(conn, txn_id, pid, 0, commit=True)
    while retried == E.CONCURRENT_TRANSACTIONS:
        retried = await end(conn, txn_id, pid, 0, commit=True)
    assert retried == 0
    assert await end(conn, txn_id, pid, 0, commit=False) == E.INVALID_TXN_STATE


async def test_calls_out_of_order_and_mismatched_ids(conn, broker, topic):
    txn_id = f"order-{topic}"
    started = await init(conn, txn_id)
    pid, epoch = started.producer_id, started.producer_epoch
    assert await end(conn, txn_id, pid, epoch) == E.INVALID_TXN_STATE              # nothing to end
    assert await add(conn, txn_id, pid + 1000, epoch, topic) == [E.INVALID_PRODUCER_ID_MAPPING]
    assert await add(conn, "never-initialised", pid, epoch, topic) == [E.INVALID_PRODUCER_ID_MAPPING]
    assert await add(conn, txn_id, pid, epoch, "no-such-topic") == [E.UNKNOWN_TOPIC_OR_PARTITION]
    assert (await init(conn, txn_id, timeout_ms=900_001)).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert (await init(conn, txn_id, timeout_ms=0)).error_code == E.INVALID_TRANSACTION_TIMEOUT
    # Produce to a partition that was never added: the leader asks the coordinator, which says no; from
    # Produce v11 in KIP-890's word for it, which tells the producer to abort.
    assert await produce(conn, txn_id, topic, txn_batch(pid, epoch, 0), partition=1) == E.INVALID_TXN_STATE
    assert await produce(conn, txn_id, topic, txn_batch(pid, epoch, 0), partition=1,
                         version=11) == E.TRANSACTION_ABORTABLE
    # Sequence gaps are still gaps inside a transaction.
    assert await add(conn, txn_id, pid, epoch, topic, (0,)) == [0]
    assert await produce(conn, txn_id, topic, txn_batch(pid, epoch, 0)) == 0
    assert await produce(conn, txn_id, topic, txn_batch(pid, epoch, 5)) == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    # Markers are the coordinator's to write.
    marker = build_marker_batch(pid, epoch, True, 0, 1)
    assert await produce(conn, txn_id, topic, marker) == E.INVALID_RECORD
    assert await end(conn, txn_id, pid, epoch, commit=False) == 0
    await still_serving(broker, topic)


async def test_stale_epochs_get_each_apis_error(conn, topic):
    txn_id = f"fence-{topic}"
    old = await init(conn, txn_id)
    pid = old.producer_id
    assert await add(conn, txn_id, pid, old.producer_epoch, topic) == [0]
    assert await produce(conn, txn_id, topic, txn_batch(pid, old.producer_epoch, 0)) == 0
    # A new instance: its InitProducerId aborts the open transaction under a bumped epoch first.
    newer = await init(conn, txn_id)
    while newer.error_code == E.CONCURRENT_TRANSACTIONS:
        newer = await init(conn, txn_id)
    assert newer.error_code == 0 and newer.producer_id == pid and newer.producer_epoch > old.producer_epoch + 1
    stale = old.producer_epoch
    assert await add(conn, txn_id, pid, stale, topic, version=1) == [E.INVALID_PRODUCER_EPOCH]
    assert await add(conn, txn_id, pid, stale, topic, version=2) == [E.PRODUCER_FENCED]
    assert await end(conn, txn_id, pid, stale, version=1) == E.INVALID_PRODUCER_EPOCH
    assert await end(conn, txn_id, pid, stale, version=3) == E.PRODUCER_FENCED
    offsets = await conn.request(ADD_OFFSETS, 3, {"transactional_id": txn_id, "producer_id": pid,
                                                  "producer_epoch": stale, "group_id": "g"})
    assert offsets.error_code == E.PRODUCER_FENCED
    assert await produce(conn, txn_id, topic, txn_batch(pid, stale, 1)) == E.INVALID_PRODUCER_EPOCH
    fenced_v3 = await init(conn, txn_id, version=3, producer_id=pid, epoch=stale)
    fenced_v4 = await init(conn, txn_id, version=4, producer_id=pid, epoch=stale)
    assert (fenced_v3.error_code, fenced_v4.error_code) == (E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED)
    # The aborted records never reach read_committed.
    resp = await conn.request(1, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                      "isolation_level": 1, "session_epoch": -1, "topics": [{"topic": topic,
                                      "partitions": [{"partition": 0, "fetch_offset": 0,
                                                      "partition_max_bytes": 1 << 20}]}]})
    part = resp.responses[0].partitions[0]
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, 0)]
    assert part.last_stable_offset == part.high_watermark


async def test_txn_offsets_are_unstable_until_the_marker(conn, topic):
    txn_id, group = f"offsets-{topic}", f"group-{topic}"
    started = await init(conn, txn_id)
    pid, epoch = started.producer_id, started.producer_epoch
    await conn.request(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    added = await conn.request(ADD_OFFSETS, 3, {"transactional_id": txn_id, "producer_id": pid,
                                                "producer_epoch": epoch, "group_id": group})
    assert added.error_code == 0
    committed = await conn.request(TXN_OFFSET_COMMIT, 3, {
        "transactional_id": txn_id, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
        "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                   "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    assert committed.topics[0].partitions[0].error_code == 0

    async def offset(require_stable):
        resp = await conn.request(OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
            {"name": topic, "partition_indexes": [0]}]}], "require_stable": require_stable})
        p = resp.groups[0].topics[0].partitions[0]
        return p.error_code, p.committed_offset

    assert await offset(True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert await offset(False) == (0, -1)
    assert await end(conn, txn_id, pid, epoch, commit=True) == 0
    for _ in range(100):
        if await offset(True) == (0, 42):
            break
    assert await offset(True) == (0, 42)


async def test_list_transactions_filters(conn, topic):
    txn_id = f"listed-{topic}"
    started = await init(conn, txn_id)
    assert await add(conn, txn_id, started.producer_id, started.producer_epoch, topic) == [0]

    async def listed(states, pids=(), duration=-1):
        resp = await conn.request(LIST_TXNS, 1, {"state_filters": list(states), "producer_id_filters": list(pids),
                                                 "duration_filter": duration})
        return {t.transactional_id for t in resp.transaction_states}, list(resp.unknown_state_filters)

    assert txn_id in (await listed(["Ongoing"]))[0]
    assert txn_id not in (await listed(["CompleteCommit"]))[0]
    assert await listed(["Sleeping"]) == (set(), ["Sleeping"])
    assert (await listed([], [started.producer_id]))[0] == {txn_id}
    assert txn_id not in (await listed(["Ongoing"], duration=3_600_000))[0]
    assert await end(conn, txn_id, started.producer_id, started.producer_epoch, commit=False) == 0


async def test_the_next_request_finds_the_transaction_complete(conn, topic):
    """EndTxn is answered once the Prepare state is written; the markers and the Complete state follow before
    the connection reads on. So a client that sends its next transaction's AddPartitionsToTxn right behind
    EndTxn, without waiting for the answer, finds the last one complete: no CONCURRENT_TRANSACTIONS."""
    txn_id = f"pipelined-{topic}"
    started = await init(conn, txn_id)
    pid, epoch = started.producer_id, started.producer_epoch
    for n in range(20):
        assert await add(conn, txn_id, pid, epoch, topic) == [0]
        assert await produce(conn, txn_id, topic, txn_batch(pid, epoch, n)) == 0
        ended, added = await asyncio.gather(end(conn, txn_id, pid, epoch, commit=n % 2 == 0),
                                            add(conn, txn_id, pid, epoch, topic, partitions=(1,)))
        assert (ended, added) == (0, [0])
        assert await produce(conn, txn_id, topic, txn_batch(pid, epoch, n), partition=1) == 0
        assert await end(conn, txn_id, pid, epoch, commit=False) == 0
    described = await conn.request(DESCRIBE_TXNS, 0, {"transactional_ids": [txn_id]})
    assert described.transaction_states[0].transaction_state == "CompleteAbort"
