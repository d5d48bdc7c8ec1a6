"""CreateTopics at its edges, side by side: manual replica assignments (gaps, a broker twice, a broker not there,
uneven replica counts, beside a partition count), defaults asked for with -1, a config given twice or without a
value, the same topic twice in one request, a name differing from an existing one only by '.' and '_'."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same

pytestmark = pytest.mark.reference

CREATE_TOPICS = 19


def assignment(index: int, brokers: list[int]) -> dict:
    return {"partition_index": index, "broker_ids": brokers}


CASES = {   # case -> (num_partitions, replication_factor, assignments as a function of the broker's id, configs)
    "two partitions assigned": (-1, -1, lambda me: [assignment(0, [me]), assignment(1, [me])], []),
    "assigned with a gap": (-1, -1, lambda me: [assignment(0, [me]), assignment(2, [me])], []),
    "assigned a broker twice": (-1, -1, lambda me: [assignment(0, [me, me])], []),
    "assigned a broker not there": (-1, -1, lambda me: [assignment(0, [me + 100])], []),
    "assigned no broker": (-1, -1, lambda me: [assignment(0, [])], []),
    "assigned beside a partition count": (2, -1, lambda me: [assignment(0, [me])], []),
    "the defaults": (-1, -1, lambda me: [], []),
    "a negative partition count": (-5, 1, lambda me: [], []),
    "a config given twice": (1, 1, lambda me: [], [("retention.ms", "1000"), ("retention.ms", "2000")]),
    "a config without a value": (1, 1, lambda me: [], [("retention.ms", None)]),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_create_topics_edges(targets, topic, case):
    partitions, replication, assigned, configs = CASES[case]

    async def scenario(target):
        me = 1 if target.name == "kafka" else 0
        answer = await call(target, CREATE_TOPICS, 7, {"topics": [{
            "name": topic, "num_partitions": partitions, "replication_factor": replication,
            "assignments": assigned(me), "configs": [{"name": n, "value": v} for n, v in configs]}],
            "timeout_ms": 10000, "validate_only": False})
        t = answer.topics[0]
        retention = [c.value for c in t.configs or [] if c.name == "retention.ms"]
        return t.error_code, t.error_message is not None, t.num_partitions, t.replication_factor, retention
    await same(targets, scenario)


async def test_the_same_topic_twice_and_a_colliding_name(targets, topic):
    async def scenario(target):
        spec = {"name": topic.replace("-", "_") + "_x", "num_partitions": 1, "replication_factor": 1,
                "assignments": [], "configs": []}
        twice = await call(target, CREATE_TOPICS, 7, {"topics": [spec, spec], "timeout_ms": 10000})
        made = await call(target, CREATE_TOPICS, 7, {"topics": [spec], "timeout_ms": 10000})
        colliding = await call(target, CREATE_TOPICS, 7, {"topics": [{**spec, "name": spec["name"].replace("_", ".")}],
                                                          "timeout_ms": 10000})
        return ([(t.error_code, t.error_message is not None) for t in twice.topics],
                made.topics[0].error_code, colliding.topics[0].error_code)
    await same(targets, scenario)


@pytest.mark.parametrize("case", ["one topic past the bound", "two topics past it together",
                                  "a small topic beside one past it", "past it, validate only"])
async def test_an_operation_past_what_the_controller_writes_at_once(targets, topic, case):
    """Kafka's controller refuses an operation of more than 10,000 records (a topic, each partition and each
    config one record) with POLICY_VIOLATION, for the whole request: a client cannot make 10^6 partitions
    at once. Nothing is made."""
    sizes = {"one topic past the bound": [20_000], "two topics past it together": [6_000, 6_000],
             "a small topic beside one past it": [1, 1_000_000], "past it, validate only": [20_000]}[case]

    async def scenario(target):
        answer = await call(target, CREATE_TOPICS, 7, {"topics": [{
            "name": f"{topic}-{i}", "num_partitions": n, "replication_factor": 1, "assignments": [], "configs": []}
            for i, n in enumerate(sizes)], "timeout_ms": 10000, "validate_only": case.endswith("validate only")})
        listed = await call(target, 3, 12, {"topics": [{"name": f"{topic}-{i}"} for i in range(len(sizes))],
                                            "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
        return ([(t.name.endswith(str(i)), t.error_code, t.error_message) for i, t in enumerate(answer.topics)],
                [t.error_code for t in listed.topics])
    await same(targets, scenario)
