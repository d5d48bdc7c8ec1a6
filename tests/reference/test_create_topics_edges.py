"""CreateTopics at its edges, side by side: manual replica assignments (gaps, a broker twice, a broker not there,
uneven replica counts, beside a partition count), defaults asked for with -1, a config given twice or without a
value, the same topic twice in one request, a name differing from an existing one only by '.' and '_', names no
topic may have; each refusal in Kafka 4.2's controller's words, and a request's answers in its order."""

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
    "assigned a broker not there": (-1, -1, lambda me: [assignment(0, [50])], []),
    "assigned no broker": (-1, -1, lambda me: [assignment(0, [])], []),
    "assigned beside a partition count": (2, -1, lambda me: [assignment(0, [me])], []),
    "the defaults": (-1, -1, lambda me: [], []),
    "a negative partition count": (-5, 1, lambda me: [], []),
    "no partitions": (0, 1, lambda me: [], []),
    "a zero replication factor": (1, 0, lambda me: [], []),
    "a replication factor below -1 and no partitions": (0, -2, lambda me: [], []),
    "a replication factor past the brokers": (1, 3, lambda me: [], []),
    "assigned beside a replication factor": (-1, 1, lambda me: [assignment(0, [me])], []),
    "assigned a partition twice": (-1, -1, lambda me: [assignment(0, [me]), assignment(0, [me])], []),
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
        message = t.error_message and t.error_message.replace(f"broker {me} ", "broker <me> ")
        return (t.error_code, message, t.num_partitions, t.replication_factor, retention,
                t.configs if t.error_code else None)
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


NAMES = {   # case -> the names of one request's topics, given the test's own
    "a name with a space": lambda topic: [topic + " x"],
    "a dot": lambda topic: ["."],
    "a name past 249 characters": lambda topic: [topic + "x" * 250],
    "the metadata log's name": lambda topic: ["__cluster_metadata"],
    "repeats, refusals and a good one": lambda topic: [
        f"{topic}-a", f"{topic}-b", "__cluster_metadata", f"{topic}-a", f"{topic}-c", f"{topic} bad", f"{topic}-b",
        f"{topic}-d", f"{topic}-a", f"{topic}-e"],
}


@pytest.mark.parametrize("case", list(NAMES))
async def test_names_refused_and_answered_in_kafkas_order(targets, topic, case):
    """Kafka 4.2's controller answers the topics it was given in the request's order, then each repeated name,
    then its own log's name: the latter two in the order of the Java hash sets that held them."""
    names = NAMES[case](topic)

    async def scenario(target):
        answer = await call(target, CREATE_TOPICS, 7, {"topics": [{
            "name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            for name in names], "timeout_ms": 10000, "validate_only": True})
        return [(t.name, t.error_code, t.error_message, t.configs if t.error_code else None) for t in answer.topics]
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
