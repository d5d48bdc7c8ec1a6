"""The group coordinator driven by a manual clock over a real __consumer_offsets log: no test sleeps."""

from __future__ import annotations

import struct

import pytest

from kbroker.broker.partitions.replica_manager import ReplicaManager
from kbroker.coordinators.group.coordinator import GroupConfig, GroupCoordinator
from kbroker.coordinators.group.state import GroupState
from kbroker.coordinators.internal_topic import InternalTopicStore
from kbroker.coordinators.scheduler import ManualScheduler
from kbroker.protocol.errors import ErrorCode as E
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager

PARTITIONS = 3
SESSION = 1000
REBALANCE = 5000


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class Harness:
    def __init__(self, directory: str, initial_delay: int = 0) -> None:
        self.log_manager = LogManager([directory], clock=lambda: self.scheduler.now_ms() / 1000)
        self.scheduler = ManualScheduler()
        self.replica_manager = ReplicaManager(0, self.log_manager)
        config = LogConfig(cleanup_policy="compact")
        for i in range(PARTITIONS):
            self.replica_manager.make_leader("__consumer_offsets", i, config)
        self.store = InternalTopicStore(self.replica_manager, "__consumer_offsets",
                                        lambda: self.scheduler.now_ms() / 1000)
        self.config = GroupConfig(offsets_partitions=PARTITIONS, min_session_timeout_ms=100,
                                  max_session_timeout_ms=60000, initial_rebalance_delay_ms=initial_delay,
                                  offsets_retention_ms=60_000)
        self.coordinator = GroupCoordinator(self.config, self.scheduler, self.store.append)
        self.topics = {"t": 6, "other": 2}

    def reload(self) -> GroupCoordinator:
        """A second coordinator rebuilt from the same log, as at broker start-up."""
        fresh = GroupCoordinator(self.config, self.scheduler, self.store.append)
        for i in range(PARTITIONS):
            for stored in self.store.records(i):
                fresh.replay_stored(i, stored)
        fresh.loaded()
        return fresh

    def join(self, group="g", member_id="", instance=None, protocols=None, session=SESSION, version=5,
             coordinator=None, protocol_type="consumer"):
        answers: list[dict] = []
        (coordinator or self.coordinator).join_group(
            group_id=group, member_id=member_id, group_instance_id=instance, client_id="client",
            client_host="/127.0.0.1", session_timeout_ms=session, rebalance_timeout_ms=REBALANCE,
            protocol_type=protocol_type,
            protocols=[("range", subscription("t"))] if protocols is None else protocols,
            require_known_member_id=version >= 4, respond=answers.append)
        return answers

    def join_new(self, group="g", **kw) -> list[dict]:
        """The v4+ dance: MEMBER_ID_REQUIRED, then join again with the given id."""
        first = self.join(group, **kw)
        assert first[0]["error_code"] == E.MEMBER_ID_REQUIRED
        return self.join(group, member_id=first[0]["member_id"], **kw)

    def sync(self, group, generation, member_id, assignments=None, instance=None, coordinator=None):
        answers: list[dict] = []
        (coordinator or self.coordinator).sync_group(
            group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance,
            protocol_type=None, protocol_name=None, assignments=assignments or {}, respond=answers.append)
        return answers

    def heartbeat(self, group, generation, member_id, instance=None, coordinator=None):
        return (coordinator or self.coordinator).heartbeat(group_id=group, generation_id=generation,
                                                          member_id=member_id, group_instance_id=instance)

    def commit(self, group, generation, member_id, offsets, retention=-1, metadata="", coordinator=None):
        return (coordinator or self.coordinator).commit_offsets(
            group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None,
            retention_time_ms=retention, offsets={tp: (o, -1, metadata) for tp, o in offsets.items()},
            partition_exists=lambda t, p: 0 <= p < self.topics.get(t, 0))

    def stable_group(self, n: int, group="g", **kw) -> list[str]:
        """n members joined in one generation and synced; returns member ids, leader first."""
        pending = [self.join(group, **kw)[0]["member_id"] for _ in range(n)]
        answers = [self.join(group, member_id=m, **kw) for m in pending]
        self.scheduler.advance(0)
        results = [a[0] for a in answers]
        leader = results[0]["leader"]
        ids = [leader] + [r["member_id"] for r in results if r["member_id"] != leader]
        generation = results[0]["generation_id"]
        assignments = {m: f"assignment-{m}".encode() for m in ids}
        for m in ids[1:]:
            self.sync(group, generation, m)
        assert self.sync(group, generation, leader, assignments)[0]["error_code"] == E.NONE
        assert self.coordinator.groups[group].state is GroupState.STABLE
        return ids


