"""Group coordinator shards: a partition of __consumer_offsets unloads (leadership left) and loads again by
replay of that partition alone, as a broker in a cluster does; other shards are untouched."""

from __future__ import annotations

import pytest

from kbroker.protocol.errors import ErrorCode as E
from tests.unit.coordinators.test_group_coordinator import Harness


@pytest.fixture
def h(tmp_path):
    harness = Harness(str(tmp_path))
    yield harness
    harness.log_manager.shutdown()


def two_groups_on_different_shards(h) -> tuple[str, str]:
    names = [f"g{i}" for i in range(20)]
    first = names[0]
    other = next(n for n in names if h.coordinator.partition_for(n) != h.coordinator.partition_for(first))
    return first, other


def test_unload_forgets_one_shard_answers_its_parked_joins_and_stops_its_timers(h):
    unloaded, kept = two_groups_on_different_shards(h)
    members = h.stable_group(2, group=unloaded)
    h.stable_group(1, group=kept)
    parked = h.join(unloaded, member_id=members[0])      # parks until the other member rejoins
    assert parked == []
    timers = h.scheduler.pending()

    assert h.coordinator.unload_partition(h.coordinator.partition_for(unloaded)) == 1
    assert unloaded not in h.coordinator.groups and kept in h.coordinator.groups
    assert parked[0]["error_code"] == E.NOT_COORDINATOR
    assert h.scheduler.pending() < timers
    h.scheduler.advance(60_000)   # the dropped group's session and rebalance timers never fire
    assert unloaded not in h.coordinator.groups


def test_loading_one_shard_back_restores_its_groups_and_offsets_from_the_log(h):
    unloaded, kept = two_groups_on_different_shards(h)
    members = h.stable_group(1, group=unloaded)
    assert h.commit(unloaded, 1, members[0], {("t", 0): 42}) == {("t", 0): E.NONE}
    h.stable_group(1, group=kept)
    partition = h.coordinator.partition_for(unloaded)
    h.coordinator.unload_partition(partition)

    for stored in h.store.records(partition):
        h.coordinator.replay_stored(partition, stored)
    h.coordinator.loaded(partition)
    group = h.coordinator.groups[unloaded]
    assert group.offsets[("t", 0)].offset == 42
    assert list(group.members) == members
    assert h.heartbeat(unloaded, 1, members[0]) == E.NONE
