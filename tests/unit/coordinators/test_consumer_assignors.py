"""KIP-848's server-side assignors and one member's reconciliation step: pure functions, no broker."""

from __future__ import annotations

import random

import pytest

from kbroker.coordinators.group.consumer.assignors import MemberSpec, range_assign, uniform_assign
from kbroker.coordinators.group.consumer.model import ConsumerMember, MemberState
from kbroker.coordinators.group.consumer.reconcile import next_member

T1, T2 = b"\x01" * 16, b"\x02" * 16


def flat(assignment) -> set[tuple[bytes, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def check_complete(result, members, topics) -> None:
    """Every partition of a subscribed topic goes to exactly one member that subscribes to it."""
    owners: dict = {}
    for member_id, assignment in result.items():
        for tp in flat(assignment):
            assert tp not in owners, f"{tp} given twice"
            assert tp[0] in members[member_id].topics
            owners[tp] = member_id
    wanted = {(t, p) for t, n in topics.items() if any(t in m.topics for m in members.values()) for p in range(n)}
    assert set(owners) == wanted


@pytest.mark.parametrize("assign", [uniform_assign, range_assign])
def test_every_partition_goes_to_one_subscribed_member(assign):
    rng = random.Random(7)
    for _ in range(200):
        topics = {bytes([i]) * 16: rng.randint(1, 12) for i in range(1, rng.randint(2, 5))}
        members = {f"m{i}": MemberSpec(frozenset(rng.sample(sorted(topics), rng.randint(1, len(topics)))))
                   for i in range(rng.randint(1, 6))}
        check_complete(assign(members, topics), members, topics)


def test_uniform_balances_members_with_the_same_subscription_within_one_partition():
    topics = {T1: 7, T2: 4}
    members = {f"m{i}": MemberSpec(frozenset({T1, T2})) for i in range(3)}
    result = uniform_assign(members, topics)
    assert sorted(len(flat(a)) for a in result.values()) == [3, 4, 4]


def test_uniform_moves_only_what_balance_needs_when_a_member_joins():
    topics = {T1: 6}
    before = uniform_assign({"a": MemberSpec(frozenset({T1})), "b": MemberSpec(frozenset({T1}))}, topics)
    members = {m: MemberSpec(frozenset({T1}), current=before[m]) for m in ("a", "b")}
    members["c"] = MemberSpec(frozenset({T1}))
    after = uniform_assign(members, topics)
    assert [len(flat(after[m])) for m in ("a", "b", "c")] == [2, 2, 2]
    assert flat(after["a"]) <= flat(before["a"]) and flat(after["b"]) <= flat(before["b"])


def test_range_gives_co_partitioned_topics_the_same_partition_numbers():
    members = {"b": MemberSpec(frozenset({T1, T2})), "a": MemberSpec(frozenset({T1, T2})),
               "s": MemberSpec(frozenset({T1, T2}), instance_id="static-1")}
    result = range_assign(members, {T1: 5, T2: 5})
    assert result["s"] == {T1: frozenset({0, 1}), T2: frozenset({0, 1})}   # static members first
    assert result["a"] == {T1: frozenset({2, 3}), T2: frozenset({2, 3})}
    assert result["b"] == {T1: frozenset({4}), T2: frozenset({4})}


def test_a_member_revokes_before_it_moves_to_the_new_epoch():
    member = ConsumerMember("a", member_epoch=1, assigned={T1: frozenset({0, 1, 2})})
    told = next_member(member, 2, {T1: frozenset({0, 1})}, lambda t, p: "a", owned={T1: frozenset({0, 1, 2})})
    assert (told.state, told.member_epoch, told.assigned, told.pending_revocation) == (
        MemberState.UNREVOKED_PARTITIONS, 1, {T1: frozenset({0, 1})}, {T1: frozenset({2})})
    still = next_member(told, 2, {T1: frozenset({0, 1})}, lambda t, p: "a", owned={T1: frozenset({0, 1, 2})})
    assert still is told
    done = next_member(told, 2, {T1: frozenset({0, 1})}, lambda t, p: "a", owned={T1: frozenset({0, 1})})
    assert (done.state, done.member_epoch, done.previous_member_epoch, done.pending_revocation) == (
        MemberState.STABLE, 2, 1, {})


def test_a_member_revoking_that_leaves_a_topic_gives_it_up_at_once_at_its_epoch():
    member = ConsumerMember("a", member_epoch=1, assigned={T1: frozenset({0, 1, 2}), T2: frozenset({0})})
    told = next_member(member, 2, {T1: frozenset({0, 1}), T2: frozenset({0})}, lambda t, p: "a", owned=None)
    assert (told.state, told.assigned, told.pending_revocation) == (
        MemberState.UNREVOKED_PARTITIONS, {T1: frozenset({0, 1}), T2: frozenset({0})}, {T1: frozenset({2})})
    # unsubscribed from T2 while still revoking T1's 2: T2's partition joins the revocation, no new epoch
    left = next_member(told, 2, {T1: frozenset({0, 1}), T2: frozenset({0})}, lambda t, p: "a", owned=None,
                       subscribed=frozenset({T1}), subscription_changed=True)
    assert (left.state, left.member_epoch, left.assigned, left.pending_revocation) == (
        MemberState.UNREVOKED_PARTITIONS, 1, {T1: frozenset({0, 1})}, {T1: frozenset({2}), T2: frozenset({0})})
    # once revoked, the target's partitions of T2 are not given back: it no longer subscribes to T2
    done = next_member(left, 2, {T1: frozenset({0, 1}), T2: frozenset({0})}, lambda t, p: None,
                       owned={T1: frozenset({0, 1})}, subscribed=frozenset({T1}))
    assert (done.state, done.member_epoch, done.assigned) == (MemberState.STABLE, 2, {T1: frozenset({0, 1})})


def test_a_partition_another_member_still_holds_is_withheld_until_released():
    member = ConsumerMember("b", member_epoch=1)
    owners = {(T1, 2): "a"}
    waiting = next_member(member, 2, {T1: frozenset({2, 3})}, lambda t, p: owners.get((t, p)), owned={})
    assert (waiting.state, waiting.member_epoch, waiting.assigned) == (
        MemberState.UNRELEASED_PARTITIONS, 2, {T1: frozenset({3})})
    owners.clear()
    given = next_member(waiting, 2, {T1: frozenset({2, 3})}, lambda t, p: None, owned={T1: frozenset({3})})
    assert (given.state, given.assigned) == (MemberState.STABLE, {T1: frozenset({2, 3})})


def test_uniform_gives_a_partition_to_a_member_in_its_replicas_rack_when_balance_allows():
    racks = {(T1, p): frozenset({"east" if p % 2 == 0 else "west"}) for p in range(6)}
    members = {"a": MemberSpec(frozenset({T1}), rack="east"), "b": MemberSpec(frozenset({T1}), rack="west")}
    result = uniform_assign(members, {T1: 6}, lambda t, p: racks[(t, p)])
    assert result == {"a": {T1: frozenset({0, 2, 4})}, "b": {T1: frozenset({1, 3, 5})}}
    # Balance first: with three in the east and one member there, one eastern partition goes west.
    skewed = {(T1, p): frozenset({"east"}) for p in range(4)}
    result = uniform_assign(members, {T1: 4}, lambda t, p: skewed[(t, p)])
    assert sorted(len(a[T1]) for a in result.values()) == [2, 2]
    # Without racks on the members it is the plain assignment.
    plain = {m: MemberSpec(frozenset({T1})) for m in ("a", "b")}
    assert uniform_assign(plain, {T1: 6}, lambda t, p: racks[(t, p)]) == uniform_assign(plain, {T1: 6})


def test_uniform_hands_a_joining_member_the_partitions_of_its_rack():
    """Members join one at a time a group whose first member holds everything: what balance moves to each is
    what sits in its rack (the stickiness of the rest is kept)."""
    racks = {p: frozenset({("a", "b", "c")[p % 3]}) for p in range(6)}
    members = {"c": MemberSpec(frozenset({T1}), current={T1: frozenset(range(6))}, rack="c")}
    for joining in ("a", "b"):
        members[joining] = MemberSpec(frozenset({T1}), rack=joining)
        result = uniform_assign(members, {T1: 6}, lambda t, p: racks[p])
        members = {m: MemberSpec(s.topics, current=result[m], rack=s.rack) for m, s in members.items()}
    assert {m: sorted(spec.current[T1]) for m, spec in members.items()} == {"c": [2, 5], "a": [0, 3], "b": [1, 4]}
