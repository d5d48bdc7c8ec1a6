"""KIP-848 consumer groups in the group coordinator, over a real __consumer_offsets log and a manual clock:
joining, reconciling, fencing by session and by rebalance timeout, reloading from the log."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kbroker.coordinators.group.consumer.model import ConsumerGroup, MemberState
from kbroker.protocol.errors import ErrorCode as E
from tests.unit.coordinators.test_group_coordinator import Harness

T_ID = b"\x07" * 16
SESSION, REBALANCE = 45000, 30000


@dataclass
class Topic:
    topic_id: bytes
    partitions: int
    is_internal: bool = False


@dataclass
class Owned:
    topic_id: bytes
    partitions: list[int]


class ConsumerHarness(Harness):
    def __init__(self, directory: str) -> None:
        super().__init__(directory)
        self.metadata = {"t": Topic(T_ID, 4), "other": Topic(b"\x08" * 16, 2)}
        self.coordinator.topics = lambda: self.metadata

    def reload(self):
        fresh = super().reload()
        fresh.topics = lambda: self.metadata
        return fresh

    def beat(self, member: str, epoch: int, *, group="g", topics=None, owned=None, coordinator=None,
             regex=None, instance=None, assignor=None):
        joining = epoch == 0
        return (coordinator or self.coordinator).consumer_group_heartbeat(
            version=1, group_id=group, member_id=member, member_epoch=epoch, instance_id=instance, rack_id=None,
            rebalance_timeout_ms=REBALANCE if joining else -1,
            subscribed_topic_names=(topics if topics is not None else (["t"] if regex is None else None))
            if joining else topics,
            subscribed_topic_regex=regex, server_assignor=assignor,
            topic_partitions=[] if joining else (None if owned is None else [Owned(T_ID, sorted(owned))]),
            client_id="client", client_host="/127.0.0.1")


def held(answer) -> list[int] | None:
    if answer["assignment"] is None:
        return None
    return sorted(p for t in answer["assignment"]["topic_partitions"] for p in t["partitions"])


@pytest.fixture
def h(tmp_path) -> ConsumerHarness:
    return ConsumerHarness(str(tmp_path))


def test_two_members_split_the_partitions_the_first_revoking_before_the_second_gets_them(h):
    a = h.beat("a", 0)
    assert (a["error_code"], a["member_epoch"], held(a)) == (0, 1, [0, 1, 2, 3])
    b = h.beat("b", 0)
    assert (b["member_epoch"], held(b)) == (2, [])                 # a still holds everything
    told = h.beat("a", 1, owned=[0, 1, 2, 3])
    assert (told["member_epoch"], len(held(told))) == (1, 2)       # revoke two, stay at epoch 1
    kept = held(told)
    assert h.beat("b", 2)["assignment"] is None                    # still withheld
    done = h.beat("a", 1, owned=kept)
    assert done["member_epoch"] == 2
    given = h.beat("b", 2)
    assert sorted(held(given) + kept) == [0, 1, 2, 3]
    group = h.coordinator.groups["g"]
    assert group.state == "Stable" and group.group_epoch == 2


def test_a_member_that_never_revokes_is_fenced_after_its_rebalance_timeout(h):
    h.beat("a", 0)
    h.beat("b", 0)
    h.beat("a", 1, owned=[0, 1, 2, 3])
    h.beat("b", 2)                                                 # b keeps heartbeating, a goes silent
    h.scheduler.advance(REBALANCE)
    group = h.coordinator.groups["g"]
    assert list(group.members) == ["b"]
    assert held(h.beat("b", 2, topics=["t"], owned=[])) == [0, 1, 2, 3]


def test_a_silent_member_is_fenced_at_its_session_timeout_and_told_so(h):
    h.beat("a", 0)
    h.scheduler.advance(SESSION)
    assert h.coordinator.groups["g"].members == {}
    assert h.beat("a", 1)["error_code"] == E.UNKNOWN_MEMBER_ID


def test_a_groups_own_session_timeout_and_heartbeat_interval_are_its_members(h):
    """consumer.session.timeout.ms and consumer.heartbeat.interval.ms set on the group (GROUP resource) decide
    its members' sessions and what they are told, from their next heartbeat on; other groups keep the broker's."""
    own = {"g": {"consumer.session.timeout.ms": "10000", "consumer.heartbeat.interval.ms": "7000"}}
    h.coordinator.group_configs = lambda group_id: own.get(group_id, {})
    assert h.beat("a", 0)["heartbeat_interval_ms"] == 7000
    assert h.beat("b", 0, group="other")["heartbeat_interval_ms"] == h.config.consumer_heartbeat_interval_ms
    h.scheduler.advance(10000)
    assert (h.coordinator.groups["g"].members, list(h.coordinator.groups["other"].members)) == ({}, ["b"])


def test_the_group_reloads_from_the_log_as_it_was(h):
    h.beat("a", 0)
    h.beat("b", 0)
    told = h.beat("a", 1, owned=[0, 1, 2, 3])
    before = h.coordinator.groups["g"]
    fresh = h.reload()
    after = fresh.groups["g"]
    assert isinstance(after, ConsumerGroup)
    assert (after.group_epoch, after.assignment_epoch, after.target, after.members) == (
        before.group_epoch, before.assignment_epoch, before.target, before.members)
    assert after.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # The reloaded coordinator carries on where the first left off.
    assert h.beat("a", 1, owned=held(told), coordinator=fresh)["member_epoch"] == 2


def test_a_members_commit_is_checked_against_its_epoch_and_survives_the_group(h):
    h.beat("a", 0)
    commit = lambda epoch, member="a": h.coordinator.commit_offsets(   # noqa: E731
        group_id="g", generation_id=epoch, member_id=member, group_instance_id=None, retention_time_ms=-1,
        offsets={("t", 0): (5, -1, "")}, partition_exists=lambda t, p: True)[("t", 0)]
    assert (commit(1), commit(0), commit(1, "stranger"), commit(-1, "")) == (
        E.NONE, E.STALE_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID)
    assert h.beat("a", -1)["member_epoch"] == -1
    assert commit(-1, "") == E.NONE                               # an empty group takes outside commits
    assert h.coordinator.delete_groups(["g"]) == {"g": E.NONE}
    assert "g" not in h.reload().groups


def test_an_empty_classic_group_becomes_a_consumer_group_with_its_offsets(h):
    h.coordinator.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                                 retention_time_ms=-1, offsets={("t", 1): (9, -1, "")},
                                 partition_exists=lambda t, p: True)
    assert h.beat("a", 0)["error_code"] == 0
    for coordinator in (h.coordinator, h.reload()):
        assert coordinator.fetch_offsets("g", [("t", 1)])[("t", 1)].offset == 9
        assert isinstance(coordinator.groups["g"], ConsumerGroup)


def test_a_regex_subscription_picks_up_a_new_topic_at_the_next_heartbeat(h):
    first = h.beat("a", 0, regex="t.*")
    assert held(first) == [0, 1, 2, 3]
    h.metadata["tail"] = Topic(b"\x09" * 16, 1)
    again = h.beat("a", 1)
    assert again["member_epoch"] == 2
    assert sum(len(t["partitions"]) for t in again["assignment"]["topic_partitions"]) == 5


def test_a_static_member_comes_back_under_a_new_id_with_its_partitions(h):
    h.beat("a", 0, instance="i-1")
    h.beat("b", 0)
    assert h.beat("b2", 0, instance="i-1")["error_code"] == E.UNRELEASED_INSTANCE_ID
    assert h.beat("a", -2, instance="i-1")["member_epoch"] == -2
    target = h.coordinator.groups["g"].target["a"]
    back = h.beat("a2", 0, instance="i-1")
    assert back["error_code"] == 0
    group = h.coordinator.groups["g"]
    # It takes the place of the member it was: same target, no rebalance of the others.
    assert "a" not in group.members and group.target == {"a2": target, "b": group.target["b"]}
    assert group.members["a2"].assigned == target and group.static_members == {"i-1": "a2"}


def test_offset_expiry_leaves_an_empty_share_group_and_an_empty_consumer_group_alone(h):
    h.beat("a", 0)
    h.beat("a", -1)
    h.coordinator.share_group_heartbeat(group_id="s", member_id="m", member_epoch=0, rack_id=None,
                                        subscribed_topic_names=["t"], client_id="c", client_host="/127.0.0.1")
    h.coordinator.share_group_heartbeat(group_id="s", member_id="m", member_epoch=-1, rack_id=None,
                                        subscribed_topic_names=None, client_id="c", client_host="/127.0.0.1")
    h.scheduler.advance(120_000)
    h.coordinator.expire_offsets()
    assert {g: type(group).__name__ for g, group in h.coordinator.groups.items()} == {
        "g": "ConsumerGroup", "s": "ShareGroup"}
    assert {g: type(group).__name__ for g, group in h.reload().groups.items()} == {
        "g": "ConsumerGroup", "s": "ShareGroup"}


def test_a_heartbeat_that_recomputes_the_target_sends_no_unchanged_assignment(h):
    """The assignment goes back only to a full heartbeat or when it changed (KIP-848): a recomputation in a
    member's partial heartbeat that leaves its partitions as they were sends none."""
    h.beat("a", 0)
    h.beat("b", 0, topics=["other"])
    h.metadata["other"] = Topic(b"\x08" * 16, 3)              # only b's topic grows
    again = h.coordinator.consumer_group_heartbeat(
        version=1, group_id="g", member_id="a", member_epoch=1, instance_id=None, rack_id=None,
        rebalance_timeout_ms=REBALANCE, subscribed_topic_names=None, subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=[Owned(T_ID, [0, 1, 2, 3])], client_id="client",
        client_host="/127.0.0.1")
    assert (again["error_code"], again["member_epoch"], again["assignment"]) == (0, 3, None)
