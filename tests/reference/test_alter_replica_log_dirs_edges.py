"""AlterReplicaLogDirs at its edges, as raw frames side by side on one broker with one log dir: a replica moved to
the dir it is in, to a path that is no log dir, a topic or partition that is not there, a partition named twice,
and a request naming no dir."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 34, 35


def _move(path, topic, partitions) -> dict:
    return {"path": path, "topics": [{"name": topic, "partitions": partitions}]}


CASES = {   # case -> the dirs of the request, a function of (the broker's log dir, the test's topic)
    "to the dir it is in": lambda d, t: [_move(d, t, [0])],
    "to a path that is no log dir": lambda d, t: [_move(d + "-elsewhere", t, [0])],
    "a topic that is not there": lambda d, t: [_move(d, t + "-none", [0])],
    "a partition the topic lacks": lambda d, t: [_move(d, t, [5])],
    "a partition named twice in one dir": lambda d, t: [_move(d, t, [0, 0])],
    "a partition named in two dirs": lambda d, t: [_move(d, t, [0]), _move(d + "-elsewhere", t, [0])],
    "no dir": lambda d, t: [],
}


@pytest.mark.parametrize("case", list(CASES))
async def test_alter_replica_log_dirs(targets, topic, case):
    async def scenario(target):
        await create(target, topic)
        described = await call(target, DESCRIBE_LOG_DIRS, 4, {"topics": None})
        log_dir = described.results[0].log_dir
        answer = await call(target, ALTER_REPLICA_LOG_DIRS, 2, {"dirs": CASES[case](log_dir, topic)})
        return sorted((t.topic_name == topic, sorted((p.partition_index, p.error_code) for p in t.partitions))
                      for t in answer.results)
    await same(targets, scenario)