@pytest.fixture
def h(tmp_path):
    harness = Harness(str(tmp_path))
    yield harness
    harness.log_manager.shutdown()


def group_of(h, name="g"):
    return h.coordinator.groups[name]


# ---------------------------------------------------------------- joining
def test_v4_join_requires_a_member_id_then_completes_a_generation(h):
    first = h.join()
    assert first[0]["error_code"] == E.MEMBER_ID_REQUIRED and first[0]["member_id"].startswith("client-")
    member_id = first[0]["member_id"]
    answers = h.join(member_id=member_id)
    h.scheduler.advance(0)   # the initial delay (0 here) ends on the timer, never inline
    [result] = answers
    assert result["error_code"] == E.NONE and result["generation_id"] == 1
    assert result["leader"] == member_id and result["protocol_name"] == "range"
    assert [m["member_id"] for m in result["members"]] == [member_id]
    assert group_of(h).state is GroupState.COMPLETING_REBALANCE


def test_old_versions_get_a_member_id_at_once(h):
    answers = h.join(version=3)
    h.scheduler.advance(0)
    assert answers[0]["error_code"] == E.NONE and answers[0]["member_id"]


def test_initial_delay_gathers_members_arriving_within_it(tmp_path):
    h = Harness(str(tmp_path), initial_delay=300)
    parked = [h.join(version=3) for _ in range(2)]
    h.scheduler.advance(200)
    parked.append(h.join(version=3))   # extends the delay
    h.scheduler.advance(299)
    assert not any(parked)
    h.scheduler.advance(400)
    assert all(p and p[0]["generation_id"] == 1 for p in parked)
    leader = [p[0] for p in parked if p[0]["members"]]
    assert len(leader) == 1 and len(leader[0]["members"]) == 3
    h.log_manager.shutdown()


def test_protocol_chosen_by_vote_among_common_protocols(h):
    a = h.join(version=3, protocols=[("range", b"a"), ("roundrobin", b"a")])
    h.scheduler.advance(0)
    gen1 = a[0]
    # Two more prefer roundrobin; the rejoin of the first completes the join phase.
    b = h.join(version=3, protocols=[("roundrobin", b"b"), ("range", b"b")])
    c = h.join(version=3, protocols=[("roundrobin", b"c"), ("sticky", b"c")])
    a2 = h.join(member_id=gen1["member_id"], version=3, protocols=[("range", b"a"), ("roundrobin", b"a")])
    assert b[0]["protocol_name"] == c[0]["protocol_name"] == a2[0]["protocol_name"] == "roundrobin"
    assert b[0]["generation_id"] == 2


