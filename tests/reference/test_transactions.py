"""Transactions through confluent-kafka: what read_committed and read_uncommitted consumers read, the
last stable offset, fencing and the coordinator's timeout, on Kafka and on kbroker."""

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.reference.differential import same
from tests.waiting import settled
from tests.reference.test_produce_fetch import create, list_offset

pytestmark = pytest.mark.reference


def producer(target, txn_id, **extra) -> Producer:
    p = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": txn_id, "linger.ms": 0, **extra})
    p.init_transactions(30)
    return p


def read_all(target, topic, isolation, expect_end, timeout=20.0) -> list[tuple[int, bytes]]:
    """Every record a consumer with ``isolation`` reads of partition 0 until its position reaches ``expect_end``."""
    c = Consumer({"bootstrap.servers": target.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "isolation.level": isolation, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, 0)])
    out, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is None:
                out.append((m.offset(), m.value()))
            elif c.position([TopicPartition(topic, 0)])[0].offset >= expect_end:
                return out
        raise AssertionError(f"read {out} and never reached offset {expect_end}")
    finally:
        c.close()


async def settled_end(target, topic):
    """The log end once no transaction is open on partition 0 (the last stable offset caught up with the
    high watermark): Kafka's coordinator writes the markers after it answered EndTxn, kbroker before."""
    async def both():
        return await list_offset(target, topic, -1, isolation=1), await list_offset(target, topic, -1)
    stable, high = await settled(both, lambda a: a[0] == a[1])
    return stable


async def test_commit_and_abort_visibility(targets, topic):
    def scenario(target):
        import asyncio
        asyncio.run(create(target, topic))
        p = producer(target, f"t-{topic}")
        for values, commit in ((b"a1 a2 a3", True), (b"b1 b2", False), (b"c1", True)):
            p.begin_transaction()
            for v in values.split():
                p.produce(topic, v, partition=0)
            p.flush(10)
            p.commit_transaction(10) if commit else p.abort_transaction(10)
        end = asyncio.run(settled_end(target, topic))
        return {"end": end, "committed": read_all(target, topic, "read_committed", end[1]),
                "uncommitted": read_all(target, topic, "read_uncommitted", end[1])}
    seen = await same(targets, scenario)
    assert [v for _, v in seen["committed"]] == [b"a1", b"a2", b"a3", b"c1"]


async def test_an_open_transaction_holds_the_last_stable_offset(targets, topic):
    async def scenario(target):
        await create(target, topic)
        plain = Producer({"bootstrap.servers": target.bootstrap})
        plain.produce(topic, b"before", partition=0)
        plain.flush(10)
        p = producer(target, f"t-{topic}")
        p.begin_transaction()
        p.produce(topic, b"open", partition=0)
        p.flush(10)
        plain.produce(topic, b"after", partition=0)
        plain.flush(10)
        during = {"high watermark": await list_offset(target, topic, -1),
                  "last stable": await list_offset(target, topic, -1, isolation=1)}
        p.commit_transaction(10)
        stable = await settled_end(target, topic)
        after = {"high watermark": await list_offset(target, topic, -1), "last stable": stable}
        return during, after
    during, after = await same(targets, scenario)
    assert during["last stable"] == (0, 1) and after["last stable"] == (0, 4)


async def test_a_second_producer_fences_the_first(targets, topic):
    def scenario(target):
        import asyncio
        asyncio.run(create(target, topic))
        first = producer(target, f"t-{topic}")
        first.begin_transaction()
        first.produce(topic, b"zombie", partition=0)
        first.flush(10)
        second = producer(target, f"t-{topic}")
        try:
            first.produce(topic, b"zombie-2", partition=0)
            first.flush(10)
            first.commit_transaction(10)
            outcome = "committed"
        except KafkaException as exc:
            error = exc.args[0]
            outcome = {"name": error.name(), "fatal": error.fatal(), "abortable": error.txn_requires_abort()}
        second.begin_transaction()
        second.produce(topic, b"live", partition=0)
        second.commit_transaction(10)
        end = asyncio.run(settled_end(target, topic))
        return {"first": outcome, "read": [v for _, v in read_all(target, topic, "read_committed", end[1])]}
    seen = await same(targets, scenario)
    assert seen["read"] == [b"live"]


