"""Kafka's ACL rules without sockets: which ACLs apply to a resource, deny over allow, implied Describe,
super users, the no-ACL default, authorizeByResourceType, and the filters of DescribeAcls/DeleteAcls."""

import pytest

from kbroker.broker.security.authorizer import Authorizer
from kbroker.protocol.acls import (ALL, ALLOW, ALTER, ALTER_CONFIGS, ANY, CLUSTER, CLUSTER_NAME, CREATE, DENY, DESCRIBE,
                           DESCRIBE_CONFIGS, GROUP, LITERAL, MATCH, PREFIXED, READ, TOPIC, WRITE, AclBinding,
                           AclFilter, InvalidAcl, binding_from_json, binding_to_json, operation_code)

ALICE, BOB = "User:alice", "User:bob"


def acl(name, op=READ, permission=ALLOW, principal=ALICE, host="*", rtype=TOPIC, pattern=LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


def authorizer(*acls, **settings) -> Authorizer:
    a = Authorizer(**settings)
    a.load(acls)
    return a


def test_literal_prefixed_and_wildcard_acls_apply_to_a_topic():
    a = authorizer(acl("orders"), acl("pay-", pattern=PREFIXED, principal=BOB), acl("*", op=WRITE))
    assert a.authorize(ALICE, "10.0.0.1", READ, TOPIC, "orders")
    assert not a.authorize(ALICE, "10.0.0.1", READ, TOPIC, "orders2")   # literal means the exact name
    assert a.authorize(BOB, "10.0.0.1", READ, TOPIC, "pay-eu")
    assert not a.authorize(BOB, "10.0.0.1", READ, TOPIC, "pay")         # shorter than the prefix
    assert a.authorize(ALICE, "10.0.0.1", WRITE, TOPIC, "anything")     # the literal "*"
    assert not a.authorize(ALICE, "10.0.0.1", READ, GROUP, "orders")    # another resource type


def test_deny_wins_over_allow_whatever_pattern_carries_it():
    a = authorizer(acl("*", op=ALL), acl("secret-", permission=DENY, pattern=PREFIXED))
    assert a.authorize(ALICE, "h", READ, TOPIC, "public")
    assert not a.authorize(ALICE, "h", READ, TOPIC, "secret-plans")


def test_principal_and_host_must_match_or_be_wildcards():
    a = authorizer(acl("t", principal="User:*", host="10.0.0.1"))
    assert a.authorize(BOB, "10.0.0.1", READ, TOPIC, "t")
    assert not a.authorize(BOB, "10.0.0.2", READ, TOPIC, "t")


@pytest.mark.parametrize("granted, asked, allowed", [
    (READ, DESCRIBE, True), (WRITE, DESCRIBE, True), (ALTER, DESCRIBE, True), (CREATE, DESCRIBE, False),
    (ALTER_CONFIGS, DESCRIBE_CONFIGS, True), (READ, DESCRIBE_CONFIGS, False), (READ, WRITE, False),
])
def test_an_allow_implies_describe_as_in_kafka(granted, asked, allowed):
    assert authorizer(acl("t", op=granted)).authorize(ALICE, "h", asked, TOPIC, "t") is allowed


def test_a_deny_of_read_does_not_deny_describe():
    a = authorizer(acl("t", op=DESCRIBE), acl("t", op=READ, permission=DENY))
    assert a.authorize(ALICE, "h", DESCRIBE, TOPIC, "t")
    assert not a.authorize(ALICE, "h", READ, TOPIC, "t")


def test_super_users_and_the_no_acl_default():
    a = authorizer(acl("t", principal=BOB), super_users="User:admin; User:broker")
    assert a.authorize("User:broker", "h", WRITE, CLUSTER, CLUSTER_NAME)
    assert not a.authorize(ALICE, "h", READ, TOPIC, "free")
    everyone = authorizer(acl("t", principal=BOB), allow_if_no_acl=True)
    assert everyone.authorize(ALICE, "h", READ, TOPIC, "free")   # no ACL on "free" at all
    assert not everyone.authorize(ALICE, "h", READ, TOPIC, "t")  # "t" has ACLs, none for alice


def test_authorize_any_finds_an_allow_not_undone_by_a_deny():
    assert authorizer(acl("t", op=WRITE)).authorize_any(ALICE, "h", WRITE, TOPIC)
    assert not authorizer(acl("t", op=WRITE), acl("t", op=WRITE, permission=DENY)).authorize_any(ALICE, "h", WRITE,
                                                                                                   TOPIC)
    assert not authorizer(acl("t-", op=WRITE, pattern=PREFIXED),
                          acl("t", op=WRITE, permission=DENY, pattern=PREFIXED)).authorize_any(ALICE, "h", WRITE, TOPIC)
    assert not authorizer(acl("t", op=READ)).authorize_any(ALICE, "h", WRITE, TOPIC)


def test_replacing_one_resource_keeps_the_others():
    a = authorizer(acl("a"), acl("b"), acl("p", pattern=PREFIXED))
    a.replace(TOPIC, PREFIXED, "p", set())
    a.replace(TOPIC, LITERAL, "a", {acl("a", op=WRITE)})
    assert {(x.name, x.operation) for x in a.bindings()} == {("a", WRITE), ("b", READ)}
    assert not a.authorize(ALICE, "h", READ, TOPIC, "p1")


def test_filters_select_as_describe_and_delete_acls_do():
    acls = [acl("orders"), acl("*"), acl("ord", pattern=PREFIXED), acl("other"), acl("g", rtype=GROUP, principal=BOB)]
    a = authorizer(*acls)
    names = lambda f: sorted(x.name for x in a.bindings(f))  # noqa: E731
    assert names(AclFilter()) == ["*", "g", "ord", "orders", "other"]
    assert names(AclFilter(TOPIC, "orders", MATCH)) == ["*", "ord", "orders"]
    assert names(AclFilter(TOPIC, "orders", LITERAL)) == ["orders"]
    assert names(AclFilter(ANY, None, PREFIXED)) == ["ord"]
    assert names(AclFilter(principal=BOB)) == ["g"]


@pytest.mark.parametrize("bad, reason", [
    (acl("t", rtype=ANY), "resourceType"), (acl("t", pattern=MATCH), "patternType"), (acl("t", op=ANY), "operation"),
    (acl(""), "empty resource name"), (acl("other", rtype=CLUSTER), "kafka-cluster"), (acl("t", principal="alice"),
                                                                                        "principal"),
])
def test_bindings_kafka_refuses(bad, reason):
    with pytest.raises(InvalidAcl, match=reason):
        bad.validate()


def test_the_local_store_form_round_trips():
    one = acl("pay-", op=operation_code("IdempotentWrite"), permission=DENY, pattern=PREFIXED, host="10.1.2.3")
    assert binding_from_json(binding_to_json(one)) == one
