"""The transactional APIs' answers to a client out of turn, as raw frames side by side: InitProducerId with a
timeout beyond the broker's bound, an empty id or a producer that is not the transaction's, AddPartitionsToTxn
of a missing topic or partition or under a stale epoch, AddOffsetsToTxn and EndTxn out of order, and a marker
from an older transaction coordinator."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_produce_fetch import create, init_producer_id, list_offset
from tests.reference.test_transactional_offsets import begin, coordinators_ready

pytestmark = pytest.mark.reference

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
WRITE_TXN_MARKERS, DESCRIBE_PRODUCERS = 27, 61


async def test_init_producer_id_naming_the_producer_it_restarts(targets, topic):
    """KIP-360: an InitProducerId naming a producer id and epoch bumps the epoch only if they are the transaction's
    current ones (or its last); any other id, a negative one too (only -1 names none), is PRODUCER_FENCED."""
    async def scenario(target):
        txn = f"txn-{topic}"
        await coordinators_ready(target, txn, f"g-{topic}")

        async def init(producer_id=-1, epoch=-1):
            answer = await settled(lambda: call(target, INIT_PRODUCER_ID, 5, {
                "transactional_id": txn, "transaction_timeout_ms": 60000, "producer_id": producer_id,
                "producer_epoch": epoch}), lambda a: a.error_code not in (14, 15, 16))   # (a coordinator not ready)
            return answer.error_code, answer.producer_id, answer.producer_epoch
        seen = {}
        error, producer_id, epoch = await init()
        seen["first"] = (error, epoch)
        for case, (pid, e) in {"another id": (producer_id + 1000, epoch), "a newer epoch": (producer_id, epoch + 5),
                               "an epoch below -1": (producer_id, -5), "an id below -1": (-128, 2),
                               "an id below -1 with no epoch": (-128, -1)}.items():
            seen[case] = (await init(pid, e))[0]
        error, _, bumped = await init(producer_id, epoch)
        seen["the current one"] = (error, bumped - epoch)
        return seen
    await same(targets, scenario)


def _txn_offsets(txn: str, group: str, producer_id: int, epoch: int, partitions: list[tuple[str, int]]) -> dict:
    """A TxnOffsetCommit of offset 1 for each (topic, partition), outside any generation."""
    return {"transactional_id": txn, "group_id": group, "producer_id": producer_id, "producer_epoch": epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [{"name": name, "partitions": [
                {"partition_index": p, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": None}
                for n, p in partitions if n == name]} for name in dict.fromkeys(n for n, _ in partitions)]}


@pytest.mark.parametrize("version", [3, 4, 5])
async def test_txn_offset_commit_of_a_group_not_added(targets, topic, version):
    """Offsets of a group the transaction has not added (no AddOffsetsToTxn): INVALID_TXN_STATE to a client
    before v4, TRANSACTION_ABORTABLE from v4 (KIP-890 part 1), and at v5 the group joins the transaction."""
    async def scenario(target):
        txn, group, producer_id, epoch = await begin(target, topic, 2)
        answer = await call(target, 28, version, _txn_offsets(txn, group, producer_id, epoch, [(topic, 0)]))
        return [p.error_code for t in answer.topics for p in t.partitions]
    await same(targets, scenario)


@pytest.mark.parametrize("case", ["a missing topic", "a missing partition", "a missing topic under a stale epoch",
                                  "a missing partition beside one that exists",
                                  "a missing partition beside one added to the transaction"])
async def test_txn_offset_commit_of_partitions_that_do_not_exist(targets, topic, case):
    """TxnOffsetCommit answers a partition that does not exist UNKNOWN_TOPIC_OR_PARTITION before it verifies the
    transaction, and commits the others as it would alone."""
    async def scenario(target):
        txn, group, producer_id, epoch = await begin(target, topic, 2)
        if case.endswith("added to the transaction"):
            added = await call(target, ADD_OFFSETS_TO_TXN, 3, {"transactional_id": txn, "producer_id": producer_id,
                                                               "producer_epoch": epoch, "group_id": group})
            assert added.error_code == 0, added
        named = {"a missing topic": [(f"{topic}-none", 0)], "a missing partition": [(topic, 9)],
                 "a missing topic under a stale epoch": [(f"{topic}-none", 0)]}.get(case, [(topic, 9), (topic, 0)])
        answer = await call(target, 28, 4, _txn_offsets(txn, group, producer_id,
                                                        epoch + 3 if "stale" in case else epoch, named))
        return [(t.name == topic, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics]
    await same(targets, scenario)


@pytest.mark.parametrize("case", ["a timeout beyond the bound", "a timeout of zero", "a negative timeout",
                                  "an empty transactional id", "a producer id with no epoch",
                                  "an epoch with no producer id", "idempotent: a producer id with no epoch"])
async def test_init_producer_id(targets, topic, case):
    async def scenario(target):
        txn = f"txn-{topic}"
        await coordinators_ready(target, txn, f"g-{topic}")
        body = {"transactional_id": "" if case == "an empty transactional id" else
                None if case.startswith("idempotent") else txn,
                "transaction_timeout_ms": {"a timeout beyond the bound": 900_001, "a timeout of zero": 0,
                                           "a negative timeout": -5}.get(case, 60000),
                "producer_id": 5 if case.endswith("a producer id with no epoch") else -1,
                "producer_epoch": 3 if case == "an epoch with no producer id" else -1}
        answer = await call(target, INIT_PRODUCER_ID, 4, body)
        return answer.error_code, answer.producer_id >= 0
    await same(targets, scenario)


CASES = ["a missing topic", "a missing partition", "a stale epoch", "an unknown producer id",
         "AddOffsetsToTxn under a stale epoch", "EndTxn abort of an empty transaction",
         "EndTxn under a stale epoch", "EndTxn twice", "EndTxn commit then abort"]


@pytest.mark.parametrize("case", CASES)
async def test_a_transaction_out_of_turn(targets, topic, case):
    async def scenario(target):
        txn, group, pid, epoch = await begin(target, topic, 1)
        seen = {}

        async def add(name=topic, partition=0, producer_id=pid, producer_epoch=epoch):
            answer = await settled(lambda: call(target, ADD_PARTITIONS_TO_TXN, 3, {
                "v3_and_below_transactional_id": txn, "v3_and_below_producer_id": producer_id,
                "v3_and_below_producer_epoch": producer_epoch,
                "v3_and_below_topics": [{"name": name, "partitions": [partition]}]}),
                lambda a: all(p.partition_error_code != 51 for t in a.results_by_topic_v3_and_below
                              for p in t.results_by_partition))   # (CONCURRENT_TRANSACTIONS: retried)
            return [(p.partition_index, p.partition_error_code) for t in answer.results_by_topic_v3_and_below
                    for p in t.results_by_partition]

        async def end(committed=True, producer_epoch=epoch):
            answer = await settled(lambda: call(target, END_TXN, 3, {
                "transactional_id": txn, "producer_id": pid, "producer_epoch": producer_epoch,
                "committed": committed}), lambda a: a.error_code != 51)
            return answer.error_code

        if case == "a missing topic":
            seen["add"] = await add(name=f"{topic}-none")
        elif case == "a missing partition":
            seen["add"] = await add(partition=9)
        elif case == "a stale epoch":
            seen["add"] = await add(producer_epoch=epoch - 1)
        elif case == "an unknown producer id":
            seen["add"] = await add(producer_id=pid + 999)
        elif case == "AddOffsetsToTxn under a stale epoch":
            answer = await call(target, ADD_OFFSETS_TO_TXN, 3, {"transactional_id": txn, "producer_id": pid,
                                                                "producer_epoch": epoch - 1, "group_id": group})
            seen["add offsets"] = answer.error_code
        elif case == "EndTxn abort of an empty transaction":
            seen["end"] = await end(committed=False)
        elif case == "EndTxn under a stale epoch":
            seen["add"] = await add()
            seen["end"] = await end(producer_epoch=epoch - 1)
        elif case == "EndTxn twice":
            seen["add"] = await add()
            seen["end"] = await end()
            seen["again"] = await end()
        elif case == "EndTxn commit then abort":
            seen["add"] = await add()
            seen["end"] = await end()
            seen["abort after"] = await end(committed=False)
        seen["end at last"] = await end(committed=False)
        return seen
    await same(targets, scenario)


DESCRIBE_TRANSACTIONS = 65


async def decided(target, txn: str) -> str:
    """The transaction's state once its markers are written (DescribeTransactions: no Prepare* left): Kafka
    writes them after it answers EndTxn, so what follows an end would otherwise race them."""
    answer = await settled(lambda: call(target, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn]}),
                           lambda a: not a.transaction_states[0].transaction_state.startswith("Prepare"))
    return answer.transaction_states[0].transaction_state


async def _add(target, txn: str, producer_id: int, epoch: int, topic: str) -> int:
    answer = await call(target, ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": txn, "v3_and_below_producer_id": producer_id,
        "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
    return answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


async def _fenced_producer(target, topic, after_a_v5_end=False):
    """A producer whose open transaction a second InitProducerId fenced and aborted: (txn, pid, its epoch,
    what was seen). The abort moves the epoch on once; the client still holds the one before. ``after_a_v5_end``:
    its transaction before ended with EndTxn v5 (transactions V2), which the client took the epoch from."""
    txn, _, pid, epoch = await begin(target, topic, 1)
    if after_a_v5_end:
        ended = await call(target, END_TXN, 5, {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch,
                                                "committed": False})
        pid, epoch = ended.producer_id, ended.producer_epoch
        await decided(target, txn)
    added = await _add(target, txn, pid, epoch, topic)
    fence = await call(target, INIT_PRODUCER_ID, 5, {"transactional_id": txn, "transaction_timeout_ms": 60000,
                                                     "producer_id": -1, "producer_epoch": -1})
    seen = {"added": added, "fence": fence.error_code, "after the fence": await decided(target, txn)}
    return txn, pid, epoch, seen


async def test_init_producer_id_retried_with_the_epoch_before_a_bump(targets, topic):
    """KIP-360 as Kafka 4.2 keeps it: an InitProducerId naming the epoch before the current one (the last) is a
    retry of the bump that made the current one, answered with it unbumped, for as long as no other bump came
    between; one naming the current epoch bumps it (and makes it the last); any other epoch is PRODUCER_FENCED,
    and a bump that named no producer keeps no last."""
    async def scenario(target):
        txn, pid, epoch, seen = await _fenced_producer(target, topic)

        async def init(producer_id=pid, producer_epoch=epoch):
            answer = await call(target, INIT_PRODUCER_ID, 5, {
                "transactional_id": txn, "transaction_timeout_ms": 60000, "producer_id": producer_id,
                "producer_epoch": producer_epoch})
            return answer.error_code, answer.producer_epoch - epoch if answer.error_code == 0 else None
        seen["the epoch before the fence"] = await init()
        seen["again"] = await init()
        seen["the current epoch"] = await init(producer_epoch=epoch + 1)
        seen["its retry"] = await init(producer_epoch=epoch + 1)
        seen["two epochs back"] = await init()
        seen["naming no producer"] = await init(-1, -1)
        seen["the epoch before that"] = await init(producer_epoch=epoch + 2)
        return seen
    seen = await same(targets, scenario)
    assert seen["the epoch before the fence"] == (0, 1) and seen["naming no producer"] == (0, 3)


@pytest.mark.parametrize("case", ["v4 after a fence", "v5 abort after a v4 commit"])
async def test_end_txn_is_checked_as_its_own_version_asks(targets, topic, case):
    """Kafka 4.2 checks an EndTxn by the request's version, not by how the transaction began: a v4 end (version 1)
    needs the current epoch, so the epoch a fence moved past is PRODUCER_FENCED; a v5 abort (version 2) ends even a
    transaction that is complete and bumps the epoch."""
    async def scenario(target):
        if case == "v4 after a fence":
            txn, pid, epoch, seen = await _fenced_producer(target, topic, after_a_v5_end=True)
            for committed in (True, False):
                answer = await call(target, END_TXN, 4, {"transactional_id": txn, "producer_id": pid,
                                                         "producer_epoch": epoch, "committed": committed})
                seen[f"committed={committed}"] = answer.error_code
            return seen
        txn, _, pid, epoch = await begin(target, topic, 1)
        seen = {"added": await _add(target, txn, pid, epoch, topic)}
        ended = await call(target, END_TXN, 4, {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch,
                                                "committed": True})
        seen["v4 commit"] = (ended.error_code, await decided(target, txn))
        aborted = await call(target, END_TXN, 5, {"transactional_id": txn, "producer_id": pid,
                                                  "producer_epoch": epoch, "committed": False})
        seen["v5 abort"] = (aborted.error_code, aborted.producer_epoch - epoch, await decided(target, txn))
        return seen
    await same(targets, scenario)


async def test_a_write_past_the_sequence_a_failed_verification_saw(targets, topic):
    """KIP-890's verification state at the partition leader: a transactional write to a partition the transaction
    has not added fails its verification, and leaves the sequence it carried as the lowest seen; once the partition
    is added, a write past that sequence is OUT_OF_ORDER_SEQUENCE_NUMBER and one at it is taken."""
    from kbroker.protocol.records import build_batch
    from tests.reference.test_produce_fetch import produce

    async def scenario(target):
        txn, _, pid, epoch = await begin(target, topic, 1)

        async def write(sequence):
            batch = build_batch([(b"k", b"v", [])], producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                                transactional=True)
            return (await produce(target, topic, batch, transactional_id=txn)).error_code
        seen = {"before the partition is added": await write(0), "added": await _add(target, txn, pid, epoch, topic)}
        seen["past the sequence seen"] = await write(3)
        seen["at it"] = await write(0)
        seen["then the next"] = await write(1)
        return seen
    seen = await same(targets, scenario)
    assert seen["past the sequence seen"] == 45 and seen["at it"] == 0


@pytest.mark.parametrize("case", ["a verification naming a partition twice", "a verification naming a topic twice",
                                  "an add naming a topic twice", "a v3 add naming a partition twice"])
async def test_add_partitions_to_txn_naming_one_partition_twice(targets, topic, case):
    """A verification (v4+, verify_only, the brokers' own ask) answers each partition once, however often it was
    named; an add answers what it was asked, twice where it was named twice. kbroker answered a verification as
    asked before 2026-11-28."""
    async def scenario(target):
        txn, _, pid, epoch = await begin(target, topic, 1)
        once = {"name": topic, "partitions": [0]}
        twice = [{"name": topic, "partitions": [0, 0]}] if "partition" in case else [once, once]
        if case.startswith("a v3"):
            answer = await call(target, ADD_PARTITIONS_TO_TXN, 3, {
                "v3_and_below_transactional_id": txn, "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": twice})
            return [[p.partition_error_code for p in t.results_by_partition]
                    for t in answer.results_by_topic_v3_and_below]
        answer = await call(target, ADD_PARTITIONS_TO_TXN, 5, {"transactions": [{
            "transactional_id": txn, "producer_id": pid, "producer_epoch": epoch,
            "verify_only": case.startswith("a verification"), "topics": twice}]})
        return answer.error_code, [[[p.partition_error_code for p in t.results_by_partition] for t in r.topic_results]
                                   for r in answer.results_by_transaction]
    await same(targets, scenario)


async def test_a_marker_from_an_older_transaction_coordinator(targets, topic):
    """Markers written straight for a producer (WriteTxnMarkers, as a transaction coordinator sends them): once a
    marker of coordinator epoch 5 is in, one of epoch 3 (a coordinator that lost its partition, writing late) is
    TRANSACTION_COORDINATOR_FENCED and not appended; epoch 5 again, or 6, is taken. DescribeProducers then names
    the last coordinator epoch."""
    async def scenario(target):
        await create(target, topic)
        init = await init_producer_id(target)
        seen = []
        for coordinator_epoch in (5, 3, 5, 6):
            marker = await call(target, WRITE_TXN_MARKERS, 1, {"markers": [{
                "producer_id": init.producer_id, "producer_epoch": init.producer_epoch, "transaction_result": True,
                "coordinator_epoch": coordinator_epoch, "topics": [{"name": topic, "partition_indexes": [0]}]}]})
            seen.append(marker.markers[0].topics[0].partitions[0].error_code)
        described = await call(target, DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
        producers = described.topics[0].partitions[0].active_producers
        return seen, [(p.producer_epoch, p.coordinator_epoch, p.current_txn_start_offset) for p in producers], \
            await list_offset(target, topic, -1)
    seen = await same(targets, scenario)
    assert seen[0] == [0, 52, 0, 0] and seen[2] == (0, 3)
