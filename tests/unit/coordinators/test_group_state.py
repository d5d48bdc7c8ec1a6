"""The group state machine and metadata, driven by an injected clock (no test sleeps)."""

import pytest

from kbroker.coordinators.group.group import GroupMetadata, MemberMetadata
from kbroker.coordinators.group.state import GroupState, IllegalStateTransition

S = GroupState


def member(member_id, protocols=(("range", b"r"), ("roundrobin", b"rr")), instance=None, session_ms=10_000):
    return MemberMetadata(member_id, instance, "client", "/127.0.0.1", 30_000, session_ms, "consumer",
                          list(protocols))


@pytest.mark.parametrize("path", [
    [S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE, S.PREPARING_REBALANCE, S.EMPTY],
    [S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE],
    [S.DEAD],
])
def test_legal_paths(path):
    group = GroupMetadata("g")
    for i, state in enumerate(path):
        group.transition_to(state, now_ms=i)
    assert group.state is path[-1] and group.state_timestamp_ms == len(path) - 1


@pytest.mark.parametrize("start,target", [
    (S.EMPTY, S.STABLE), (S.EMPTY, S.COMPLETING_REBALANCE), (S.STABLE, S.EMPTY),
    (S.STABLE, S.COMPLETING_REBALANCE), (S.COMPLETING_REBALANCE, S.EMPTY), (S.DEAD, S.EMPTY),
])
def test_illegal_transitions_raise_and_leave_the_state(start, target):
    group = GroupMetadata("g", state=start)
    with pytest.raises(IllegalStateTransition):
        group.transition_to(target, now_ms=0)
    assert group.state is start


def test_every_state_lists_its_predecessors():
    assert all(state.valid_previous for state in GroupState)
    assert S.DEAD.valid_previous == frozenset(GroupState)


def test_protocol_vote_and_generation():
    group = GroupMetadata("g")
    group.transition_to(S.PREPARING_REBALANCE, 0)
    group.add(member("a", [("roundrobin", b"1"), ("range", b"2")]), 0)
    group.add(member("b", [("range", b"3"), ("roundrobin", b"4")]), 0)
    group.add(member("c", [("range", b"5"), ("sticky", b"6")]), 0)
    assert group.candidate_protocols() == {"range"}     # c does not support roundrobin
    group.init_next_generation(now_ms=5)
    assert (group.generation_id, group.protocol_name, group.state) == (1, "range", S.COMPLETING_REBALANCE)
    assert group.leader_id == "a"
    assert [m["metadata"] for m in group.member_metadata_for_leader()] == [b"2", b"3", b"5"]


def test_majority_vote_wins_among_common_protocols():
    group = GroupMetadata("g")
    group.add(member("a", [("roundrobin", b""), ("range", b"")]), 0)
    group.add(member("b", [("range", b""), ("roundrobin", b"")]), 0)
    group.add(member("c", [("range", b""), ("roundrobin", b"")]), 0)
    assert group.select_protocol() == "range"


def test_joining_needs_a_common_protocol_and_the_same_type():
    group = GroupMetadata("g")
    assert not group.supports_protocols("consumer", [])
    assert not group.supports_protocols("", ["range"])
    group.add(member("a", [("range", b"")]), 0)
    assert group.supports_protocols("consumer", ["range", "sticky"])
    assert not group.supports_protocols("consumer", ["sticky"])      # INCONSISTENT_GROUP_PROTOCOL
    assert not group.supports_protocols("connect", ["range"])


def test_leader_moves_when_it_leaves_and_an_empty_group_goes_empty():
    group = GroupMetadata("g")
    group.transition_to(S.PREPARING_REBALANCE, 0)
    group.add(member("a"), 0)
    group.add(member("b"), 0)
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("b")
    assert group.leader_id is None
    group.init_next_generation(now_ms=1)
    assert (group.state, group.generation_id, group.protocol_name) == (S.EMPTY, 1, None)


def test_sessions_expire_by_the_injected_clock():
    group = GroupMetadata("g")
    group.add(member("a", session_ms=1000), now_ms=0)
    group.add(member("b", session_ms=5000), now_ms=0)
    assert group.expired_members(999) == []
    assert [m.member_id for m in group.expired_members(1000)] == ["a"]
    group.members["a"].heartbeat(now_ms=900)
    assert [m.member_id for m in group.expired_members(1500)] == []
    assert sorted(m.member_id for m in group.expired_members(5000)) == ["a", "b"]  # a: 900 + 1000


def test_a_restarted_static_member_keeps_its_entry_and_assignment():
    group = GroupMetadata("g")
    group.add(member("old", instance="consumer-1"), 0)
    group.members["old"].assignment = b"partitions 0-2"
    replaced = group.replace_static_member("consumer-1", "new")
    assert replaced.assignment == b"partitions 0-2"
    assert list(group.members) == ["new"] and group.static_members == {"consumer-1": "new"}
    assert group.leader_id == "new"
