"""How a write's state batches join a share partition's (coordinators/share/batches.py): the cases Kafka's
PersisterStateBatchCombiner distinguishes, each checked here by hand; tests/reference/test_share_state.py
compares whole sequences of writes with Kafka's share coordinator."""

import pytest

from kbroker.coordinators.share.batches import combine

AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


@pytest.mark.parametrize("so_far,new,start,expected", [
    pytest.param([(0, 4, AVAILABLE, 1)], [(10, 12, ACKNOWLEDGED, 1)], -1,
                 [(0, 4, AVAILABLE, 1), (10, 12, ACKNOWLEDGED, 1)], id="apart: both kept, in order"),
    pytest.param([(10, 12, ACKNOWLEDGED, 1)], [(0, 4, AVAILABLE, 1)], -1,
                 [(0, 4, AVAILABLE, 1), (10, 12, ACKNOWLEDGED, 1)], id="a new batch before the stored ones"),
    pytest.param([(0, 4, ACKNOWLEDGED, 1)], [(5, 9, ACKNOWLEDGED, 1)], -1, [(0, 9, ACKNOWLEDGED, 1)],
                 id="touching, same count and state: one"),
    pytest.param([(0, 4, ACKNOWLEDGED, 1)], [(5, 9, ACKNOWLEDGED, 2)], -1,
                 [(0, 4, ACKNOWLEDGED, 1), (5, 9, ACKNOWLEDGED, 2)], id="touching, another count: two"),
    pytest.param([(0, 9, AVAILABLE, 1)], [(3, 5, ACKNOWLEDGED, 1)], -1,
                 [(0, 2, AVAILABLE, 1), (3, 5, ACKNOWLEDGED, 1), (6, 9, AVAILABLE, 1)],
                 id="a higher state inside: the stored batch split around it"),
    pytest.param([(0, 9, ACKNOWLEDGED, 2)], [(3, 5, AVAILABLE, 1)], -1, [(0, 9, ACKNOWLEDGED, 2)],
                 id="a lower count inside: nothing changes"),
    pytest.param([(0, 9, AVAILABLE, 1)], [(4, 12, AVAILABLE, 2)], -1,
                 [(0, 3, AVAILABLE, 1), (4, 12, AVAILABLE, 2)], id="a higher count reaching further"),
    pytest.param([(0, 9, ARCHIVED, 3)], [(4, 12, AVAILABLE, 2)], -1,
                 [(0, 9, ARCHIVED, 3), (10, 12, AVAILABLE, 2)], id="a lower count reaching further: its tail"),
    pytest.param([(0, 9, AVAILABLE, 1)], [(0, 12, ACKNOWLEDGED, 1)], -1, [(0, 12, ACKNOWLEDGED, 1)],
                 id="same first offset, the longer and higher"),
    pytest.param([(0, 12, AVAILABLE, 1)], [(0, 9, ACKNOWLEDGED, 1)], -1,
                 [(0, 9, ACKNOWLEDGED, 1), (10, 12, AVAILABLE, 1)], id="same first offset, the shorter and higher"),
    pytest.param([(0, 9, AVAILABLE, 1)], [(5, 9, ARCHIVED, 1)], -1, [(0, 4, AVAILABLE, 1), (5, 9, ARCHIVED, 1)],
                 id="same last offset, the higher later"),
    pytest.param([(0, 9, AVAILABLE, 1)], [(0, 9, AVAILABLE, 1)], -1, [(0, 9, AVAILABLE, 1)],
                 id="the same batch twice: once"),
    pytest.param([(0, 9, AVAILABLE, 1), (20, 29, ACKNOWLEDGED, 1)], [], 5,
                 [(5, 9, AVAILABLE, 1), (20, 29, ACKNOWLEDGED, 1)], id="the start offset cuts a batch"),
    pytest.param([(0, 9, AVAILABLE, 1)], [(12, 14, ACKNOWLEDGED, 1)], 11, [(12, 14, ACKNOWLEDGED, 1)],
                 id="the start offset past a batch drops it"),
    pytest.param([(0, 4, AVAILABLE, 1), (5, 9, AVAILABLE, 0)], [(5, 9, AVAILABLE, 1)], -1,
                 [(0, 4, AVAILABLE, 1), (5, 9, AVAILABLE, 1)],
                 id="Kafka's steps leave these touching alike batches apart"),
])
def test_combine(so_far, new, start, expected):
    assert combine(so_far, new, start) == expected
