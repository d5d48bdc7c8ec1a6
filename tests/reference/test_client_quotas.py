"""AlterClientQuotas and DescribeClientQuotas side by side: what is stored and described, what is refused."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled

pytestmark = pytest.mark.reference

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49


def component(kind: str, name: str | None) -> dict:
    return {"entity_type": kind, "entity_name": name}


def quota(key: str, value: float) -> dict:
    return {"key": key, "value": value, "remove": False}


@pytest.mark.parametrize("case", ["a user's byte rate", "a user with a client id", "a fractional byte rate",
                                  "a rate of zero", "an unknown key", "a negative rate", "validate only",
                                  "removing what is not there", "no component", "an unknown entity type",
                                  "the default user's request percentage"])
async def test_client_quotas(targets, topic, case):
    user = f"u-{topic}"
    entity = {"a user with a client id": [component("user", user), component("client-id", "c")],
              "no component": [], "an unknown entity type": [component("group", "g")],
              "the default user's request percentage": [component("user", None)]}.get(case, [component("user", user)])
    ops = {"an unknown key": [quota("no_such_quota", 1)], "a negative rate": [quota("producer_byte_rate", -5)],
           "a fractional byte rate": [quota("producer_byte_rate", 10.5)],
           "a rate of zero": [quota("producer_byte_rate", 0)],
           "removing what is not there": [{"key": "producer_byte_rate", "value": 0, "remove": True}],
           "the default user's request percentage": [quota("request_percentage", 50.5)]}.get(
        case, [quota("consumer_byte_rate" if case == "a user with a client id" else "producer_byte_rate", 1024)])

    async def described():
        answer = await call(target_now[0], DESCRIBE_CLIENT_QUOTAS, 1, {
            "components": [{"entity_type": "user", "match_type": 1, "match": None} if default_user else
                           {"entity_type": "user", "match_type": 0, "match": user}], "strict": False})
        return answer.error_code, sorted(
            (sorted((c.entity_type, c.entity_name) for c in e.entity), sorted((v.key, v.value) for v in e["values"]))
            for e in answer.entries or [])

    target_now = []
    default_user = case == "the default user's request percentage"

    async def scenario(target):
        target_now[:] = [target]
        try:
            altered = await call(target, ALTER_CLIENT_QUOTAS, 1, {"entries": [{"entity": entity, "ops": ops}],
                                                                  "validate_only": case == "validate only"})
            # (Kafka's broker describes what its metadata image holds: the change lands a moment after the answer)
            stored = altered.entries[0].error_code == 0 and case != "validate only" and case != "removing what is not there"
            seen = await settled(described, lambda d: not stored or bool(d[1]))
            return [(e.error_code, e.error_message is not None) for e in altered.entries], seen
        finally:
            await call(target, ALTER_CLIENT_QUOTAS, 1, {"entries": [{"entity": entity, "ops": [
                {**op, "remove": True} for op in ops]}], "validate_only": False})
    await same(targets, scenario)


IP_CASES = {   # case -> (entity, ops)
    "an address": ([component("ip", "10.20.30.40")], [quota("connection_creation_rate", 5)]),
    "the default address": ([component("ip", None)], [quota("connection_creation_rate", 7)]),
    "a host name": ([component("ip", "localhost")], [quota("connection_creation_rate", 9)]),
    "an unresolvable host": ([component("ip", "no-such-host.invalid")], [quota("connection_creation_rate", 5)]),
    "an address with a user": ([component("ip", "10.20.30.41"), component("user", "u")],
                               [quota("connection_creation_rate", 5)]),
    "a byte rate for an address": ([component("ip", "10.20.30.42")], [quota("producer_byte_rate", 1024)]),
    "a connection rate for a user": ([component("user", "ip-u")], [quota("connection_creation_rate", 5)]),
    "a fractional connection rate": ([component("ip", "10.20.30.43")], [quota("connection_creation_rate", 2.5)]),
    "a connection rate beyond an int": ([component("ip", "10.20.30.44")], [quota("connection_creation_rate", 2**31)]),
    "a connection rate of zero": ([component("ip", "10.20.30.45")], [quota("connection_creation_rate", 0)]),
    "removing an unknown key": ([component("user", "ip-v")], [{"key": "no_such_quota", "value": 0, "remove": True}]),
    "one key twice": ([component("user", "ip-w")],
                      [quota("producer_byte_rate", 1024), quota("producer_byte_rate", 2048)]),
}


@pytest.mark.parametrize("case", list(IP_CASES))
async def test_address_quotas(targets, case):
    """KIP-612's IP entities beside the user and client-id ones: what is stored, described and refused."""
    entity, ops = IP_CASES[case]
    ip = next((c["entity_name"] for c in entity if c["entity_type"] == "ip"), "absent")
    target_now = []

    async def described():
        answer = await call(target_now[0], DESCRIBE_CLIENT_QUOTAS, 1, {"components": [
            {"entity_type": "ip", "match_type": 1 if ip is None else 0, "match": ip}], "strict": True})
        return answer.error_code, sorted(
            (sorted((c.entity_type, c.entity_name) for c in e.entity), sorted((v.key, v.value) for v in e["values"]))
            for e in answer.entries or [])

    async def scenario(target):
        target_now[:] = [target]
        try:
            altered = await call(target, ALTER_CLIENT_QUOTAS, 1, {"entries": [{"entity": entity, "ops": ops}],
                                                                  "validate_only": False})
            stored = altered.entries[0].error_code == 0 and ip != "absent"
            seen = await settled(described, lambda d: not stored or bool(d[1])) if ip != "absent" else None
            return [(e.error_code, e.error_message is not None) for e in altered.entries], seen
        finally:
            await call(target, ALTER_CLIENT_QUOTAS, 1, {"entries": [{"entity": entity, "ops": [
                {**op, "remove": True} for op in ops]}], "validate_only": False})
    await same(targets, scenario)


