"""The Kafka 4 groups example (examples/queues.py) runs for real against a broker and says what it should."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.brokerproc import ROOT


def test_the_queues_example_accepts_every_job_once_and_splits_the_partitions(broker):
    run = subprocess.run([sys.executable, "-m", "examples.queues", "--bootstrap-server", broker.bootstrap],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert lines[0].startswith("share group: 60 of 60 jobs accepted exactly once; delivered again after a "
                               "release: [0, 7, 14, 21, 28, 35, 42, 49, 56]"), run.stdout
    assert "#1:released -> " in lines[1] and lines[1].endswith("#2:accepted")
    prefix = "consumer group (KIP-848): partitions per member "
    assert lines[-1].startswith(prefix), run.stdout
    owned = ast.literal_eval(lines[-1][len(prefix):])
    assert sorted(len(o) for o in owned) == [2, 2] and sorted(sum(owned, [])) == [0, 1, 2, 3]
