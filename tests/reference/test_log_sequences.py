"""Seeded random runs against a partition's log, the same on Kafka and on kbroker, every answer compared step by
step (as ``test_sequences`` does for the coordinators). Every seed here failed on the code before the fixes of
2026-11-29 its runs found:
- Idempotent produces (a producer whose batch carried no epoch): the next batch, repeats of recent and old
  batches, overlaps, gaps, stale and new epochs, new producers, unknown producer ids, sequences wrapping past
  Int32.MaxValue, two batches in one request, compressed and transactional-flagged batches, DeleteRecords under a
  producer, at Produce v3 to v12.
- Reads: Fetch (v4 to v17, both bounds from nothing to 1 MiB, read_committed or not) and ListOffsets (latest,
  earliest, max timestamp, by timestamp) over plain, compressed, idempotent and transactional writes, commits,
  aborts and DeleteRecords (the last stable offset below the log start; `test_read_committed_edges` has the
  scenarios). What differs on purpose (docs/COMPATIBILITY.md, "Reads") is read as the same: Kafka's last stable
  offset snapped below the log start, and aborted transactions past the records read (or beside none); and no
  seed here has a response whose first partition ends inside a batch in Kafka.
"""

from __future__ import annotations

import random
import time

import pytest

from kbroker.protocol.records import build_batch, split_batches
from tests.reference.differential import call
from tests.reference.test_produce_fetch import create, init_producer_id, records
from tests.reference.test_sequences import first_divergence
from tests.reference.test_share_groups import topic_id_of
from tests.reference.test_transaction_edges import decided
from tests.reference.test_transactional_offsets import begin

pytestmark = pytest.mark.reference

PRODUCE, FETCH, LIST_OFFSETS, DELETE_RECORDS, ADD_PARTITIONS, END_TXN = 0, 1, 2, 21, 24, 26
SEQUENCES = 1 << 31   # (a sequence wraps from Int32.MaxValue to 0)


