"""Kafka's simple share assignor: balanced counts, partitions shared only when members outnumber them, and
sticky: a member keeps what it held unless the balance needs it elsewhere."""

from __future__ import annotations

from kbroker.coordinators.group.share.assignor import share_assign

T, U = b"T" * 16, b"U" * 16
ALL4 = {T: frozenset(range(4))}


def counts(assignment: dict) -> dict:
    return {m: sum(len(ps) for ps in a.values()) for m, a in assignment.items()}


def holders(assignment: dict, topic: bytes = T) -> dict:
    out: dict[int, list[str]] = {}
    for m in sorted(assignment):
        for p in assignment[m].get(topic, ()):
            out.setdefault(p, []).append(m)
    return dict(sorted(out.items()))


def test_a_joining_member_takes_only_what_the_balance_needs():
    one = share_assign({"a": frozenset({T})}, {T: 4}, ALL4)
    assert one == {"a": {T: frozenset(range(4))}}
    two = share_assign({"a": frozenset({T}), "b": frozenset({T})}, {T: 4}, ALL4, one)
    assert two == {"a": {T: frozenset({0, 1})}, "b": {T: frozenset({2, 3})}}
    three = share_assign({m: frozenset({T}) for m in "abc"}, {T: 4}, ALL4, two)
    assert counts(three) == {"a": 2, "b": 1, "c": 1}
    assert three["a"] == two["a"] and three["b"][T] < two["b"][T]   # only one partition moved, to c
    gone = share_assign({"b": frozenset({T}), "c": frozenset({T})}, {T: 4}, ALL4, three)
    assert gone["b"][T] >= three["b"][T] and gone["c"][T] >= three["c"][T] and counts(gone) == {"b": 2, "c": 2}


def test_members_outnumbering_partitions_share_them_evenly():
    five = {m: frozenset({T}) for m in "abcde"}
    assigned = share_assign(five, {T: 2}, {T: frozenset({0, 1})})
    # sharing ceil(5 / 2) = 3: six assignments, every member fetching from at least one partition
    assert sorted(len(ms) for ms in holders(assigned).values()) == [3, 3]
    assert sorted(counts(assigned).values()) == [1, 1, 1, 1, 2]
    again = share_assign(five, {T: 2}, {T: frozenset({0, 1})}, assigned)
    assert again == assigned


def test_only_initialized_partitions_are_assigned_and_the_rest_join_later():
    members = {"a": frozenset({T}), "b": frozenset({T})}
    first = share_assign(members, {T: 4}, {T: frozenset({0, 1})})
    assert holders(first) == {0: ["a"], 1: ["b"]}
    later = share_assign(members, {T: 4}, ALL4, first)
    assert later["a"][T] >= first["a"][T] and later["b"][T] >= first["b"][T] and counts(later) == {"a": 2, "b": 2}


def test_different_subscriptions_are_balanced_topic_by_topic():
    members = {"a": frozenset({T}), "b": frozenset({T, U}), "c": frozenset({U})}
    assigned = share_assign(members, {T: 4, U: 2}, {**ALL4, U: frozenset({0, 1})})
    assert counts({m: {T: a.get(T, ())} for m, a in assigned.items()}) == {"a": 2, "b": 2, "c": 0}
    assert counts({m: {U: a.get(U, ())} for m, a in assigned.items()}) == {"a": 0, "b": 1, "c": 1}
    # b drops T: its T partitions go to a, its U partition stays where it was
    changed = share_assign({**members, "b": frozenset({U})}, {T: 4, U: 2}, {**ALL4, U: frozenset({0, 1})},
                           assigned)
    assert changed["a"] == {T: frozenset(range(4))} and changed["b"] == {U: assigned["b"][U]}


def test_a_member_given_a_partition_it_holds_beyond_the_sharing_gives_it_up():
    before = {"a": {T: frozenset({0, 1})}, "b": {T: frozenset({0, 1})}}   # (held twice: a shrunken group)
    assigned = share_assign({"a": frozenset({T}), "b": frozenset({T})}, {T: 2}, {T: frozenset({0, 1})}, before)
    assert holders(assigned) == {0: ["a"], 1: ["b"]}
