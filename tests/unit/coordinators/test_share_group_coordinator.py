"""Share groups in the group coordinator over a real __consumer_offsets log and a manual clock: the group, its
members, their targets and epochs are in the log, so a reloaded coordinator (a restart, a coordinator move)
knows every member at its epoch, and a member gone leaves nothing behind."""

from __future__ import annotations

import pytest

from kbroker.coordinators.group.share.model import ShareGroup
from kbroker.protocol.errors import ErrorCode as E
from tests.unit.coordinators.test_consumer_group_coordinator import T_ID, ConsumerHarness, Topic, held


class ShareHarness(ConsumerHarness):
    """The share coordinator's side is played by the test: what the group coordinator asks to initialize is
    kept in ``asked``, and ``initialize()`` reports it done, as the broker does once the state exists."""

    def __init__(self, directory: str) -> None:
        super().__init__(directory)
        self.asked: list[tuple[str, int, dict]] = []
        self.coordinator.initialize_share_state = lambda *asked: self.asked.append(asked)

    def reload(self):
        fresh = super().reload()
        fresh.initialize_share_state = lambda *asked: self.asked.append(asked)
        return fresh

    def share(self, member: str, epoch: int, topics=None, coordinator=None) -> dict:
        return (coordinator or self.coordinator).share_group_heartbeat(
            group_id="s", member_id=member, member_epoch=epoch, rack_id=None,
            subscribed_topic_names=topics if topics is not None else (["t"] if epoch == 0 else None),
            client_id="client", client_host="/127.0.0.1")

    def initialize(self, coordinator=None, ok: bool = True) -> None:
        coordinator = coordinator or self.coordinator
        for group_id, _, partitions in self.asked:
            report = coordinator.share_state_initialized if ok else coordinator.share_state_uninitialized
            assert report(group_id, partitions) == E.NONE
        self.asked.clear()


@pytest.fixture
def h(tmp_path) -> ShareHarness:
    return ShareHarness(str(tmp_path))


def members(group: ShareGroup) -> dict:
    return {m: (x.member_epoch, x.subscribed_topic_names, sorted(p for ps in x.assignment.values() for p in ps))
            for m, x in group.members.items()}


def test_a_member_is_assigned_its_partitions_once_their_state_is_initialized(h):
    """Kafka's order: the join is answered at once with nothing, the partitions are recorded initializing and
    asked for at the group's epoch; the first heartbeat after the state exists moves the epoch and assigns."""
    joined = h.share("a", 0)
    assert (joined["member_epoch"], held(joined)) == (1, [])
    assert h.asked == [("s", 1, {T_ID: frozenset({0, 1, 2, 3})})]
    group = h.coordinator.groups["s"]
    assert (group.share_partitions, set(group.initializing)) == ({}, {T_ID})
    waiting = h.share("a", 1)   # (being initialized: not asked again, nothing moves)
    assert (waiting["member_epoch"], held(waiting), len(h.asked)) == (1, None, 1)
    h.initialize()
    assert (group.share_partitions, group.initializing) == ({T_ID: ("t", frozenset({0, 1, 2, 3}))}, {})
    assigned = h.share("a", 1)
    assert (assigned["member_epoch"], held(assigned), h.asked) == (2, [0, 1, 2, 3], [])
    assert h.share("a", 2)["assignment"] is None   # (settled: nothing new)
    reloaded = h.reload().groups["s"]
    assert (reloaded.share_partitions, reloaded.initializing) == (group.share_partitions, {})


def test_a_failed_initialization_is_asked_again_at_the_next_heartbeat(h):
    h.share("a", 0)
    h.initialize(ok=False)
    assert h.coordinator.groups["s"].initializing == {}
    again = h.share("a", 1)
    assert (again["member_epoch"], h.asked) == (1, [("s", 1, {T_ID: frozenset({0, 1, 2, 3})})])


def test_an_initialization_lost_with_its_coordinator_is_asked_again_after_the_retry_interval(h):
    h.share("a", 0)
    h.asked.clear()   # (never answered: the coordinator moved)
    fresh = h.reload()
    assert set(fresh.groups["s"].initializing) == {T_ID}
    h.share("a", 1, coordinator=fresh)
    assert h.asked == []
    h.scheduler.advance(h.config.share_initialize_retry_interval_ms)
    h.share("a", 1, coordinator=fresh)
    assert h.asked == [("s", 1, {T_ID: frozenset({0, 1, 2, 3})})]


def test_partitions_added_to_a_topic_are_assigned_once_initialized(h):
    h.share("a", 0)
    h.initialize()
    h.share("a", 1)
    h.metadata["t"] = Topic(T_ID, 6)
    grown = h.share("a", 2)   # (the topic's metadata moved the epoch; only its initialized partitions go out)
    assert (grown["member_epoch"], held(grown)) == (3, None)
    assert h.asked == [("s", 3, {T_ID: frozenset({4, 5})})]
    h.initialize()
    assigned = h.share("a", 3)
    assert (assigned["member_epoch"], held(assigned)) == (4, [0, 1, 2, 3, 4, 5])


