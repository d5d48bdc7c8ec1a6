"""How a ShareFetch answers (KIP-932), over raw frames: MinBytes and MaxWaitMs, the acquired records' ranges by
BatchSize and MaxRecords, which log batches go out, how MaxBytes is shared among partitions, and a session's
first answer."""

import time
import uuid

import pytest

from kbroker.client.connection import KafkaConnection
from tests.reference.differential import same
from tests.waiting import settled
from tests.reference.test_groups import coordinator_found, fill
from tests.reference.test_produce_fetch import create, produce
from tests.reference.test_share_groups import (FETCH, assigned_member, set_group_config_async, share_fetch,
                                               share_group_with_member, three_records_and_a_connection,
                                               topic_id_of)

pytestmark = pytest.mark.reference


async def test_a_share_fetch_waits_for_min_bytes_then_acquires_what_there_is(targets, topic):
    """MinBytes (Kafka's DelayedShareFetch.isMinBytesSatisfied): with less than that to acquire the fetch waits
    out MaxWaitMs and then acquires what there is; with enough it answers at once."""
    async def scenario(target):
        group, member, tid, conn = await three_records_and_a_connection(target, topic)
        seen = {}
        try:
            began = time.monotonic()
            answer = await conn.request(FETCH, 1, share_fetch(group, member, 0, tid, [0], max_wait=1500,
                                                              min_bytes=1 << 20))
            waited = time.monotonic() - began
            seen["less than min bytes"] = (answer.error_code, acquired(answer), waited >= 1.2)
            fill(target, topic, 1, per_partition=3)
            began = time.monotonic()
            answer = await conn.request(FETCH, 1, share_fetch(group, member, 1, tid, [], max_wait=20000,
                                                              min_bytes=20))
            seen["enough"] = (answer.error_code, acquired(answer), time.monotonic() - began < 10)
        finally:
            await conn.close()
        return seen
    await same(targets, scenario)


