"""What a read_committed fetch is told beside its records, as raw frames side by side: the last stable offset
once the log start has passed an open transaction's first record, and the aborted transactions listed for a
fetch that stops short of the log's end."""

from __future__ import annotations

import pytest

from kbroker.protocol.records import build_batch, split_batches
from tests.reference.differential import call, same
from tests.reference.test_produce_fetch import create, list_offset, produce, records
from tests.reference.test_transaction_edges import decided
from tests.reference.test_transactional_offsets import coordinators_ready, init

pytestmark = pytest.mark.reference

FETCH, DELETE_RECORDS, ADD_PARTITIONS_TO_TXN, END_TXN = 1, 21, 24, 26
READ_COMMITTED = 1


class Transactions:
    """One transactional id writing to partition 0 of a topic, a transaction at a time."""

    def __init__(self, target, topic: str) -> None:
        self.target, self.topic, self.txn, self.sequence = target, topic, f"txn-{topic}", 0

    async def start(self) -> "Transactions":
        await coordinators_ready(self.target, self.txn, f"g-{self.topic}")
        self.producer_id, self.epoch = await init(self.target, self.txn)
        return self

    async def write(self, n: int) -> None:
        await call(self.target, ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": self.txn, "v3_and_below_producer_id": self.producer_id,
            "v3_and_below_producer_epoch": self.epoch, "v3_and_below_topics": [{"name": self.topic,
                                                                                "partitions": [0]}]})
        batch = build_batch(records(n), producer_id=self.producer_id, producer_epoch=self.epoch,
                            base_sequence=self.sequence, transactional=True)
        assert (await produce(self.target, self.topic, batch, transactional_id=self.txn)).error_code == 0
        self.sequence += n

    async def end(self, commit: bool) -> None:
        await call(self.target, END_TXN, 4, {"transactional_id": self.txn, "producer_id": self.producer_id,
                                             "producer_epoch": self.epoch, "committed": commit})
        await decided(self.target, self.txn)


async def fetch_committed(target, topic: str, offset: int, partition_max_bytes: int = 1 << 20):
    answer = await call(target, FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": READ_COMMITTED,
        "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
            "partition_max_bytes": partition_max_bytes, "last_fetched_epoch": -1}]}]})
    p = answer.responses[0].partitions[0]
    return {"error": p.error_code, "high watermark": p.high_watermark, "last stable": p.last_stable_offset,
            "log start": p.log_start_offset,
            "aborted from": sorted(a.first_offset for a in p.aborted_transactions or []),
            "batches": [(h.base_offset, h.records_count) for _, h in split_batches(bytes(p.records or b""))]}


async def test_the_last_stable_offset_is_never_below_the_log_start(targets, topic):
    """An open transaction at offsets 0-2, single records after it, and DeleteRecords to offset 4: Kafka's last
    stable offset is the log start (its first unstable offset, at least the log start), not the open
    transaction's first offset below it."""
    async def scenario(target):
        await create(target, topic)
        txn = await (Transactions(target, topic)).start()
        await txn.write(3)
        for _ in range(3):
            await produce(target, topic, build_batch(records(1)))
        deleted = await call(target, DELETE_RECORDS, 2, {"timeout_ms": 5000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "offset": 4}]}]})
        return {"deleted": deleted.topics[0].partitions[0].low_watermark,
                "fetched": await fetch_committed(target, topic, 4),
                "last stable, listed": await list_offset(target, topic, -1, isolation=READ_COMMITTED)}
    seen = await same(targets, scenario)
    assert seen["fetched"]["last stable"] == 4 and seen["last stable, listed"] == (0, 4)


async def test_a_fetch_lists_the_aborted_transactions_of_what_it_read(targets, topic):
    """Every batch indexed (``index.interval.bytes`` 1), an aborted transaction, then a committed one, then
    another aborted one: a fetch of the first batches only is told of the first abort alone, as Kafka bounds the
    aborted transactions by the index entry just past what it read; a fetch of everything, of both."""
    async def scenario(target):
        await create(target, topic, index_interval_bytes=1)
        txn = await (Transactions(target, topic)).start()
        for commit in (False, True, False):
            await txn.write(2)
            await produce(target, topic, build_batch(records(1)))
            await txn.end(commit)
        return {"the first two batches": await fetch_committed(target, topic, 0, partition_max_bytes=200),
                "everything": await fetch_committed(target, topic, 0),
                "from the committed one": await fetch_committed(target, topic, 4, partition_max_bytes=200)}
    seen = await same(targets, scenario)
    assert seen["the first two batches"]["aborted from"] == [0] and seen["everything"]["aborted from"] == [0, 8]