async def test_the_coordinator_aborts_a_transaction_past_its_timeout(targets, topic):
    def scenario(target):
        import asyncio
        asyncio.run(create(target, topic))
        p = producer(target, f"t-{topic}", **{"transaction.timeout.ms": 2000})
        p.begin_transaction()
        p.produce(topic, b"late", partition=0)
        p.flush(10)
        deadline = time.monotonic() + 30
        while asyncio.run(list_offset(target, topic, -1, isolation=1)) != (0, 2):   # data and abort marker
            assert time.monotonic() < deadline, "the transaction was never aborted"
            time.sleep(0.1)
        try:
            p.commit_transaction(10)
            outcome = "committed"
        except KafkaException as exc:
            error = exc.args[0]
            outcome = {"name": error.name(), "fatal": error.fatal(), "abortable": error.txn_requires_abort()}
        return {"commit": outcome, "read": read_all(target, topic, "read_committed", 2)}
    await same(targets, scenario)


@pytest.mark.parametrize("pattern", [None, "", "txn-a.*", "a", ".*-b-.*", "[", "TXN-A.*", "(?=txn-a).*",
                                     "[[:alpha:]]+-a-.*", "\\p{Ll}+-b-.*"])
async def test_list_transactions_by_transactional_id_pattern(targets, topic, pattern):
    """ListTransactions v2 (KIP-1152): only the transactional ids the pattern matches."""
    from tests.reference.differential import call

    async def scenario(target):
        await create(target, topic)
        producers = []
        for name in ("a", "b"):
            p = producer(target, f"txn-{name}-{topic}")
            p.begin_transaction()
            p.produce(topic, b"x")
            p.flush(30)
            producers.append(p)
        try:
            answer = await call(target, 66, 2, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                                                "transactional_id_pattern": pattern})
            return answer.error_code, sorted(t.transactional_id.split("-")[1] for t in answer.transaction_states
                                             if t.transactional_id.endswith(topic))
        finally:
            for p in producers:
                p.abort_transaction(30)
    await same(targets, scenario)


