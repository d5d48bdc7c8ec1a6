"""Online migration in the group coordinator, over a real __consumer_offsets log and a manual clock: a running
classic group converted by a ConsumerGroupHeartbeat and back when its last consumer-protocol member leaves,
what each conversion leaves in the log, the migration policy, and the timers of classic members."""

from __future__ import annotations

import struct
from dataclasses import replace

import pytest

from kbroker.coordinators.group.consumer.model import ConsumerGroup, MemberState
from kbroker.coordinators.group.coordinator import GroupCoordinator
from kbroker.coordinators.group.group import GroupMetadata
from kbroker.coordinators.group.state import GroupState
from kbroker.protocol.errors import ErrorCode as E
from tests.unit.coordinators.test_consumer_group_coordinator import ConsumerHarness, held
from tests.unit.coordinators.test_group_coordinator import REBALANCE, subscription   # (a classic member's)


def assignment(*partitions: int, topic: str = "t") -> bytes:
    """A ConsumerProtocolAssignment v0 of one topic."""
    out = struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


def classic_group(h: ConsumerHarness) -> tuple[list[str], int]:
    """Two classic members holding t's four partitions two each; their ids (leader first) and generation."""
    ids = h.stable_group(2)
    group = h.coordinator.groups["g"]
    for member, parts in zip(ids, ((0, 1), (2, 3))):
        group.members[member].assignment = assignment(*parts)
    h.coordinator.store(h.coordinator.partition_for("g"), [h.coordinator._group_record(group)])
    assert h.commit("g", group.generation_id, ids[0], {("t", 0): 7}) == {("t", 0): E.NONE}
    return ids, group.generation_id


@pytest.fixture
def h(tmp_path) -> ConsumerHarness:
    return ConsumerHarness(str(tmp_path))


def test_a_consumer_heartbeat_upgrades_a_running_classic_group_and_the_log_says_so(h):
    ids, generation = classic_group(h)
    joined = h.beat("n", 0)
    assert (joined["error_code"], joined["member_epoch"], held(joined)) == (0, generation + 1, [])
    for coordinator in (h.coordinator, h.reload()):
        group = coordinator.groups["g"]
        assert isinstance(group, ConsumerGroup) and group.group_epoch == generation + 1
        assert {m: (x.member_epoch, x.classic is not None, sorted(p for ps in x.assigned.values() for p in ps))
                for m, x in group.members.items()} == {
            ids[0]: (generation, True, [0, 1]), ids[1]: (generation, True, [2, 3]), "n": (generation + 1, False, [])}
        assert group.members[ids[0]].classic.protocols == (("range", subscription("t")),)
        assert group.offsets[("t", 0)].offset == 7
    # The classic members are asked to rejoin; one gives a partition up to the new member.
    assert h.heartbeat("g", generation, ids[0]) == E.REBALANCE_IN_PROGRESS
    rejoined = h.join(member_id=ids[0], protocols=[("range", subscription("t"))])[0]
    assert (rejoined["error_code"], rejoined["generation_id"], rejoined["leader"]) == (0, generation + 1, "")


def test_the_last_consumer_member_leaving_downgrades_the_group_which_rebalances(h):
    ids, generation = classic_group(h)
    h.beat("n", 0)
    assert h.beat("n", -1)["error_code"] == E.NONE
    for coordinator in (h.coordinator, h.reload()):
        group = coordinator.groups["g"]
        assert isinstance(group, GroupMetadata) and set(group.members) == set(ids)
        assert group.protocol_type == "consumer" and group.protocol_name == "range"
        assert group.offsets[("t", 0)].offset == 7
    group = h.coordinator.groups["g"]
    assert group.state is GroupState.PREPARING_REBALANCE and group.generation_id == generation + 1
    # (the generation is checked before the state, as in Kafka 4.2: a member that knew the last one rejoins)
    assert h.heartbeat("g", generation, ids[1]) == E.ILLEGAL_GENERATION
    assert h.heartbeat("g", generation + 1, ids[1]) == E.REBALANCE_IN_PROGRESS
    answers = [h.join(member_id=m) for m in ids]
    assert [a[0]["error_code"] for a in answers] == [0, 0]
    assert h.coordinator.groups["g"].state is GroupState.COMPLETING_REBALANCE


@pytest.mark.parametrize("policy, upgrade, downgrade", [("disabled", False, False), ("upgrade", True, False),
                                                         ("downgrade", False, True), ("BIDIRECTIONAL", True, True)])
def test_the_migration_policy_allows_each_direction(tmp_path, policy, upgrade, downgrade):
    h = ConsumerHarness(str(tmp_path))
    h.config = replace(h.config, consumer_migration_policy=policy.lower())
    h.coordinator = GroupCoordinator(h.config, h.scheduler, h.store.append, topics=lambda: h.metadata)
    ids, _ = classic_group(h)
    answer = h.beat("n", 0)
    assert answer["error_code"] == (E.NONE if upgrade else E.GROUP_ID_NOT_FOUND)
    if not upgrade:
        assert isinstance(h.coordinator.groups["g"], GroupMetadata)
        return
    h.beat("n", -1)
    assert isinstance(h.coordinator.groups["g"], GroupMetadata if downgrade else ConsumerGroup)


