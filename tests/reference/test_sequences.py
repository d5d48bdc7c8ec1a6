"""Seeded random runs of requests, the same on Kafka and on kbroker, every answer compared step by step.

Single requests show an answer's edge; a run shows the state a coordinator keeps between answers. Each run is
drawn from its seed, so a divergence is reproducible from the seed alone and the failure prints the steps around
the first one. Every seed here failed on the code before the fixes of 2026-11-28 its runs found:
- KIP-848 consumer groups: four members heartbeating (joining, reporting, revoking, going stale or ahead,
  changing subscription and rack, naming the server assignor again, leaving), committing and fetching offsets at their epochs, and
  the group described. The range assignor makes each target assignment the members' sorted order, on both
  brokers; Kafka's uniform assignor breaks ties in Java's hash order of member ids, which kbroker's does not
  follow (test_consumer_groups checks which assignor a tie picks).
- Transactions: one transactional id through InitProducerId (with and without its producer), AddPartitionsToTxn,
  transactional Produce at v9 and v12 (transactions V2 adding the partition), stale epochs and sequence gaps,
  AddOffsetsToTxn, TxnOffsetCommit, EndTxn v4 and v5, DescribeTransactions and the last stable offset.
Epochs are compared relative to the first one each run saw (Kafka's group epoch may start one higher).
"""

from __future__ import annotations

import random

import pytest

from kbroker.protocol.records import build_batch
from tests.reference.differential import call
from tests.waiting import settled
from tests.reference.test_consumer_groups import beat, join, settled_member
from tests.reference.test_produce_fetch import create
from tests.reference.test_transaction_edges import decided
from tests.reference.test_transactional_offsets import begin

pytestmark = pytest.mark.reference

HEARTBEAT, DESCRIBE, OFFSET_COMMIT, OFFSET_FETCH = 68, 69, 8, 9
INIT, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT, DESCRIBE_TXNS, PRODUCE, LIST_OFFSETS = \
    22, 24, 25, 26, 28, 65, 0, 2
UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH = 25, 110
PARTITIONS = 4


def first_divergence(kafka: list, kbroker: list, seed: int) -> None:
    for i, (expected, got) in enumerate(zip(kafka, kbroker)):
        if expected != got:
            steps = "\n".join(f"  {j:3d} kafka   {kafka[j]}\n      kbroker {kbroker[j]}"
                              for j in range(max(0, i - 8), min(len(kafka), i + 2)))
            raise AssertionError(f"seed {seed}: kbroker differs from kafka at step {i}\n{steps}")
    assert len(kafka) == len(kbroker)


# ---------------------------------------------------------------------------------------------- KIP-848 groups
GROUP_STEPS = ["join", "beat", "beat", "beat", "report", "report", "report", "stale", "ahead", "leave", "commit",
               "stale commit", "fetch", "describe", "unsubscribe", "resubscribe", "report one", "rack", "other rack",
               "range"]   # (no step asks for uniform: its ties would follow Java's hash order, see the docstring)


def group_run(seed: int, steps: int, members: int) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    return [(rng.choice(GROUP_STEPS), rng.randrange(members)) for _ in range(steps)]


def _held(answer):
    if answer.assignment is None:
        return None
    return sorted(p for t in answer.assignment.topic_partitions for p in t.partitions)