FILTERS = {   # case -> DescribeClientQuotas components
    "an address and a user": [{"entity_type": "ip", "match_type": 2, "match": None},
                              {"entity_type": "user", "match_type": 0, "match": "u"}],
    "an unknown entity type": [{"entity_type": "group", "match_type": 2, "match": None}],
    "an empty entity type": [{"entity_type": "", "match_type": 2, "match": None}],
    "the default with a name": [{"entity_type": "ip", "match_type": 1, "match": "10.0.0.1"}],
    "any with a name": [{"entity_type": "user", "match_type": 2, "match": "u"}],
    "exact without a name": [{"entity_type": "client-id", "match_type": 0, "match": None}],
    "an unknown match type": [{"entity_type": "user", "match_type": 7, "match": None}],
    "one type twice": [{"entity_type": "ip", "match_type": 2, "match": None},
                       {"entity_type": "ip", "match_type": 1, "match": None}],
    "a client id and an address": [{"entity_type": "client-id", "match_type": 1, "match": None},
                                   {"entity_type": "ip", "match_type": 2, "match": None}],
}


@pytest.mark.parametrize("case", list(FILTERS))
async def test_describe_filters_refused(targets, case):
    async def scenario(target):
        answer = await call(target, DESCRIBE_CLIENT_QUOTAS, 1, {"components": FILTERS[case], "strict": False})
        return answer.error_code, answer.error_message, answer.entries
    await same(targets, scenario)


