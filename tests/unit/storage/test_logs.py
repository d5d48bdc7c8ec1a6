"""ByPartition: a dict keyed by (topic, partition) that knows each topic's keys through every kind of change."""

from __future__ import annotations

import random

from kbroker.storage.logs import ByPartition


def test_a_topics_partitions_are_known_through_every_change_as_a_walk_finds_them():
    rng = random.Random(5)
    d = ByPartition()
    for _ in range(2000):
        key = (rng.choice("abc"), rng.randrange(6))
        step = rng.randrange(8)
        if step < 3:
            d[key] = rng.random()
        elif step == 3:
            d.pop(key, None)
        elif step == 4 and key in d:
            del d[key]
        elif step == 5 and d and rng.random() < 0.2:
            d.popitem()
        elif step == 6:
            d.update({key: 1.0, (key[0], key[1] + 6): 2.0})
        elif step == 7:
            d.setdefault(key, 3.0)
        if rng.random() < 0.005:
            d.clear()
        for topic in "abc":
            assert d.of_topic(topic) == sorted(k for k in d if k[0] == topic)