def acquired(answer) -> list:
    return [(p.partition_index, [(r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records])
            for t in answer.responses for p in t.partitions]


def batches_sent(answer) -> list:
    """The base offsets of the log batches each partition's records carry."""
    from kbroker.protocol.records import split_batches
    return [(p.partition_index, [h.base_offset for _, h in split_batches(bytes(p.records or b""))])
            for t in answer.responses for p in t.partitions]


@pytest.mark.parametrize("shape", [[10], [1] * 10, [3, 3, 3, 1]])
async def test_acquired_records_are_grouped_by_batch_size_at_log_batch_ends(targets, topic, shape):
    """ShareFetch's BatchSize: acquired records are answered in ranges that end at a log batch's end once
    they hold BatchSize records (a log batch is never split in the batch-optimized mode); MaxRecords stops
    at the log batch that reaches it, and the records answered are the log batches that hold the acquired
    ones, not those read past them. Ten records in log batches of the shape given, each (BatchSize,
    MaxRecords) read by a group of its own until all ten were acquired."""
    from kbroker.protocol.records import build_batch

    async def scenario(target):
        await create(target, topic)
        for n in shape:
            answer = await produce(target, topic, build_batch([(None, b"v", [])] * n))
            assert answer.error_code == 0, answer
        tid = await topic_id_of(target, topic)
        seen = {}
        for batch_size, max_records in [(2, 100), (4, 100), (2, 3)]:
            group, member = f"s-{topic}-{batch_size}-{max_records}", uuid.uuid4().hex
            await coordinator_found(target, group)
            assert await set_group_config_async(target, group) == 0
            await assigned_member(target, group, member, topic)
            conn = await KafkaConnection.open("127.0.0.1", target.port, client_id="member")
            fetches, sent = [], []
            try:
                for epoch in range(6):
                    request = share_fetch(group, member, epoch, tid, [0] if epoch == 0 else [], max_wait=1500,
                                          max_records=max_records)
                    request["batch_size"] = batch_size
                    answer = await conn.request(FETCH, 1, request)
                    fetches.append(acquired(answer))
                    sent.append(batches_sent(answer))
                    if sum(last - first + 1 for _, ranges in fetches[-1] for first, last, _ in ranges) == 0 \
                            or fetches[-1] and fetches[-1][0][1][-1][1] == 9:
                        break
            finally:
                await conn.close()
            seen[(batch_size, max_records)] = fetches, sent
        return seen
    await same(targets, scenario)


async def test_a_share_sessions_first_answer_names_its_partitions_with_or_without_records(targets, topic):
    """A member's first ShareFetch (the one that opens its session) answers every partition it could read, even
    with nothing to acquire (another member holds every record); a later fetch leaves out a partition with
    nothing new, as an incremental answer does."""
    async def scenario(target):
        group, member = await share_group_with_member(target, topic)
        other = uuid.uuid4().hex
        await assigned_member(target, group, other, topic)
        fill(target, topic, 1, per_partition=3)
        tid = await topic_id_of(target, topic)
        mine = await KafkaConnection.open("127.0.0.1", target.port, client_id="member")
        theirs = await KafkaConnection.open("127.0.0.1", target.port, client_id="other")

        def shown(answer):
            return answer.error_code, [(p.partition_index, p.error_code, len(p.acquired_records))
                                       for t in answer.responses for p in t.partitions]
        try:
            seen = {"all acquired": shown(await mine.request(FETCH, 1, share_fetch(group, member, 0, tid, [0],
                                                                                   max_wait=2000)))}
            seen["the other's first fetch"] = shown(await theirs.request(FETCH, 1, share_fetch(
                group, other, 0, tid, [0], max_wait=300)))
            seen["its next"] = shown(await theirs.request(FETCH, 1, share_fetch(group, other, 1, tid, [0])))
            return seen
        finally:
            await mine.close()
            await theirs.close()
    seen = await same(targets, scenario)
    assert seen["the other's first fetch"] == (0, [(0, 0, 0)]) and seen["its next"] == (0, [])


async def test_a_share_fetchs_bytes_are_shared_evenly_among_its_partitions(targets, topic):
    """A ShareFetch's MaxBytes is shared evenly among the partitions it may acquire from (Kafka's uniform
    strategy), the first partition in the session's rotation (by the request's epoch) reading a batch whole,
    and only the batches that hold acquired records go out: three partitions of four 400 KB batches read
    with MaxBytes 2,000,000 give one batch of each partition a fetch, where a first partition that took all
    the bytes would give four of one. The partitions' share states are loaded first (a session is opened and
    closed until its first answer names all three), as Kafka leaves a loading partition out of an answer."""
    from kbroker.protocol.records import build_batch

    async def scenario(target):
        await create(target, topic, 3)
        tid = await topic_id_of(target, topic)
        group, member = f"s-{topic}", uuid.uuid4().hex
        await coordinator_found(target, group)
        assert await set_group_config_async(target, group) == 0
        await assigned_member(target, group, member, topic)
        conn = await KafkaConnection.open("127.0.0.1", target.port, client_id="member")

        async def all_loaded():
            answer = await conn.request(FETCH, 1, share_fetch(group, member, 0, tid, [0, 1, 2]))
            await conn.request(FETCH, 1, share_fetch(group, member, -1))
            return answer
        first = await settled(all_loaded, lambda a: len(acquired(a)) == 3)
        assert len(acquired(first)) == 3
        for partition in range(3):
            for _ in range(4):
                answer = await produce(target, topic, build_batch([(None, b"v" * 1000, [])] * 400), partition)
                assert answer.error_code == 0, answer
        seen = []
        try:
            for epoch in range(5):
                request = share_fetch(group, member, epoch, tid, [0, 1, 2] if epoch == 0 else [], max_wait=1500,
                                      max_records=10000)
                request["max_bytes"] = 2_000_000
                answer = await conn.request(FETCH, 1, request)
                seen.append((sorted(acquired(answer)), sorted(batches_sent(answer))))
        finally:
            await conn.close()
        return seen
    seen = await same(targets, scenario)
    assert [a for a, _ in seen[:4]] == [[(p, [(400 * i, 400 * i + 399, 1)]) for p in range(3)] for i in range(4)]


async def test_a_closed_sessions_partitions_stay_loaded_while_its_connection_is_open(targets, topic):
    """A member that closes its share session (epoch -1) and opens another on the same connection finds its
    partition loaded (the new session's first answer names it at once) and gets its released records again,
    their delivery count grown: the share partitions stay loaded until a disconnect leaves the group with no
    session on the broker (kbroker forgot them at the close, and the reopening fetch, its partition loading
    again, named nothing)."""
    async def scenario(target):
        group, member, tid, conn = await three_records_and_a_connection(target, topic)
        try:
            first = await conn.request(FETCH, 1, share_fetch(group, member, 0, tid, [0], max_wait=2000))
            closed = await conn.request(FETCH, 1, share_fetch(group, member, -1))
            # (no wait: the partition is named at once; its records come back once their release is written,
            # which Kafka does after the close's answer)
            reopened = await conn.request(FETCH, 1, share_fetch(group, member, 0, tid, [0]))
            named = [partition for partition, _ in acquired(reopened)]
            got = [r for _, rs in acquired(reopened) for r in rs] or [r for _, rs in acquired(await conn.request(
                FETCH, 1, share_fetch(group, member, 1, max_wait=2000))) for r in rs]
            return {"first": acquired(first), "closed": closed.error_code, "named": named, "again": got}
        finally:
            await conn.close()
    seen = await same(targets, scenario)
    assert seen["named"] == [0] and seen["again"] == [(0, 2, 2)]
