"""Offsets committed in a transaction, as raw frames side by side: AddOffsetsToTxn, TxnOffsetCommit and EndTxn,
what a group then has committed after a commit or an abort, and the errors of a commit out of turn."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

OFFSET_FETCH, FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 9, 10, 22, 25, 26, 28


async def coordinators_ready(target, txn: str, group: str) -> None:
    for key, key_type in ((txn, 1), (group, 0)):
        await settled(lambda: call(target, FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]}),
                      lambda a: a.coordinators[0].error_code == 0)


async def init(target, txn: str):
    answer = await settled(lambda: call(target, INIT_PRODUCER_ID, 4, {
        "transactional_id": txn, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}),
        lambda a: a.error_code == 0)
    return answer.producer_id, answer.producer_epoch


async def begin(target, topic: str, partitions: int) -> tuple[str, str, int, int]:
    """A topic of ``partitions``, and a transactional id and group of the test's own with their coordinators
    ready: (transactional id, group, producer id, epoch) after InitProducerId."""
    txn, group = f"txn-{topic}", f"g-{topic}"
    await create(target, topic, partitions)
    await coordinators_ready(target, txn, group)
    return (txn, group, *await init(target, txn))


async def committed(target, group: str, topic: str):
    answer = await call(target, OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
        {"name": topic, "partition_indexes": [0, 1]}]}], "require_stable": True})
    g = answer.groups[0]
    return g.error_code, [(p.partition_index, p.committed_offset, p.error_code) for t in g.topics
                          for p in t.partitions]


CASES = ["commit", "abort", "without AddOffsetsToTxn", "an old producer epoch", "an unknown producer id",
         "a partition the topic lacks", "an unknown topic", "a generation of a group that has none"]


@pytest.mark.parametrize("version", [3, 5])
@pytest.mark.parametrize("case", CASES)
async def test_offsets_in_a_transaction(targets, topic, case, version):
    """v3 (the client adds the group with AddOffsetsToTxn) and v5 (transactions V2: the commit adds it)."""
    async def scenario(target):
        txn, group, pid, epoch = await begin(target, topic, 2)
        seen = {}
        if case != "without AddOffsetsToTxn":
            added = await call(target, ADD_OFFSETS_TO_TXN, 3, {"transactional_id": txn, "producer_id": pid,
                                                               "producer_epoch": epoch, "group_id": group})
            seen["add"] = added.error_code
        partition = 7 if case == "a partition the topic lacks" else 0
        name = f"{topic}-none" if case == "an unknown topic" else topic
        commit = await settled(lambda: call(target, TXN_OFFSET_COMMIT, version, {
            "transactional_id": txn, "group_id": group,
            "producer_id": pid + 999 if case == "an unknown producer id" else pid,
            "producer_epoch": epoch - 1 if case == "an old producer epoch" else epoch,
            "generation_id": 3 if case == "a generation of a group that has none" else -1,
            "member_id": "m-1" if case == "a generation of a group that has none" else "",
            "group_instance_id": None,
            "topics": [{"name": name, "partitions": [{"partition_index": partition, "committed_offset": 5,
                                                      "committed_leader_epoch": -1, "committed_metadata": "m"}]}]}),
            # (Kafka's group coordinator answers NOT_COORDINATOR until its shard has loaded; a client retries)
            lambda a: a.topics[0].partitions[0].error_code not in (14, 15, 16))
        seen["txn offset commit"] = [(p.partition_index, p.error_code) for t in commit.topics for p in t.partitions]
        ended = await call(target, END_TXN, 5 if version == 5 else 3, {
            "transactional_id": txn, "producer_id": pid, "producer_epoch": epoch, "committed": case != "abort"})
        seen["end"] = ended.error_code
        seen["committed"] = await settled(lambda: committed(target, group, topic),
                                          lambda c: c[0] == 0 and all(e == 0 for _, _, e in c[1]))
        return seen
    await same(targets, scenario)
