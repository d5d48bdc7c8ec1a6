"""Seeded random runs of streams group requests (KIP-1071), the same on Kafka and on kbroker, every answer
compared step by step (as tests/reference/test_sequences.py does for KIP-848 groups and transactions).

Members in a few processes heartbeat (reporting what they were last given, nothing, or at a stale or future
epoch), leave and rejoin, commit and fetch offsets at their epochs, and the group is described; the topology
has a stateless subtopology and a stateful one. SMALL: four members, the fourth in the first one's process, one
standby; LARGE: six members in four processes, two standbys. Epochs are compared relative to the first one
each run saw. The runs kept failed on the code before the fixes they found: SMALL 3 on the assignor (Kafka
recomputes each member's quota as members fill theirs, and breaks ties in its priority queues' and hash maps'
orders), SMALL 16 and 24 on a heartbeat at the previous epoch that reports no tasks (Kafka fences it: nothing
reported proves nothing), LARGE 202 on the order the assignor meets the members in (Kafka's TimelineHashMap of
them, then a HashMap: two members in one bucket tied). Afterwards 59 SMALL runs, 30 LARGE and 60 of nine
members with two standbys agreed, and 20 CHANGING runs (LARGE with the group's standbys set again) from the
start.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from tests.reference.differential import call
from tests.reference.test_groups import coordinator_found, set_group_config
from tests.reference.test_produce_fetch import create
from tests.reference.test_sequences import first_divergence
from tests.reference.test_streams_groups import beat, tasks_of
from tests.streams_requests import STREAMS_GROUP_DESCRIBE, STREAMS_GROUP_HEARTBEAT, heartbeat, join, subtopology

pytestmark = pytest.mark.reference

OFFSET_COMMIT, OFFSET_FETCH = 8, 9
UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH = 25, 110
STEPS = ["join", "report", "report", "report", "report", "silent", "stale", "ahead", "leave", "commit",
         "stale commit", "fetch", "describe", "report none"]
SMALL = {"processes": ["p0", "p1", "p2", "p0"], "partitions": (4, 2), "standbys": 1, "steps": 120}
LARGE = {"processes": ["p0", "p1", "p2", "p0", "p1", "p3"], "partitions": (6, 5), "standbys": 2, "steps": 200}
# (and the group's standbys set again now and then: 0, 1 or 2, which moves the group epoch and reassigns)
CHANGING = {**LARGE, "steps_drawn": STEPS + ["standbys"]}


def streams_run(seed: int, steps: int, members: int, drawn: list[str] = STEPS) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    return [(rng.choice(drawn), rng.randrange(members)) for _ in range(steps)]


async def _answers(target, topic: str, run, seed: int, processes: list[str], partitions: int) -> list:
    group, other = f"sq-{topic}", f"{topic}-b"
    ids = [random.Random(f"{seed}-{i}").randbytes(11).hex() for i in range(len(processes))]
    topology = [subtopology("0", sources=[topic]),
                subtopology("1", sources=[other], changelogs=[f"{group}-store-changelog"])]
    epoch = [0] * len(ids)
    owned: list[tuple[dict, dict]] = [({}, {}) for _ in ids]
    base = None

    def relative(e: int) -> int:
        return e - base if e > 0 and base is not None else e
    seen = []
    for step, m in run:
        member = ids[m]
        if step in ("commit", "stale commit"):
            answer = await call(target, OFFSET_COMMIT, 9, {
                "group_id": group, "generation_id_or_member_epoch": epoch[m] - (step == "stale commit"),
                "member_id": member, "group_instance_id": None, "topics": [
                    {"name": topic, "partitions": [{"partition_index": p, "committed_offset": 3,
                                                    "committed_leader_epoch": -1, "committed_metadata": ""}
                                                   for p in range(partitions)]}]})
            seen.append((step, m, [p.error_code for p in answer.topics[0].partitions]))
            continue
        if step == "standbys":
            count = len(seen) % 3
            assert await asyncio.to_thread(set_group_config, target, group, streams_num_standby_replicas=count,
                                           streams_initial_rebalance_delay_ms=0) == 0
            seen.append((step, count))
            continue
        if step == "fetch":
            answer = await call(target, OFFSET_FETCH, 9, {"groups": [{
                "group_id": group, "member_id": member, "member_epoch": epoch[m],
                "topics": [{"name": topic, "partition_indexes": [0, 1]}]}], "require_stable": False})
            seen.append((step, m, answer.groups[0].error_code))
            continue
        if step == "describe":
            g = (await call(target, STREAMS_GROUP_DESCRIBE, 0, {"group_ids": [group],
                                                                 "include_authorized_operations": False})).groups[0]
            seen.append((step, g.error_code, g.group_state, relative(g.group_epoch), relative(g.assignment_epoch),
                         sorted((ids.index(x.member_id), relative(x.member_epoch),
                                 tasks_of(x.assignment.active_tasks), tasks_of(x.assignment.standby_tasks),
                                 tasks_of(x.target_assignment.active_tasks),
                                 tasks_of(x.target_assignment.standby_tasks)) for x in g.members)))
            continue
        active, standby = owned[m]
        body = {
            "join": lambda: join(group, member, topology, process=processes[m]),
            "report": lambda: heartbeat(group, member, epoch[m], active=active, standby=standby, warmup={}),
            "report none": lambda: heartbeat(group, member, epoch[m], active={}, standby={}, warmup={}),
            "silent": lambda: heartbeat(group, member, epoch[m]),
            "stale": lambda: heartbeat(group, member, epoch[m] - 1),
            "ahead": lambda: heartbeat(group, member, epoch[m] + 1),
            "leave": lambda: heartbeat(group, member, -1),
        }[step]()
        answer = await call(target, STREAMS_GROUP_HEARTBEAT, 0, body)
        if base is None and answer.error_code == 0 and answer.member_epoch > 0:
            base = answer.member_epoch
        told = (tasks_of(answer.active_tasks), tasks_of(answer.standby_tasks))
        if answer.error_code == 0:   # (what a client keeps: its epoch, and the tasks it was last sent)
            epoch[m] = 0 if step == "leave" else answer.member_epoch
            if step == "leave":
                owned[m] = ({}, {})
            elif told[0] is not None:
                owned[m] = (told[0], told[1] or {})
        elif answer.error_code in (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH):   # a client rejoins at 0
            epoch[m], owned[m] = 0, ({}, {})
        seen.append((step, m, answer.error_code, relative(answer.member_epoch), told,
                     sorted(s.status_code for s in answer.status or ())))
    return seen


@pytest.mark.parametrize("shape, seed", [(SMALL, 1), (SMALL, 3), (SMALL, 16), (SMALL, 24), (LARGE, 202),
                                         (CHANGING, 400)])
async def test_a_streams_group_run(targets, topic, shape, seed):
    run = streams_run(seed, shape["steps"], len(shape["processes"]), shape.get("steps_drawn", STEPS))
    first, second = shape["partitions"]
    answers = {}
    for target in targets:
        await create(target, topic, first)
        await create(target, f"{topic}-b", second)
        group = f"sq-{topic}"
        await create(target, f"{group}-store-changelog", second)
        await coordinator_found(target, group)
        assert await asyncio.to_thread(set_group_config, target, group, streams_num_standby_replicas=shape["standbys"],
                                       streams_initial_rebalance_delay_ms=0) == 0
        await beat(target, heartbeat(group, "probe", 3))      # (until the group's shard is loaded)
        answers[target.name] = await _answers(target, topic, run, seed, shape["processes"], first)
    first_divergence(answers["kafka"], answers["kbroker"], seed)
