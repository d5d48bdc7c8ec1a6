"""DescribeAcls and DeleteAcls filters over a literal, a prefixed and a wildcard binding, side by side on the
SASL/ACL pair: which bindings each pattern type filter (ANY, MATCH, LITERAL, PREFIXED) finds, and what a
DeleteAcls of two filters that match the same binding answers and deletes."""

from __future__ import annotations

import pytest

from tests.reference.differential import same
from tests.waiting import settled
from tests.reference.test_authorization import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS, acl, call_as

pytestmark = pytest.mark.reference

TOPIC, ANY, MATCH, LITERAL, PREFIXED = 2, 1, 2, 3, 4
READ, WRITE = 3, 4


def _filter(name, pattern, principal=None, operation=ANY) -> dict:
    return {"resource_type_filter": TOPIC, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": principal, "host_filter": None, "operation": operation, "permission_type": ANY}


def _bindings(topic: str, user: str) -> list[dict]:
    return [acl(TOPIC, topic, user, READ), acl(TOPIC, topic[:12], user, READ, pattern=PREFIXED),
            acl(TOPIC, "*", user, WRITE)]


def _label(name: str, topic: str) -> str:
    """A resource name as the same words on both brokers (each test's topic name is its own)."""
    return {topic: "the topic", topic[:12]: "its prefix", "*": "*"}.get(name, "another")


def _found(answer, topic) -> list:
    return sorted((_label(r.resource_name, topic), r.pattern_type,
                   sorted((a.operation, a.permission_type) for a in r.acls)) for r in answer.resources)


FILTERS = {
    "ANY by name": lambda t, u: _filter(t, ANY, u),
    "MATCH by name": lambda t, u: _filter(t, MATCH, u),
    "LITERAL by name": lambda t, u: _filter(t, LITERAL, u),
    "PREFIXED by the prefix": lambda t, u: _filter(t[:12], PREFIXED, u),
    "PREFIXED by the full name": lambda t, u: _filter(t, PREFIXED, u),
    "LITERAL wildcard": lambda t, u: _filter("*", LITERAL, u),
    "MATCH of another name": lambda t, u: _filter(t + "-other", MATCH, u),
    "the user's, any name": lambda t, u: _filter(None, ANY, u),
}


@pytest.mark.parametrize("case", list(FILTERS))
async def test_describe_acls_by_pattern_filter(secured, topic, case):
    user = f"User:u-{topic[-6:]}"   # (a principal of this test's own: the pair is shared)

    async def scenario(target):
        created = await call_as("admin", target, CREATE_ACLS, 3, {"creations": _bindings(topic, user)})
        assert all(r.error_code == 0 for r in created.results), created
        try:
            mine = _filter(None, ANY, user)
            # (Kafka's broker describes ACLs from its metadata image: the new ones are there a moment later)
            await settled(lambda: call_as("admin", target, DESCRIBE_ACLS, 3, mine),
                          lambda d: sum(len(r.acls) for r in d.resources) == 3)
            answer = await call_as("admin", target, DESCRIBE_ACLS, 3, FILTERS[case](topic, user))
            return answer.error_code, _found(answer, topic)
        finally:
            await call_as("admin", target, DELETE_ACLS, 3, {"filters": [_filter(None, ANY, user)]})
    await same(secured, scenario)


async def test_delete_acls_with_two_filters_matching_one_binding(secured, topic):
    user = f"User:u-{topic[-6:]}"

    async def scenario(target):
        await call_as("admin", target, CREATE_ACLS, 3, {"creations": _bindings(topic, user)})
        mine = _filter(None, ANY, user)
        await settled(lambda: call_as("admin", target, DESCRIBE_ACLS, 3, mine),
                      lambda d: sum(len(r.acls) for r in d.resources) == 3)
        deleted = await call_as("admin", target, DELETE_ACLS, 3, {"filters": [
            _filter(topic, MATCH, user), _filter(topic, LITERAL, user, READ)]})
        left = await settled(lambda: call_as("admin", target, DESCRIBE_ACLS, 3, mine),
                             lambda d: sum(len(r.acls) for r in d.resources) < 3)
        await call_as("admin", target, DELETE_ACLS, 3, {"filters": [mine]})
        return ([(r.error_code, sorted((m.error_code, _label(m.resource_name, topic), m.pattern_type, m.operation)
                                       for m in r.matching_acls)) for r in deleted.filter_results],
                _found(left, topic))
    await same(secured, scenario)
