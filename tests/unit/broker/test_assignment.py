"""Replica assignment: every replica distinct, leaders spread evenly, racks alternated."""

import random
from collections import Counter

import pytest

from kbroker.broker.cluster.assignment import InvalidReplicationFactor, assign_replicas


def test_replicas_are_distinct_and_leaders_spread_evenly():
    found = assign_replicas({1: None, 2: None, 3: None}, 6, 3, rng=random.Random(7))
    assert all(len(set(r)) == 3 for r in found.values())
    assert sorted(Counter(r[0] for r in found.values()).values()) == [2, 2, 2]


def test_rack_aware_assignment_puts_each_partitions_replicas_on_different_racks():
    brokers = {1: "a", 2: "a", 3: "b", 4: "b"}
    found = assign_replicas(brokers, 8, 2, rng=random.Random(3))
    assert all(brokers[r[0]] != brokers[r[1]] for r in found.values())


def test_too_few_brokers_is_invalid_replication_factor():
    with pytest.raises(InvalidReplicationFactor, match="larger than available brokers: 2"):
        assign_replicas({1: None, 2: None}, 1, 3)