async def _group_answers(target, topic: str, run, seed: int) -> list:
    group = f"g-{topic}"
    members = 1 + max(m for _, m in run)
    ids = [random.Random(f"{seed}-{i}").randbytes(11).hex() for i in range(members)]   # (sorted alike on both)
    epoch, owned = [0] * members, [[] for _ in range(members)]
    base = await settled_member(target, group, ids[0], [topic], PARTITIONS, server_assignor="range")
    epoch[0], owned[0] = base, list(range(PARTITIONS))
    topic_id = (await call(target, 3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})).topics[0].topic_id

    def relative(e: int) -> int:
        return e - base if e > 0 else e

    def heartbeat_of(step: str, m: int) -> dict:
        member = ids[m]
        return {
            "join": lambda: join(group, member, [topic], server_assignor="range"),
            "leave": lambda: beat(group, member, -1),
            "stale": lambda: beat(group, member, epoch[m] - 1),
            "ahead": lambda: beat(group, member, epoch[m] + 1),
            "unsubscribe": lambda: beat(group, member, epoch[m], subscribed_topic_names=[]),
            "resubscribe": lambda: beat(group, member, epoch[m], subscribed_topic_names=[topic]),
            "report": lambda: beat(group, member, epoch[m], topic_partitions=[
                {"topic_id": topic_id, "partitions": owned[m]}]),
            "report one": lambda: beat(group, member, epoch[m], topic_partitions=[
                {"topic_id": topic_id, "partitions": owned[m][:1]}]),
            "rack": lambda: beat(group, member, epoch[m], rack_id="r1"),
            "other rack": lambda: beat(group, member, epoch[m], rack_id="r2"),
            "range": lambda: beat(group, member, epoch[m], server_assignor="range"),
            "beat": lambda: beat(group, member, epoch[m]),
        }[step]()

    seen = []
    for step, m in run:
        if step == "commit" or step == "stale commit":
            answer = await call(target, OFFSET_COMMIT, 9, {
                "group_id": group, "generation_id_or_member_epoch": epoch[m] - (step == "stale commit"),
                "member_id": ids[m], "group_instance_id": None, "retention_time_ms": -1, "topics": [
                    {"name": topic, "partitions": [{"partition_index": p, "committed_offset": 3,
                                                    "committed_leader_epoch": -1, "committed_metadata": ""}
                                                   for p in range(PARTITIONS)]}]})
            seen.append((step, m, [p.error_code for p in answer.topics[0].partitions]))
        elif step == "fetch":
            answer = await call(target, OFFSET_FETCH, 9, {"groups": [{
                "group_id": group, "member_id": ids[m], "member_epoch": epoch[m],
                "topics": [{"name": topic, "partition_indexes": list(range(PARTITIONS))}]}], "require_stable": True})
            g = answer.groups[0]
            seen.append((step, m, g.error_code, [(p.error_code, p.committed_offset) for t in g.topics
                                                 for p in t.partitions]))
        elif step == "describe":
            g = (await call(target, DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False})
                 ).groups[0]
            seen.append((step, g.error_code, g.group_state, relative(g.group_epoch), relative(g.assignment_epoch),
                         g.assignor_name, sorted((ids.index(x.member_id), relative(x.member_epoch),
                                                  sorted(p for t in x.assignment.topic_partitions
                                                         for p in t.partitions),
                                                  sorted(p for t in x.target_assignment.topic_partitions
                                                         for p in t.partitions)) for x in g.members)))
        else:
            answer = await call(target, HEARTBEAT, 1, heartbeat_of(step, m))
            held = _held(answer)
            if answer.error_code == 0:   # (what a client keeps: the epoch, and the last assignment it was sent)
                epoch[m] = 0 if step == "leave" else answer.member_epoch
                owned[m] = [] if step == "leave" else held if held is not None else owned[m]
            elif answer.error_code in (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH):   # a client rejoins at 0
                epoch[m], owned[m] = 0, []
            seen.append((step, m, answer.error_code, relative(answer.member_epoch), held))
    return seen


@pytest.mark.parametrize("seed", [4, 6, 19])
async def test_a_kip_848_group_run(targets, topic, seed):
    run = group_run(seed, steps=150, members=4)
    answers = {}
    for target in targets:
        await create(target, topic, partitions=PARTITIONS)
        answers[target.name] = await _group_answers(target, topic, run, seed)
    first_divergence(answers["kafka"], answers["kbroker"], seed)


# ---------------------------------------------------------------------------------------------- transactions
TXN_STEPS = ["init", "init naming the producer", "add", "add", "add one", "produce", "produce", "produce unadded",
             "produce stale", "produce past a gap", "produce v12", "add offsets", "commit offsets", "commit",
             "abort", "commit v5", "abort v5", "end stale", "add stale", "describe", "stable offsets"]


def txn_run(seed: int, steps: int) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(TXN_STEPS) for _ in range(steps)]


