"""A librdkafka consumer of a group for the group benchmarks (bench/groups.py, bench/modern_groups.py), polled by
a thread of its own, recording the partitions it owns as they change and when they were assigned."""

from __future__ import annotations

import threading
import time

HEARTBEAT_MS = 100
SESSION_MS = 6000


class Member:
    """``protocol``: "classic" (the range assignor, eager, with the bench's short heartbeat and session) or
    "consumer" (KIP-848: the broker assigns, incrementally). ``assigned`` is what it owns now."""

    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str = "classic",
                 poll_s: float = 0.05) -> None:
        from confluent_kafka import Consumer

        config = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "group.protocol": protocol}
        if protocol == "classic":
            config.update({"session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
                           "partition.assignment.strategy": "range"})
        self.assigned: set[int] = set()
        self.assign_times: list[float] = []
        self.consumer = Consumer(config)
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self.poll_s = poll_s
        self.running = True
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _on_assign(self, consumer, partitions) -> None:
        # (an eager assignment names every partition the member gets, an incremental one the new ones)
        self.assigned |= {p.partition for p in partitions}
        self.assign_times.append(time.monotonic())

    def _on_revoke(self, consumer, partitions) -> None:
        self.assigned -= {p.partition for p in partitions}

    def _poll(self) -> None:
        while self.running:
            self.consumer.poll(self.poll_s)

    def close(self) -> None:
        self.running = False
        self.thread.join(10)
        self.consumer.close()


def wait(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return False
