"""Share groups in the group coordinator over a real __consumer_offsets log and a manual clock: the group, its
members, their targets and epochs are in the log, so a reloaded coordinator (a restart, a coordinator move)
knows every member at its epoch, and a member gone leaves nothing behind."""

from __future__ import annotations

import pytest

from kbroker.coordinators.group.share.model import ShareGroup
from kbroker.protocol.errors import ErrorCode as E
from tests.unit.coordinators.test_consumer_group_coordinator import ConsumerHarness, held


class ShareHarness(ConsumerHarness):
    def share(self, member: str, epoch: int, topics=None, coordinator=None) -> dict:
        return (coordinator or self.coordinator).share_group_heartbeat(
            group_id="s", member_id=member, member_epoch=epoch, rack_id=None,
            subscribed_topic_names=topics if topics is not None else (["t"] if epoch == 0 else None),
            client_id="client", client_host="/127.0.0.1")


@pytest.fixture
def h(tmp_path) -> ShareHarness:
    return ShareHarness(str(tmp_path))


def members(group: ShareGroup) -> dict:
    return {m: (x.member_epoch, x.subscribed_topic_names, sorted(p for ps in x.assignment.values() for p in ps))
            for m, x in group.members.items()}


def test_a_reloaded_coordinator_knows_the_members_at_their_epochs(h):
    a = h.share("a", 0)
    b = h.share("b", 0)
    a = h.share("a", a["member_epoch"])
    assert (a["member_epoch"], b["member_epoch"], sorted(held(a) + held(b))) == (2, 2, [0, 1, 2, 3])
    group = h.coordinator.groups["s"]
    fresh = h.reload()
    reloaded = fresh.groups["s"]
    assert members(reloaded) == members(group)
    assert (reloaded.group_epoch, reloaded.assignment_epoch, reloaded.metadata_hash, reloaded.share_partitions) == (
        group.group_epoch, group.assignment_epoch, group.metadata_hash, group.share_partitions)
    # The members carry on with the new coordinator at their epochs: no new epoch, no rejoin.
    again = h.share("a", 2, coordinator=fresh)
    assert (again["error_code"], again["member_epoch"]) == (E.NONE, 2)
    assert h.share("b", 1, coordinator=fresh)["error_code"] == E.FENCED_MEMBER_EPOCH


def test_the_sessions_of_reloaded_members_run_out_like_any(h):
    h.share("a", 0)
    h.share("b", 0)
    fresh = h.reload()
    for _ in range(45):
        h.scheduler.advance(1000)
        h.share("a", fresh.groups["s"].members["a"].member_epoch, coordinator=fresh)
    assert members(fresh.groups["s"]) == {"a": (3, ("t",), [0, 1, 2, 3])}    # b's partitions came back to a


def test_a_member_that_left_is_gone_after_a_reload_and_an_empty_group_deletes_cleanly(h):
    h.share("a", 0)
    h.share("b", 0)
    h.share("b", -1)
    assert list(h.reload().groups["s"].members) == ["a"]
    h.share("a", -1)
    assert h.reload().groups["s"].members == {}
    assert h.coordinator.delete_groups(["s"]) == {"s": E.NONE}
    assert "s" not in h.reload().groups
