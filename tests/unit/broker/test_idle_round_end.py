"""When a follower's held idle fetch is answered (broker/network/idle_fetches.round_end): on its wait's grid when
that is close enough before its end, else a little early, and never after its wait."""

from __future__ import annotations

import math

import pytest

from kbroker.broker.network.idle_fetches import round_end


@pytest.mark.parametrize("wait", [0.1, 0.4, 0.5, 1.0])
@pytest.mark.parametrize("uptime", [1_000.0, 123_456.7, 9_876_543.0])
def test_a_round_begun_on_a_grid_point_ends_on_the_next_one(uptime, wait):
    """Loop times are whole milliseconds, so a fetch arriving in its grid point's millisecond begins exactly on
    it; its end is the next grid point, not one a rounding error short (before, one in seven at 400 ms ended the
    early allowance before it, and the follower's rounds walked off the grid)."""
    first = math.ceil(uptime / wait)
    for k in range(first, first + 5000):
        now = round(k * wait, 3)
        assert round_end(now, wait) == pytest.approx(now + wait, abs=1e-6)


def test_a_round_ends_on_the_grid_when_close_enough_else_a_little_early_and_never_late():
    wait = 0.4
    assert round_end(1000.010, wait) == pytest.approx(1000.4)         # 10 ms early: onto the grid
    assert round_end(1000.020, wait) == pytest.approx(1000.4)         # 20 ms: a twentieth, still onto it
    assert round_end(1000.100, wait) == pytest.approx(1000.48)        # too far: a twentieth (20 ms) early
    assert round_end(1000.399, wait) == pytest.approx(1000.779)       # just before a grid point: 20 ms early
    for now in (1000.0, 1000.0001, 1000.2, 1000.3999):
        end = round_end(now, wait)
        assert now + wait - 0.02 - 1e-9 <= end <= now + wait