async def _txn_answers(target, topic: str, run) -> list:
    txn, group, pid, epoch = await begin(target, topic, 2)
    base = epoch
    # (Kafka's group shard may still be loading after FindCoordinator found it)
    await settled(lambda: call(target, OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}],
                                                         "require_stable": False}),
                  lambda a: a.groups[0].error_code not in (14, 16))
    sequence = {0: 0, 1: 0}

    def relative(e: int):
        return e - base if e >= 0 else e
    seen = []
    for i, step in enumerate(run):
        partition = i % 2
        if step.startswith("init"):
            naming = step == "init naming the producer"
            answer = await call(target, INIT, 5, {"transactional_id": txn, "transaction_timeout_ms": 60000,
                                                  "producer_id": pid if naming else -1,
                                                  "producer_epoch": epoch if naming else -1})
            if answer.error_code == 0:
                pid, epoch, sequence = answer.producer_id, answer.producer_epoch, {0: 0, 1: 0}
            seen.append((step, answer.error_code, relative(answer.producer_epoch) if answer.error_code == 0 else None))
            await decided(target, txn)
        elif step in ("add", "add one", "add stale"):
            answer = await call(target, ADD_PARTITIONS, 3, {
                "v3_and_below_transactional_id": txn, "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch - (step == "add stale"),
                "v3_and_below_topics": [{"name": topic, "partitions": [partition] if step == "add one" else [0, 1]}]})
            seen.append((step, sorted((p.partition_index, p.partition_error_code)
                                      for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition)))
        elif step.startswith("produce"):
            batch = build_batch([(b"k", b"v%d" % i, [])], producer_id=pid,
                                producer_epoch=epoch - (step == "produce stale"), transactional=True,
                                base_sequence=sequence[partition] + (5 if step == "produce past a gap" else 0))
            answer = await call(target, PRODUCE, 12 if step == "produce v12" else 9, {
                "transactional_id": txn, "acks": -1, "timeout_ms": 5000, "topic_data": [
                    {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
            produced = answer.responses[0].partition_responses[0]
            if produced.error_code == 0:
                sequence[partition] += 1
            seen.append((step, partition, produced.error_code))
        elif step == "add offsets":
            answer = await call(target, ADD_OFFSETS, 3, {"transactional_id": txn, "producer_id": pid,
                                                         "producer_epoch": epoch, "group_id": group})
            seen.append((step, answer.error_code))
        elif step == "commit offsets":
            answer = await call(target, TXN_OFFSET_COMMIT, 3, {
                "transactional_id": txn, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
                "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
                    {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": i,
                                                    "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
            seen.append((step, [p.error_code for t in answer.topics for p in t.partitions]))
        elif step in ("commit", "abort", "commit v5", "abort v5", "end stale"):
            version = 5 if step.endswith("v5") else 4
            answer = await call(target, END_TXN, version, {"transactional_id": txn, "producer_id": pid,
                                                           "producer_epoch": epoch - (step == "end stale"),
                                                           "committed": step.startswith("commit")})
            bumped = version >= 5 and answer.producer_epoch >= 0
            if answer.error_code == 0 and bumped:   # (v5 names the producer the client goes on with)
                if answer.producer_id != pid:
                    sequence = {0: 0, 1: 0}
                pid, epoch = answer.producer_id, answer.producer_epoch
            seen.append((step, answer.error_code, relative(answer.producer_epoch) if bumped else None))
            await decided(target, txn)
        elif step == "describe":
            state = (await call(target, DESCRIBE_TXNS, 0, {"transactional_ids": [txn]})).transaction_states[0]
            seen.append((step, state.error_code, state.transaction_state, relative(state.producer_epoch),
                         sorted((t.topic, sorted(t.partitions)) for t in state.topics)))
        else:   # the last stable and the high watermark's offsets (Kafka answers the partitions in any order)
            offsets = []
            for isolation in (1, 0):
                answer = await call(target, LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": isolation,
                                                              "topics": [{"name": topic, "partitions": [
                                                                  {"partition_index": p, "current_leader_epoch": -1,
                                                                   "timestamp": -1} for p in (0, 1)]}]})
                offsets.append(sorted((p.partition_index, p.error_code, p.offset) for t in answer.topics
                                      for p in t.partitions))
            seen.append((step, *offsets))
    return seen


@pytest.mark.parametrize("seed", [1, 2, 4, 24])
async def test_a_transactional_run(targets, topic, seed):
    run = txn_run(seed, steps=120)
    answers = {target.name: await _txn_answers(target, topic, run) for target in targets}
    first_divergence(answers["kafka"], answers["kbroker"], seed)