@pytest.mark.parametrize("version", [9, 10, 11, 12, 13])
async def test_a_transactional_write_to_a_partition_outside_the_transaction(targets, topic, version):
    """KIP-890 part 1: the leader asks the coordinator whether the partition is in the transaction; it is
    not, which Produce v11 hears as TRANSACTION_ABORTABLE and older versions as INVALID_TXN_STATE. From v12
    (KIP-890 part 2, transactions V2) the leader adds the partition to the transaction and writes."""
    from kbroker.protocol.records import build_batch
    from tests.reference.differential import call

    async def scenario(target):
        await create(target, topic)
        txn_id = f"txn-{version}-{topic}"
        await settled(lambda: call(target, 10, 3, {"key": txn_id, "key_type": 1}), lambda a: a.error_code == 0)
        init = await settled(lambda: call(target, 22, 4, {"transactional_id": txn_id, "transaction_timeout_ms": 10000,
                                                          "producer_id": -1, "producer_epoch": -1}),
                             lambda a: a.error_code == 0)
        meta = await call(target, 3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                          "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
        by = {"topic_id": bytes(meta.topics[0].topic_id)} if version >= 13 else {"name": topic}
        batch = build_batch([(None, b"v", [])], producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                            base_sequence=0, transactional=True)
        request = {"transactional_id": txn_id, "acks": -1, "timeout_ms": 5000,
                   "topic_data": [{**by, "partition_data": [{"index": 0, "records": batch}]}]}
        # (Kafka answers a retriable error while its coordinator or the partition settles: asked again)
        answer = await settled(lambda: call(target, 0, version, request),
                               lambda a: a.responses[0].partition_responses[0].error_code not in (6, 19))
        return answer.responses[0].partition_responses[0].error_code
    await same(targets, scenario)


async def test_transactions_v2_end_to_end(targets, topic):
    """KIP-890 part 2 as a transaction.version 2 client runs it: no AddPartitionsToTxn or AddOffsetsToTxn
    (Produce v12 and TxnOffsetCommit v5 add the partitions), EndTxn v5 returns the bumped epoch, a retried
    EndTxn with the epoch it was sent with is answered again, a late write of the ended transaction is
    fenced, the next transaction runs under the new epoch from sequence 0, and an abort of a transaction
    that added nothing still bumps the epoch."""
    from kbroker.protocol.records import build_batch
    from tests.reference.differential import call

    async def scenario(target):
        await create(target, topic)
        txn_id, group = f"v2-{topic}", f"g-v2-{topic}"
        features = await call(target, 18, 3, {"client_software_name": "differential", "client_software_version": "1"})
        finalized = {f.name: f.max_version_level for f in features.finalized_features}
        await settled(lambda: call(target, 10, 4, {"key_type": 1, "coordinator_keys": [txn_id]}),
                      lambda a: a.coordinators[0].error_code == 0)
        await settled(lambda: call(target, 10, 4, {"key_type": 0, "coordinator_keys": [group]}),
                      lambda a: a.coordinators[0].error_code == 0)
        init = await settled(lambda: call(target, 22, 5, {"transactional_id": txn_id, "transaction_timeout_ms": 10000,
                                                          "producer_id": -1, "producer_epoch": -1}),
                             lambda a: a.error_code == 0)
        pid, epoch = init.producer_id, init.producer_epoch

        async def produce(value, epoch, sequence):
            batch = build_batch([(None, value, [])], producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                                transactional=True)
            request = {"transactional_id": txn_id, "acks": -1, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
            answer = await settled(lambda: call(target, 0, 12, request),
                                   lambda a: a.responses[0].partition_responses[0].error_code not in (6, 19))
            return answer.responses[0].partition_responses[0].error_code

        async def end(commit, epoch):
            answer = await settled(lambda: call(target, 26, 5, {"transactional_id": txn_id, "producer_id": pid,
                                                               "producer_epoch": epoch, "committed": commit}),
                                   lambda a: a.error_code != 51)   # (CONCURRENT_TRANSACTIONS: asked again)
            return answer.error_code, answer.producer_id - pid if answer.producer_id >= 0 else None, \
                answer.producer_epoch - epoch if answer.error_code == 0 else answer.producer_epoch

        first = await produce(b"a", epoch, 0)
        offsets = await settled(lambda: call(target, 28, 5, {
            "transactional_id": txn_id, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                "committed_leader_epoch": -1, "committed_metadata": ""}]}]}),
            lambda a: a.topics[0].partitions[0].error_code not in (14, 15, 16, 51))
        committed = await end(True, epoch)
        retried = await end(True, epoch)
        late = await produce(b"late", epoch, 1)
        second = await produce(b"b", epoch + 1, 0)
        aborted = await end(False, epoch + 1)
        nothing_added = await end(False, epoch + 2), await end(True, epoch + 3)
        stable = await settled_end(target, topic)
        fetched = await settled(lambda: call(target, 9, 7, {"group_id": group, "topics": None,
                                                             "require_stable": True}),
                                lambda a: a.error_code == 0 and a.topics)
        return {"finalized transaction.version": finalized.get("transaction.version"),
                "first": first, "offsets": offsets.topics[0].partitions[0].error_code,
                "commit (error, id moved, epoch moved)": committed, "retry": retried, "late": late,
                "second": second, "abort": aborted, "abort with nothing added, then commit": nothing_added,
                "stable": stable,
                "committed offset": fetched.topics[0].partitions[0].committed_offset,
                "read_committed": [v for _, v in read_all(target, topic, "read_committed", stable[1])]}
    seen = await same(targets, scenario)
    assert seen["commit (error, id moved, epoch moved)"] == seen["retry"] == (0, 0, 1) and seen["late"] == 47
    assert seen["finalized transaction.version"] == 2 and seen["second"] == 0
    assert seen["abort with nothing added, then commit"] == ((0, 0, 1), (48, None, -1))
    assert seen["read_committed"] == [b"a"] and seen["committed offset"] == 1