async def produce(target, topic: str, partition: int, batch: bytes, version: int = 9, acks: int = -1,
                  transactional_id: str | None = None):
    answer = await call(target, PRODUCE, version, {
        "transactional_id": transactional_id, "acks": acks, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    return answer.responses[0].partition_responses[0]


async def log_end(target, topic: str, partition: int) -> int:
    return (await call(target, LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{
        "name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                       "timestamp": -1}]}]})).topics[0].partitions[0].offset


async def delete_to(target, topic: str, partition: int, offset: int) -> tuple[int, int]:
    answer = await call(target, DELETE_RECORDS, 2, {"timeout_ms": 5000, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}]})
    p = answer.topics[0].partitions[0]
    return p.error_code, p.low_watermark


# ---------------------------------------------------------------------------------------------- idempotent produces
PRODUCE_STEPS = ["next", "next", "next", "next both", "repeat recent", "repeat recent", "repeat old", "overlap",
                 "gap", "behind", "stale epoch", "new epoch from 0", "new epoch from n", "new producer",
                 "unknown producer", "near the top", "delete", "next acks 1", "two batches", "two batches, a gap",
                 "repeat, one more record", "gzip", "transactional flag"]
PRODUCE_VERSIONS = [3, 5, 7, 8, 9, 11, 12]


class IdempotentRun:
    """One idempotent producer writing to two partitions; what a client keeps: its epoch and next sequence in
    each partition, and the batches each took."""

    def __init__(self, target, topic: str) -> None:
        self.target, self.topic = target, topic

    async def start(self) -> "IdempotentRun":
        await create(self.target, self.topic, partitions=2)
        await self._new_producer()
        self.first_id = self.producer_id
        return self

    async def _new_producer(self) -> int:
        init = await init_producer_id(self.target)
        if init.error_code == 0:
            self.producer_id = init.producer_id
            self.epoch, self.sequence, self.taken = [init.producer_epoch] * 2, [0, 0], [[], []]
        return init.error_code

    async def send(self, p: int, version: int, sequence: int, n: int, *, epoch: int | None = None,
                   producer_id: int | None = None, acks: int = -1, then=None, **batch) -> tuple:
        records_ = build_batch(records(n), producer_id=self.producer_id if producer_id is None else producer_id,
                               producer_epoch=self.epoch[p] if epoch is None else epoch, base_sequence=sequence,
                               **batch)
        if then is not None:   # a second batch in the same request
            records_ += build_batch(records(1), producer_id=self.producer_id, producer_epoch=self.epoch[p],
                                    base_sequence=then)
        r = await produce(self.target, self.topic, p, records_, version, acks)
        return (r.error_code, r.base_offset, r.log_start_offset,
                [(e.batch_index, e.batch_index_error_message is None) for e in r.record_errors or []])

    def took(self, p: int, sequence: int, n: int, answer: tuple) -> tuple:
        if answer[0] == 0:
            self.taken[p].append((sequence, n))
            self.sequence[p] = (sequence + n) % SEQUENCES
        return answer

    async def step(self, step: str, p: int, version: int, n: int, k: int) -> tuple:
        s, taken = self.sequence[p], self.taken[p]
        if step in ("next", "next acks 1", "gzip", "transactional flag"):
            flags = {"gzip": {"compression": 1}, "transactional flag": {"transactional": True}}.get(step, {})
            return self.took(p, s, n, await self.send(p, version, s, n, acks=1 if step == "next acks 1" else -1,
                                                      **flags))
        if step == "next both":
            return tuple([self.took(q, self.sequence[q], n, await self.send(q, version, self.sequence[q], n))
                          for q in (0, 1)])
        if step.startswith("two batches"):
            then = s + n + (k + 1 if step.endswith("gap") else 0)
            answer = await self.send(p, version, s, n, then=then)
            if answer[0] == 0:
                self.took(p, s, n, answer)
                self.took(p, s + n, 1, answer)
            return answer
        if step in ("repeat recent", "repeat old", "repeat, one more record"):
            batches = {"repeat recent": taken[-5:], "repeat old": taken[:-5], "repeat, one more record": taken[-1:]}
            if not batches[step]:
                return ()
            first, count = batches[step][k % len(batches[step])]
            return await self.send(p, version, first, count + (step == "repeat, one more record"))
        if step == "overlap":
            return self.took(p, max(0, s - 1), 2, await self.send(p, version, max(0, s - 1), 2))
        if step == "gap":
            return await self.send(p, version, s + 1 + k, n)
        if step == "behind":
            return await self.send(p, version, max(0, s - 3 - k), 1)
        if step == "stale epoch":   # (-1 right after InitProducerId: a batch with no epoch)
            return await self.send(p, version, s, n, epoch=self.epoch[p] - 1)
        if step.startswith("new epoch"):
            first = 0 if step == "new epoch from 0" else 1 + k
            answer = await self.send(p, version, first, n, epoch=self.epoch[p] + 1)
            if answer[0] == 0:
                self.epoch[p], self.taken[p], self.sequence[p] = self.epoch[p] + 1, [(first, n)], first + n
            return answer
        if step == "new producer":
            return (await self._new_producer(),)
        if step == "unknown producer":
            return await self.send(p, version, k, n, epoch=0, producer_id=self.first_id + 5000 + k)
        if step == "near the top":   # a producer of its own from just below Int32.MaxValue, across the wrap
            init = await init_producer_id(self.target)
            first = SEQUENCES - 1 - k % 3
            return tuple([await self.send(p, version, sequence, count, epoch=init.producer_epoch,
                                          producer_id=init.producer_id)
                          for sequence, count in ((first, n + 1), ((first + n + 1) % SEQUENCES, 1))])
        assert step == "delete"
        return await delete_to(self.target, self.topic, p, max(0, await log_end(self.target, self.topic, p) - k % 3))


def produce_run(seed: int, steps: int) -> list[tuple]:
    rng = random.Random(seed)
    return [(rng.choice(PRODUCE_STEPS), rng.randrange(2), rng.choice(PRODUCE_VERSIONS), rng.randrange(1, 4),
             rng.randrange(10)) for _ in range(steps)]


@pytest.mark.parametrize("seed", [4, 31])
async def test_an_idempotent_producer_run(targets, topic, seed):
    run = produce_run(seed, steps=100)
    answers = {}
    for target in targets:
        producer = await IdempotentRun(target, topic).start()
        answers[target.name] = [(step, await producer.step(*step)) for step in run]
    first_divergence(answers["kafka"], answers["kbroker"], seed)


# ---------------------------------------------------------------------------------------------- reads
READ_STEPS = ["plain", "plain", "plain", "gzip", "transactional", "transactional", "transactional", "commit",
              "abort", "delete", "fetch", "fetch", "fetch", "fetch", "fetch both", "list", "list by timestamp",
              "idempotent"]
FETCH_VERSIONS = [4, 5, 7, 10, 11, 12, 13, 15, 16, 17]
BOUNDS = [0, 1, 60, 200, 500, 1000, 5000, 1 << 20]
SINCE_NOW = 300_000   # (a timestamp later than the run's own is the broker's clock: a marker's)


class ReadRun:
    """Writes of every kind to two partitions, and reads between them. Record timestamps are the run's own,
    a second apart from a start ten minutes ago (Kafka rolls a segment at every batch older than segment.ms)."""

    def __init__(self, target, topic: str, start_ms: int) -> None:
        self.target, self.topic, self.start_ms = target, topic, start_ms
        self.sequence, self.transactional_sequence, self.open = [0, 0], [0, 0], False
        self.snaps = target.name == "kafka"   # (its last stable offset may be snapped below the log start)

    async def start(self) -> "ReadRun":
        self.txn, _, self.txn_producer_id, self.epoch = await begin(self.target, self.topic, 2)
        self.producer_id = (await init_producer_id(self.target)).producer_id
        self.topic_id = await topic_id_of(self.target, self.topic)
        return self

    def _timestamp(self, ms: int):
        return "now" if ms - self.start_ms >= SINCE_NOW else ms - self.start_ms if ms >= 0 else ms

    async def step(self, i: int, step: str, p: int, version: int, n: int, k: int, max_bytes: int,
                   partition_max: int, isolation: int, extra: int) -> tuple:
        stamped = {"timestamp_ms": self.start_ms + i * 1000}
        size = [(b"k%d" % j, b"v" * (10 * k + j), []) for j in range(n)]
        if step in ("plain", "gzip"):
            r = await produce(self.target, self.topic, p, build_batch(size, compression=int(step == "gzip"),
                                                                      **stamped))
            return r.error_code, r.base_offset
        if step in ("idempotent", "transactional"):
            transactional = step == "transactional"
            sequences = self.transactional_sequence if transactional else self.sequence
            if transactional and not self.open:
                await call(self.target, ADD_PARTITIONS, 3, {
                    "v3_and_below_transactional_id": self.txn, "v3_and_below_producer_id": self.txn_producer_id,
                    "v3_and_below_producer_epoch": self.epoch,
                    "v3_and_below_topics": [{"name": self.topic, "partitions": [0, 1]}]})
                self.open = True
            batch = build_batch(size, producer_id=self.txn_producer_id if transactional else self.producer_id,
                                producer_epoch=self.epoch if transactional else 0, base_sequence=sequences[p],
                                transactional=transactional, **stamped)
            r = await produce(self.target, self.topic, p, batch, transactional_id=self.txn if transactional else None)
            if r.error_code == 0:
                sequences[p] += n
            return r.error_code, r.base_offset
        if step in ("commit", "abort"):
            if not self.open:
                return ()
            answer = await call(self.target, END_TXN, 4, {
                "transactional_id": self.txn, "producer_id": self.txn_producer_id, "producer_epoch": self.epoch,
                "committed": step == "commit"})
            await decided(self.target, self.txn)
            self.open = False
            return (answer.error_code,)
        if step == "delete":
            end = await log_end(self.target, self.topic, p)
            return await delete_to(self.target, self.topic, p, max(0, end - extra))
        if step.startswith("fetch"):
            offsets = {p: k // 2, 1 - p: k // 3}
            return await self.fetch([p] if step == "fetch" else [0, 1], offsets, version, max_bytes, partition_max,
                                    isolation)
        target_ms = {"list": [-1, -2, -3][extra % 3],
                     "list by timestamp": self.start_ms + k * 1000 + (extra - 1) * 300}[step]
        found, starts = [await self.list_offsets(ms, isolation) for ms in (target_ms, -2)]
        if target_ms == -1 and isolation and self.snaps:
            found = {q: (error, max(offset, starts[q][1]), ms) for q, (error, offset, ms) in found.items()}
        return self._timestamp(target_ms), sorted(found.items())

    async def list_offsets(self, target_ms: int, isolation: int) -> dict:
        answer = await call(self.target, LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [{
            "name": self.topic, "partitions": [{"partition_index": q, "current_leader_epoch": -1,
                                                "timestamp": target_ms} for q in (0, 1)]}]})
        return {x.partition_index: (x.error_code, x.offset, self._timestamp(x.timestamp))
                for x in answer.topics[0].partitions}

    async def fetch(self, partitions: list[int], offsets: dict, version: int, max_bytes: int, partition_max: int,
                    isolation: int) -> tuple:
        answer = await call(self.target, FETCH, version, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes, "isolation_level": isolation,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": self.topic, "topic_id": self.topic_id if version >= 13 else bytes(16), "partitions": [
                {"partition": q, "current_leader_epoch": -1, "fetch_offset": offsets[q], "log_start_offset": -1,
                 "partition_max_bytes": partition_max, "last_fetched_epoch": -1} for q in partitions]}]})
        seen = [answer.error_code]
        for x in (x for r in answer.responses for x in r.partitions):
            # (whole batches: Kafka's records may end with part of one)
            batches = [(h.base_offset, h.records_count, h.attributes, h.size)
                       for _, h in split_batches(bytes(x.records or b""))]
            # The aborted transactions of the records read (each broker may name a few past them: Kafka's bound is
            # its sparse index's entry past the read, kbroker's too, but Kafka's search skips an exact first entry)
            read_to = batches[-1][0] + batches[-1][1] if batches else -1
            aborted = sorted(a.first_offset for a in x.aborted_transactions or [] if a.first_offset < read_to) \
                if isolation else None
            seen.append((x.partition_index, x.error_code, x.high_watermark,
                         max(x.last_stable_offset, x.log_start_offset) if self.snaps else x.last_stable_offset,
                         x.log_start_offset, aborted, batches))
        return tuple(seen)


def read_run(seed: int, steps: int) -> list[tuple]:
    rng = random.Random(seed)
    return [(i, rng.choice(READ_STEPS), rng.randrange(2), rng.choice(FETCH_VERSIONS), rng.randrange(1, 5),
             rng.randrange(40), rng.choice(BOUNDS), rng.choice(BOUNDS), rng.randrange(2), rng.randrange(4))
            for i in range(steps)]


@pytest.mark.parametrize("seed", [8, 20, 33])
async def test_a_run_of_reads(targets, topic, seed):
    run = read_run(seed, steps=80)
    start_ms = int(time.time() * 1000) - 600_000
    answers = {}
    for target in targets:
        reads = await ReadRun(target, topic, start_ms).start()
        answers[target.name] = [(step[1], await reads.step(*step)) for step in run]
    first_divergence(answers["kafka"], answers["kbroker"], seed)