MATCHES = {   # case -> DescribeClientQuotas components, given the test's user and client id
    "the user": lambda u, c: [("user", 0, u)],
    "the user and the client id": lambda u, c: [("user", 0, u), ("client-id", 0, c)],
    "the user and the default client id": lambda u, c: [("user", 0, u), ("client-id", 1, None)],
    "the user and any client id": lambda u, c: [("user", 0, u), ("client-id", 2, None)],
    "the client id": lambda u, c: [("client-id", 0, c)],
    "any user": lambda u, c: [("user", 2, None)],
    "any client id": lambda u, c: [("client-id", 2, None)],
    "no component": lambda u, c: [],
}


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("case", list(MATCHES))
async def test_describe_filters_match_as_kafkas(targets, topic, case, strict):
    """Four entities of the test's own (a user, the user with a client id, the user with the default client
    id, the client id alone), then a filter: which of them it matches, strictly (those with no other
    component) or not."""
    user, client = f"u-{topic}", f"c-{topic}"
    entities = [[component("user", user)], [component("user", user), component("client-id", client)],
                [component("user", user), component("client-id", None)], [component("client-id", client)]]
    filters = [{"entity_type": kind, "match_type": match_type, "match": match}
               for kind, match_type, match in MATCHES[case](user, client)]

    async def ours(target):
        answer = await call(target, DESCRIBE_CLIENT_QUOTAS, 1, {"components": filters, "strict": strict})
        return answer.error_code, answer.error_message, sorted(
            sorted((c.entity_type, c.entity_name or "<default>") for c in e.entity) for e in answer.entries
            if any(c.entity_name in (user, client) for c in e.entity))

    async def scenario(target):
        try:
            await call(target, ALTER_CLIENT_QUOTAS, 1, {"entries": [
                {"entity": entity, "ops": [quota("request_percentage", 1000 + i)]}
                for i, entity in enumerate(entities)],
                "validate_only": False})
            # (Kafka's broker describes what its metadata image holds: the change lands a moment after the answer)
            await settled(lambda: ours(target) if filters else call(target, DESCRIBE_CLIENT_QUOTAS, 1, {
                "components": [{"entity_type": "user", "match_type": 0, "match": user}], "strict": False}),
                lambda seen: len(seen[2] if filters else seen.entries) >= (1 if filters else 3))
            return await ours(target)
        finally:
            await call(target, ALTER_CLIENT_QUOTAS, 1, {"entries": [
                {"entity": entity, "ops": [{"key": "request_percentage", "value": 0, "remove": True}]}
                for entity in entities], "validate_only": False})
    await same(targets, scenario)


CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37


def new_topics(*specs: tuple[str, int]) -> list[dict]:
    return [{"name": name, "num_partitions": count, "replication_factor": 1, "assignments": [], "configs": []}
            for name, count in specs]