def test_no_common_protocol_is_inconsistent(h):
    h.stable_group(1)
    answers = h.join(version=3, protocols=[("sticky", b"")])
    assert answers[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("g2", version=3, protocols=[])[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("g3", version=3, protocol_type="")[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    other_type = h.join(version=3, protocol_type="connect")
    assert other_type[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize("session", [99, 60001])
def test_session_timeout_out_of_bounds(h, session):
    assert h.join(session=session)[0]["error_code"] == E.INVALID_SESSION_TIMEOUT


def test_bad_group_and_member_ids(h):
    assert h.join("")[0]["error_code"] == E.INVALID_GROUP_ID
    assert h.join("nope", member_id="ghost")[0]["error_code"] == E.UNKNOWN_MEMBER_ID
    h.stable_group(1)
    assert h.join(member_id="ghost")[0]["error_code"] == E.UNKNOWN_MEMBER_ID


def test_group_max_size(tmp_path):
    h = Harness(str(tmp_path))
    h.config = GroupConfig(**{**h.config.__dict__, "max_size": 2})
    h.coordinator = GroupCoordinator(h.config, h.scheduler, h.store.append)
    h.stable_group(2)
    assert h.join(version=3)[0]["error_code"] == E.GROUP_MAX_SIZE_REACHED
    h.log_manager.shutdown()


# ---------------------------------------------------------------- sync
def test_followers_wait_for_the_leaders_assignment(h):
    ids = h.stable_group(3)
    group = group_of(h)
    assert {m: group.members[m].assignment for m in ids} == {m: f"assignment-{m}".encode() for m in ids}
    # In Stable, a sync answers the stored assignment at once.
    again = h.sync("g", group.generation_id, ids[2])
    assert again[0]["assignment"] == f"assignment-{ids[2]}".encode()


def test_follower_sync_parks_and_leader_sync_releases_everyone(h):
    pending = [h.join(version=3) for _ in range(2)]
    h.scheduler.advance(0)
    results = [p[0] for p in pending]
    leader = results[0]["leader"]
    follower = next(r["member_id"] for r in results if r["member_id"] != leader)
    parked = h.sync("g", 1, follower)
    assert parked == []
    h.sync("g", 1, leader, {leader: b"L", follower: b"F"})
    assert parked[0] == {"error_code": E.NONE, "assignment": b"F", "protocol_type": "consumer",
                         "protocol_name": "range"}


def test_sync_errors(h):
    ids = h.stable_group(2)
    assert h.sync("g", 99, ids[0])[0]["error_code"] == E.ILLEGAL_GENERATION
    assert h.sync("g", 1, "ghost")[0]["error_code"] == E.UNKNOWN_MEMBER_ID
    assert h.sync("unknown", 1, ids[0])[0]["error_code"] == E.UNKNOWN_MEMBER_ID
    answers: list[dict] = []
    h.coordinator.sync_group(group_id="g", generation_id=1, member_id=ids[0], group_instance_id=None,
                             protocol_type="consumer", protocol_name="roundrobin", assignments={},
                             respond=answers.append)
    assert answers[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL


def test_new_member_during_sync_fails_parked_syncs_with_rebalance_in_progress(h):
    pending = [h.join(version=3) for _ in range(2)]
    h.scheduler.advance(0)
    follower = next(p[0]["member_id"] for p in pending if p[0]["member_id"] != p[0]["leader"])
    parked = h.sync("g", 1, follower)
    h.join(version=3)
    assert parked[0]["error_code"] == E.REBALANCE_IN_PROGRESS
    assert group_of(h).state is GroupState.PREPARING_REBALANCE


def test_leader_that_never_syncs_is_removed_after_the_rebalance_timeout(h):
    pending = [h.join(version=3) for _ in range(2)]
    h.scheduler.advance(0)
    leader = pending[0][0]["leader"]
    follower = next(p[0]["member_id"] for p in pending if p[0]["member_id"] != leader)
    parked = h.sync("g", 1, follower)
    for _ in range(REBALANCE // 500 - 1):   # the leader stays alive but never sends the assignment
        h.scheduler.advance(500)
        assert h.heartbeat("g", 1, leader) == E.NONE
    assert parked == []
    h.scheduler.advance(500)
    assert parked[0]["error_code"] == E.REBALANCE_IN_PROGRESS
    assert leader not in group_of(h).members and follower in group_of(h).members


# ---------------------------------------------------------------- heartbeats and sessions
def test_heartbeat_errors(h):
    ids = h.stable_group(2)
    assert h.heartbeat("g", 1, ids[0]) == E.NONE
    assert h.heartbeat("g", 7, ids[0]) == E.ILLEGAL_GENERATION
    assert h.heartbeat("g", 1, "ghost") == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("nope", 1, ids[0]) == E.UNKNOWN_MEMBER_ID
    h.join(version=3)
    assert h.heartbeat("g", 1, ids[1]) == E.REBALANCE_IN_PROGRESS


def test_session_expiry_removes_the_silent_member_and_rebalances(h):
    ids = h.stable_group(3)
    for _ in range(2):   # two members heartbeat every 400 ms; the third says nothing
        h.scheduler.advance(400)
        assert h.heartbeat("g", 1, ids[0]) == E.NONE
        assert h.heartbeat("g", 1, ids[1]) == E.NONE
    assert ids[2] in group_of(h).members
    h.scheduler.advance(400)
    assert ids[2] not in group_of(h).members
    assert group_of(h).state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat("g", 1, ids[0]) == E.REBALANCE_IN_PROGRESS
    a = h.join(member_id=ids[0], version=3)
    b = h.join(member_id=ids[1], version=3)
    assert a[0]["generation_id"] == b[0]["generation_id"] == 2


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout(h):
    ids = h.stable_group(2)
    rejoined = h.join(member_id=ids[0], version=3)   # the leader rejoins: a rebalance starts
    for _ in range(REBALANCE // 500 - 1):   # the other keeps heartbeating, but never rejoins
        h.scheduler.advance(500)
        assert h.heartbeat("g", 1, ids[1]) == E.REBALANCE_IN_PROGRESS
    assert rejoined == []
    h.scheduler.advance(500)
    assert rejoined[0]["generation_id"] == 2 and [m["member_id"] for m in rejoined[0]["members"]] == [ids[0]]
    assert ids[1] not in group_of(h).members


def test_pending_member_that_never_returns_expires(h):
    first = h.join()
    assert first[0]["member_id"] in group_of(h).pending_members
    h.scheduler.advance(SESSION)
    assert "g" not in h.coordinator.groups   # nothing was ever stored: the group is forgotten


# ---------------------------------------------------------------- leaving
def test_leave_group_batch_and_unknown_members(h):
    ids = h.stable_group(3)
    top, errors = h.coordinator.leave_group("g", [(ids[1], None), ("ghost", None), (ids[2], None)])
    assert top == E.NONE and errors == [E.NONE, E.UNKNOWN_MEMBER_ID, E.NONE]
    assert list(group_of(h).members) == [ids[0]]
    assert group_of(h).state is GroupState.PREPARING_REBALANCE
    assert h.coordinator.leave_group("nope", [("x", None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])


def test_last_member_leaving_empties_the_group(h):
    ids = h.stable_group(1)
    h.coordinator.leave_group("g", [(ids[0], None)])
    assert group_of(h).state is GroupState.EMPTY and group_of(h).generation_id == 2


# ---------------------------------------------------------------- static membership
def test_static_member_restart_gets_its_assignment_without_a_rebalance(h):
    ids = h.stable_group(2, instance=None)
    static = h.join(version=5, instance="instance-1")
    for m in ids:   # everyone rejoins: generation 2 with the static member
        h.join(member_id=m, version=5)
    old_static_id = static[0]["member_id"]
    generation = static[0]["generation_id"]
    leader = static[0]["leader"]
    assignments = {m: f"A-{m}".encode() for m in [*ids, old_static_id]}
    h.sync("g", generation, leader, assignments)
    if leader != old_static_id:
        h.sync("g", generation, old_static_id)
    assert group_of(h).state is GroupState.STABLE

    restarted = h.join(version=5, instance="instance-1")   # a new process: no member id
    new_id = restarted[0]["member_id"]
    assert restarted[0]["error_code"] == E.NONE and new_id != old_static_id
    assert restarted[0]["generation_id"] == generation and restarted[0]["members"] == []
    assert group_of(h).state is GroupState.STABLE
    assert h.sync("g", generation, new_id, instance="instance-1")[0]["assignment"] == f"A-{old_static_id}".encode()
    # The old process, if still alive, is fenced.
    assert h.heartbeat("g", generation, old_static_id, instance="instance-1") == E.FENCED_INSTANCE_ID
    assert h.heartbeat("g", generation, new_id, instance="instance-1") == E.NONE


def test_static_member_is_kept_through_a_rebalance_until_its_session_ends(h):
    static = h.join(version=5, instance="s", session=10_000)
    h.scheduler.advance(0)
    sid = static[0]["member_id"]
    h.sync("g", 1, sid, {sid: b"x"})
    # The static member's process is down (no heartbeats) for less than its session timeout.
    dynamic = h.join(version=3)     # rebalance; the static member does not rejoin in time
    h.scheduler.advance(REBALANCE - 1)
    assert dynamic == []
    h.scheduler.advance(1)          # the rebalance completes with the static member still in it
    assert dynamic[0]["generation_id"] == 2
    assert {m["member_id"] for m in dynamic[0]["members"]} == {sid, dynamic[0]["member_id"]}
    h.sync("g", 2, dynamic[0]["member_id"], {sid: b"kept", dynamic[0]["member_id"]: b"d"})
    assert group_of(h).members[sid].assignment == b"kept"
    h.scheduler.advance(10_000)     # only its session timeout removes it
    assert sid not in group_of(h).members


def test_leave_by_instance_id(h):
    static = h.join(version=5, instance="s")
    h.scheduler.advance(0)
    sid = static[0]["member_id"]
    assert h.coordinator.leave_group("g", [("wrong", "s")]) == (E.NONE, [E.FENCED_INSTANCE_ID])
    assert h.coordinator.leave_group("g", [("", "s")]) == (E.NONE, [E.NONE])
    assert sid not in group_of(h).members


# ---------------------------------------------------------------- offsets
def test_standalone_commit_with_generation_minus_one(h):
    results = h.commit("standalone", -1, "", {("t", 0): 10, ("t", 9): 5})
    assert results == {("t", 0): E.NONE, ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION}
    fetched = h.coordinator.fetch_offsets("standalone", [("t", 0), ("t", 1)])
    assert fetched[("t", 0)].offset == 10 and fetched[("t", 1)] is None
    assert h.coordinator.fetch_offsets("never", None) == {}


def test_member_commit_checks_generation_and_member(h):
    ids = h.stable_group(2)
    assert h.commit("g", 1, ids[0], {("t", 0): 1}) == {("t", 0): E.NONE}
    assert h.commit("g", 2, ids[0], {("t", 0): 1}) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.commit("g", 1, "ghost", {("t", 0): 1}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.commit("g", -1, "", {("t", 0): 1}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.commit("missing", 3, "m", {("t", 0): 1}) == {("t", 0): E.ILLEGAL_GENERATION}
    big = "x" * (h.config.offset_metadata_max_bytes + 1)
    assert h.commit("g", 1, ids[0], {("t", 1): 1}, metadata=big) == {("t", 1): E.OFFSET_METADATA_TOO_LARGE}


def test_commit_during_completing_rebalance_is_refused(h):
    pending = [h.join(version=3) for _ in range(2)]
    h.scheduler.advance(0)
    member = pending[0][0]["member_id"]
    assert h.commit("g", 1, member, {("t", 0): 1}) == {("t", 0): E.REBALANCE_IN_PROGRESS}


def test_offsets_and_groups_are_rebuilt_by_replay(h):
    ids = h.stable_group(2, instance=None)
    h.commit("g", 1, ids[0], {("t", 0): 42, ("t", 1): 7})
    h.commit("g", 1, ids[0], {("t", 0): 43})
    h.commit("solo", -1, "", {("other", 1): 5}, retention=10_000)
    fresh = h.reload()
    assert {tp: c.offset for tp, c in fresh.groups["g"].offsets.items()} == {("t", 0): 43, ("t", 1): 7}
    assert fresh.groups["solo"].offsets[("other", 1)].expire_timestamp == h.scheduler.now_ms() + 10_000
    group = fresh.groups["g"]
    assert group.state is GroupState.STABLE and group.generation_id == 1 and set(group.members) == set(ids)
    assert group.members[ids[1]].assignment == f"assignment-{ids[1]}".encode()
    # Members that never come back are removed by their session timeout, and the group empties.
    h.scheduler.advance(SESSION)
    assert group.state is GroupState.EMPTY and not group.members and group.generation_id == 2


def test_empty_group_offsets_expire_after_retention(h):
    ids = h.stable_group(1)
    h.commit("g", 1, ids[0], {("t", 0): 5})
    h.commit("standalone", -1, "", {("t", 0): 1})
    h.commit("explicit", -1, "", {("t", 1): 1}, retention=1_000)
    h.coordinator.leave_group("g", [(ids[0], None)])
    h.scheduler.advance(1_000)
    assert h.coordinator.expire_offsets() == 1
    assert "explicit" not in h.coordinator.groups
    h.scheduler.advance(59_000)
    assert h.coordinator.expire_offsets() == 2
    assert h.coordinator.groups == {}
    assert h.reload().groups == {}   # tombstones are in the log


def test_stable_group_offsets_do_not_expire(h):
    ids = h.stable_group(1)
    h.commit("g", 1, ids[0], {("t", 0): 5})
    h.scheduler.advance(30_000)
    assert h.heartbeat("g", 1, ids[0]) in (E.NONE, E.UNKNOWN_MEMBER_ID)
    assert h.coordinator.expire_offsets() == 0


def test_delete_groups(h):
    ids = h.stable_group(1)
    h.commit("empty", -1, "", {("t", 0): 1})
    assert h.coordinator.delete_groups(["g", "empty", "absent"]) == {
        "g": E.NON_EMPTY_GROUP, "empty": E.NONE, "absent": E.GROUP_ID_NOT_FOUND}
    assert h.coordinator.fetch_offsets("empty", None) == {}
    assert "empty" not in h.reload().groups
    assert ids[0] in group_of(h).members


def test_offset_delete_refuses_subscribed_topics(h):
    ids = h.stable_group(1)
    h.commit("g", 1, ids[0], {("t", 0): 1, ("other", 0): 2})
    error, results = h.coordinator.delete_offsets("g", [("t", 0), ("other", 0)])
    assert error == E.NONE and results == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): E.NONE}
    assert set(h.coordinator.fetch_offsets("g", None)) == {("t", 0)}
    assert h.coordinator.delete_offsets("absent", [("t", 0)])[0] == E.GROUP_ID_NOT_FOUND


def test_describe_and_list(h):
    ids = h.stable_group(2)
    described = h.coordinator.describe_group("g")
    assert described["group_state"] == "Stable" and described["protocol_data"] == "range"
    assert {m["member_id"] for m in described["members"]} == set(ids)
    assert all(m["member_assignment"] for m in described["members"])
    assert h.coordinator.describe_group("absent")["group_state"] == "Dead"
    h.commit("solo", -1, "", {("t", 0): 1})
    assert {g["group_id"] for g in h.coordinator.list_groups()} == {"g", "solo"}
    assert [g["group_id"] for g in h.coordinator.list_groups({"Empty"})] == ["solo"]


def test_shutdown_answers_parked_joins(h):
    h.stable_group(1)
    parked = h.join(version=3)
    h.coordinator.shutdown()
    assert parked[0]["error_code"] == E.NOT_COORDINATOR
    assert h.scheduler.pending() == 0


def test_a_deleted_topics_offsets_go_from_every_group(h):
    h.commit("a", -1, "", {("t", 0): 1, ("other", 0): 2})
    h.commit("b", -1, "", {("t", 1): 3})
    assert h.coordinator.remove_topic_offsets("t") == 2
    assert set(h.coordinator.fetch_offsets("a", None)) == {("other", 0)}
    assert h.reload().fetch_offsets("b", None) == {}