def test_a_classic_member_asked_to_rejoin_is_fenced_after_its_rebalance_timeout(h):
    """ids[1] keeps its session with heartbeats but never rejoins; ids[0] rejoins and stays."""
    ids, generation = classic_group(h)
    h.beat("n", 0)
    assert h.heartbeat("g", generation, ids[1]) == E.REBALANCE_IN_PROGRESS
    rejoined = h.join(member_id=ids[0])[0]
    assert h.sync("g", rejoined["generation_id"], ids[0])[0]["error_code"] == E.NONE
    for _ in range(REBALANCE // 500 - 1):
        h.scheduler.advance(500)
        assert h.heartbeat("g", rejoined["generation_id"], ids[0]) == E.NONE
        assert h.heartbeat("g", generation, ids[1]) == E.REBALANCE_IN_PROGRESS
        h.beat("n", h.coordinator.groups["g"].members["n"].member_epoch)
    h.scheduler.advance(500)
    assert set(h.coordinator.groups["g"].members) == {ids[0], "n"}
    # Its partition goes to the others: ids[0] is asked to rejoin for it.
    assert h.heartbeat("g", rejoined["generation_id"], ids[0]) == E.REBALANCE_IN_PROGRESS


def test_a_classic_member_that_joins_but_never_syncs_is_fenced(h):
    h.beat("n", 0)
    first = h.join()[0]
    assert first["error_code"] == E.MEMBER_ID_REQUIRED
    joined = h.join(member_id=first["member_id"])[0]
    assert joined["error_code"] == E.NONE and joined["leader"] == ""
    for _ in range(REBALANCE // 500):
        h.scheduler.advance(500)
        # (a classic member's session here is 1 s: its heartbeats keep it; only the sync timer fences it)
        h.beat("n", h.coordinator.groups["g"].members["n"].member_epoch)
        h.heartbeat("g", joined["generation_id"], first["member_id"])
    assert list(h.coordinator.groups["g"].members) == ["n"]


def test_a_classic_group_whose_subscriptions_do_not_parse_is_not_upgraded(h):
    ids = h.stable_group(2, protocols=[("range", b"\x00\x00\x00\x00\x00\x05ab")])
    assert h.beat("n", 0)["error_code"] == E.GROUP_ID_NOT_FOUND
    group = h.coordinator.groups["g"]
    assert isinstance(group, GroupMetadata) and set(group.members) == set(ids)
    assert group.state is GroupState.STABLE


def test_a_cooperative_member_keeps_what_it_owns_until_it_reports_it_revoked(h):
    ids, generation = classic_group(h)
    h.beat("n", 0)
    group = h.coordinator.groups["g"]
    giving = next(m for m in ids if group.target[m] != group.members[m].assigned)
    owns = sorted(p for ps in group.members[giving].assigned.values() for p in ps)
    keeps = sorted(p for ps in group.target[giving].values() for p in ps)

    def cooperative(*partitions: int) -> bytes:   # ConsumerProtocolSubscription v1 with owned partitions
        out = struct.pack(">hi", 1, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1)
        out += struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", len(partitions))
        return out + b"".join(struct.pack(">i", p) for p in partitions)
    refused = h.join(member_id=giving, protocols=[("cooperative-sticky", cooperative(*owns))])[0]
    assert refused["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL     # the other classic member speaks range only
    told = h.join(member_id=giving, protocols=[("range", cooperative(*owns))])[0]
    member = h.coordinator.groups["g"].members[giving]
    assert told["generation_id"] == generation and member.state is MemberState.UNREVOKED_PARTITIONS
    synced = h.sync("g", told["generation_id"], giving)[0]
    assert (synced["error_code"], synced["assignment"]) == (E.NONE, struct.pack(">h", 1) + assignment(*keeps)[2:])
    # (answered in the version of the member's subscription, v1 here)
    assert h.heartbeat("g", told["generation_id"], giving) == E.REBALANCE_IN_PROGRESS
    again = h.join(member_id=giving, protocols=[("range", cooperative(*keeps))])[0]
    assert again["generation_id"] == generation + 1
    assert h.coordinator.groups["g"].members[giving].state is MemberState.STABLE


def test_a_classic_static_member_replacing_the_last_consumer_member_turns_the_group_classic(h):
    ids, generation = classic_group(h)
    h.beat("n", 0, instance="i")
    target = h.coordinator.groups["g"].target["n"]
    joined = h.join(instance="i")[0]
    assert joined["error_code"] == E.NONE and joined["member_id"] != "n"
    for coordinator in (h.coordinator, h.reload()):
        group = coordinator.groups["g"]
        assert isinstance(group, GroupMetadata) and group.state is GroupState.STABLE
        assert set(group.members) == {*ids, joined["member_id"]} and group.generation_id == generation + 1
    synced = h.sync("g", joined["generation_id"], joined["member_id"], instance="i")[0]
    assert synced["error_code"] == E.NONE
    assert synced["assignment"] == assignment(*sorted(p for ps in target.values() for p in ps))