async def test_a_client_over_its_controller_mutation_rate(targets, topic):
    """KIP-599: a client id allowed 1 partition mutation a second (a bucket of 11, full at first) creates a topic of
    50 partitions, which empties the bucket past zero; what it asks next is refused THROTTLING_QUOTA_EXCEEDED
    at the versions that know the error (CreateTopics 6+, DeleteTopics 5+, CreatePartitions 3+) and done but
    throttled below them. Validate-only creation counts, as in Kafka."""
    from tests.reference.test_produce_fetch import create

    client = f"mut-{topic}"[:60]

    async def as_client(target, api, version, body):
        return await call(target, api, version, body, client_id=client)

    async def scenario(target):
        await create(target, f"{topic}-old", 2)   # (made before the quota, by another client id)
        entity = [component("client-id", client)]
        altered = await call(target, ALTER_CLIENT_QUOTAS, 1, {
            "entries": [{"entity": entity, "ops": [quota("controller_mutation_rate", 1)]}], "validate_only": False})
        assert altered.entries[0].error_code == 0
        try:
            # Kafka's controller applies the quota a moment after the answer: validate-only creations until it does
            first = await settled(lambda: as_client(target, CREATE_TOPICS, 7, {
                "topics": new_topics((f"{topic}-a", 50), (f"{topic}-b", 1)), "timeout_ms": 10000,
                "validate_only": True}), lambda a: a.topics[1].error_code != 0)
            seen = [("validate", [(t.error_code, t.error_message) for t in first.topics], first.throttle_time_ms > 0)]
            for api, version, body in [
                    (CREATE_TOPICS, 7, {"topics": new_topics((f"{topic}-c", 1)), "timeout_ms": 10000,
                                        "validate_only": False}),
                    (CREATE_PARTITIONS, 3, {"topics": [{"name": f"{topic}-old", "count": 3, "assignments": None}],
                                            "timeout_ms": 10000, "validate_only": False}),
                    (DELETE_TOPICS, 6, {"topics": [{"name": f"{topic}-old", "topic_id": bytes(16)},
                                                   {"name": f"{topic}-none", "topic_id": bytes(16)}],
                                        "timeout_ms": 10000}),
                    (CREATE_TOPICS, 5, {"topics": new_topics((f"{topic}-d", 1)), "timeout_ms": 10000,
                                        "validate_only": False}),
                    (CREATE_PARTITIONS, 2, {"topics": [{"name": f"{topic}-old", "count": 3, "assignments": None}],
                                            "timeout_ms": 10000, "validate_only": False})]:
                answer = await as_client(target, api, version, body)
                entries = answer.topics if api == CREATE_TOPICS else (
                    answer.results if api == CREATE_PARTITIONS else answer.responses)
                seen.append((api, version, sorted((e.name, e.error_code, e.error_message) for e in entries),
                             answer.throttle_time_ms > 10_000))
            return seen
        finally:
            await call(target, ALTER_CLIENT_QUOTAS, 1, {"entries": [{"entity": entity, "ops": [
                {"key": "controller_mutation_rate", "value": 0, "remove": True}]}], "validate_only": False})
    await same(targets, scenario)


ALTERATIONS = {   # case -> the entries of one validate-only AlterClientQuotas
    "one type twice: the last name holds": [([component("user", "a"), component("user", "b")],
                                              [quota("producer_byte_rate", 1024)])],
    "one key twice": [([component("user", "k")], [quota("producer_byte_rate", 1), quota("producer_byte_rate", 2)])],
    "an unknown type beside a user": [([component("user", "u"), component("group", "g")], [])],
    "an empty name": [([component("client-id", "")], [quota("consumer_byte_rate", 1024)])],
    "an address with a client id": [([component("client-id", "c"), component("ip", "10.0.0.9")], [])],
    "a byte rate past a long": [([component("user", "big")], [quota("producer_byte_rate", 1e20)])],
    "a negative request percentage": [([component("user", "neg")], [quota("request_percentage", -1)])],
    "two faults: the first in Kafka's order": [([component("user", "two")], [
        quota("consumer_byte_rate", 1.5), quota("no_such_quota", 1), quota("producer_byte_rate", -1)])],
    "one entity twice": [([component("user", "same")], [quota("producer_byte_rate", 1024)]),
                         ([component("user", "same")], [quota("consumer_byte_rate", 1024)])],
    "several entities, answered in Kafka's order": [
        ([], []), ([component("user", "o1")], []), ([component("client-id", "o2")], []),
        ([component("user", "o3"), component("client-id", "o4")], [])],
}


@pytest.mark.parametrize("case", list(ALTERATIONS))
async def test_alterations_are_checked_and_answered_as_kafka_does(targets, case):
    """Kafka's controller reads an entity as a map (a type given twice keeps its last name), checks a key given
    twice, the types and names, their combination, then the values, each in its maps' order, and answers one
    entry per entity in its results map's order."""
    async def scenario(target):
        answer = await call(target, ALTER_CLIENT_QUOTAS, 1, {"entries": [
            {"entity": entity, "ops": ops} for entity, ops in ALTERATIONS[case]], "validate_only": True})
        return [(e.error_code, e.error_message, [(c.entity_type, c.entity_name) for c in e.entity])
                for e in answer.entries]
    await same(targets, scenario)