def test_deleting_a_group_deletes_what_is_being_initialized_too(h):
    h.share("a", 0)
    h.share("a", -1)
    assert h.coordinator.groups["s"].state_partitions() == {T_ID: ("t", frozenset({0, 1, 2, 3}))}


def test_a_reloaded_coordinator_knows_the_members_at_their_epochs(h):
    h.share("a", 0)
    h.initialize()
    a = h.share("a", 1)
    b = h.share("b", 0)
    a = h.share("a", a["member_epoch"])
    assert (a["member_epoch"], b["member_epoch"], sorted(held(a) + held(b))) == (3, 3, [0, 1, 2, 3])
    group = h.coordinator.groups["s"]
    fresh = h.reload()
    reloaded = fresh.groups["s"]
    assert members(reloaded) == members(group)
    assert (reloaded.group_epoch, reloaded.assignment_epoch, reloaded.metadata_hash, reloaded.share_partitions) == (
        group.group_epoch, group.assignment_epoch, group.metadata_hash, group.share_partitions)
    # The members carry on with the new coordinator at their epochs: no new epoch, no rejoin.
    again = h.share("a", 3, coordinator=fresh)
    assert (again["error_code"], again["member_epoch"]) == (E.NONE, 3)
    assert h.share("b", 1, coordinator=fresh)["error_code"] == E.FENCED_MEMBER_EPOCH


def test_the_sessions_of_reloaded_members_run_out_like_any(h):
    h.share("a", 0)
    h.initialize()
    h.share("b", 0)
    fresh = h.reload()
    for _ in range(45):
        h.scheduler.advance(1000)
        h.share("a", fresh.groups["s"].members["a"].member_epoch, coordinator=fresh)
    # b's partitions came back to a: b's expiry moved the group to epoch 3, and a's next heartbeat found the
    # target (a's alone) short of the initialized partitions, which moves it once more, as Kafka's does
    assert members(fresh.groups["s"]) == {"a": (4, ("t",), [0, 1, 2, 3])}


def test_a_member_leaving_moves_the_group_epoch_and_the_next_heartbeat_assigns(h):
    """As in Kafka: the leave writes the member's tombstones and the group's epoch; the assignment epoch stays
    until a remaining member's heartbeat computes the targets again."""
    h.share("a", 0)
    h.initialize()
    h.share("a", 1)
    h.share("b", 0)
    a = h.share("a", 2)   # (a keeps two of the four it held: the assignor is sticky)
    group = h.coordinator.groups["s"]
    assert (a["member_epoch"], held(a), group.group_epoch, group.assignment_epoch) == (3, [0, 1], 3, 3)
    h.share("b", -1)
    assert (group.group_epoch, group.assignment_epoch, sorted(group.target)) == (4, 3, ["a"])
    a = h.share("a", 3)   # (a's target falls short of the initialized partitions: one more epoch)
    assert (a["member_epoch"], held(a), group.group_epoch, group.assignment_epoch) == (5, [0, 1, 2, 3], 5, 5)
    reloaded = h.reload().groups["s"]
    assert (reloaded.group_epoch, reloaded.assignment_epoch, members(reloaded)) == (5, 5, members(group))


def test_a_member_that_left_is_gone_after_a_reload_and_an_empty_group_deletes_cleanly(h):
    h.share("a", 0)
    h.share("b", 0)
    h.share("b", -1)
    assert list(h.reload().groups["s"].members) == ["a"]
    h.share("a", -1)
    assert h.reload().groups["s"].members == {}
    assert h.coordinator.delete_groups(["s"]) == {"s": E.NONE}
    assert "s" not in h.reload().groups


def test_a_deleted_topic_leaves_the_groups_share_partitions(h):
    h.share("a", 0)
    h.initialize()
    h.share("a", 0, topics=["t", "other"])   # (a rejoin: "other" is recorded initializing)
    assert h.coordinator.remove_share_topic(T_ID) == 1
    group = h.coordinator.groups["s"]
    assert (group.share_partitions, set(group.initializing)) == ({}, {b"\x08" * 16})
    assert h.coordinator.remove_share_topic(T_ID) == 0
    reloaded = h.reload().groups["s"]
    assert (reloaded.share_partitions, set(reloaded.initializing)) == ({}, {b"\x08" * 16})


def test_a_groups_own_session_timeout_and_heartbeat_interval_are_its_members(h):
    """share.session.timeout.ms and share.heartbeat.interval.ms set on the group (GROUP resource) decide its
    members' sessions and what they are told, as Kafka reads them; a change applies from the next heartbeat."""
    own = {"share.session.timeout.ms": "10000", "share.heartbeat.interval.ms": "6000"}
    h.coordinator.group_configs = lambda group_id: own
    assert h.share("a", 0)["heartbeat_interval_ms"] == 6000
    own["share.heartbeat.interval.ms"] = "8000"
    assert h.share("a", 1)["heartbeat_interval_ms"] == 8000
    h.scheduler.advance(9999)
    assert list(h.coordinator.groups["s"].members) == ["a"]
    h.scheduler.advance(1)
    assert h.coordinator.groups["s"].members == {}
