"""Exactly-once: a consume-transform-produce loop killed with SIGKILL at random points, restarted with the
same transactional id, leaves every input record in the output exactly once (read_committed)."""

from __future__ import annotations

import queue
import random
import subprocess
import sys
import threading
import time

import pytest

from tests.brokerproc import ROOT
from tests.integration.groupworkers import fill
from tests.integration.workload import make_topic

PARTITIONS = 3


def committed_output(bootstrap: str, topic: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out, eof = [], set()
    deadline = time.monotonic() + 20
    while len(eof) < PARTITIONS and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error():
            eof.add(m.partition())
            continue
        assert m.value().startswith(b"V"), m.value()
        out.append(int(dict(m.headers())["i"]))
    consumer.close()
    return out


def run_with_kills(broker, topic_name, kills: int, count: int) -> None:
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    make_topic(broker.bootstrap, source, PARTITIONS)
    make_topic(broker.bootstrap, sink, PARTITIONS)
    fill(broker.bootstrap, source, count)
    rng = random.Random(kills)
    cmd = [sys.executable, "-m", "tests.integration.eos_worker", broker.bootstrap, source, sink,
           f"eos-{topic_name}", f"eos-txn-{topic_name}"]
    for _ in range(kills):
        worker = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda w=worker: [lines.put(x) for x in w.stdout], daemon=True).start()
        # Kill after a random number of commits, mid-transaction or between them; once the input is
        # used up no more commits come, so each wait is bounded.
        for _ in range(rng.randint(1, 6)):
            try:
                lines.get(timeout=10)
            except queue.Empty:
                break
        time.sleep(rng.random() * 0.05)
        worker.kill()
        worker.wait(10)
    worker = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        out = committed_output(broker.bootstrap, sink)
        while len(out) < count and time.monotonic() < deadline:
            time.sleep(0.5)
            out = committed_output(broker.bootstrap, sink)
    finally:
        worker.kill()
        worker.wait(10)
    duplicates = len(out) - len(set(out))
    assert duplicates == 0, f"{duplicates} records in the output twice"
    assert sorted(out) == list(range(count)), f"{count - len(set(out))} records missing"


def test_consume_transform_produce_killed_five_times(broker, topic_name):
    run_with_kills(broker, topic_name, kills=5, count=2000)


@pytest.mark.slow
def test_consume_transform_produce_killed_twenty_times(broker, topic_name):
    run_with_kills(broker, topic_name, kills=20, count=10000)
