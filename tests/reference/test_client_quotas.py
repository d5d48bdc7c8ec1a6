"""AlterClientQuotas and DescribeClientQuotas side by side: what is stored and described, what is refused."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same, settled

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
