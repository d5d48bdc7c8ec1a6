"""Starting, stopping, killing and reading group_worker processes from a test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Worker:
    def __init__(self, client: str, bootstrap: str, topic: str, group: str, *, name: str, **options) -> None:
        self.name = name
        cmd = [sys.executable, "-m", "tests.integration.group_worker", client, bootstrap, topic, group]
        for key, value in options.items():
            if value is not None:
                cmd += [f"--{key.replace('_', '-')}", str(value)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: list[dict] = []
        self.stderr: list[str] = []
        self._threads = [threading.Thread(target=self._read, daemon=True),
                         threading.Thread(target=self._drain_stderr, daemon=True)]
        for t in self._threads:
            t.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            event["w"] = self.name
            self.events.append(event)

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)
        if os.environ.get("GROUP_WORKER_STDERR_DIR"):   # the whole client log, for a diagnosis after the run
            path = os.path.join(os.environ["GROUP_WORKER_STDERR_DIR"], f"{self.name}-{self.proc.pid}.log")
            with open(path, "w") as f:
                f.writelines(self.stderr)

    def of(self, kind: str) -> list[dict]:
        return [e for e in list(self.events) if e["ev"] == kind]

    def owned(self) -> set[int]:
        """Partitions held now, from assigned/revoked events (eager clients revoke all, then assign all)."""
        held: set[int] = set()
        for e in list(self.events):
            if e["ev"] == "assigned":
                held |= set(e["partitions"])
            elif e["ev"] == "revoked":
                held -= set(e["partitions"])
        return held

    def terminate(self, timeout: float = 60) -> None:
        """SIGTERM: the client closes and leaves the group. (librdkafka may first wait out its reconnect backoff
        to the group coordinator, up to reconnect.backoff.max.ms = 10 s, after the tests' broker kills: a
        KIP-848 worker that had failed over took 24 s end to end in one run and over 20 s to close in another.)"""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout)
        for t in self._threads:
            t.join(5)

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup; only the session timeout tells the coordinator."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for t in self._threads:
            t.join(5)

    def diagnostics(self) -> str:
        changes = [(round(e["t"], 3), e["ev"], e.get("partitions")) for e in list(self.events)
                   if e["ev"] in ("assigned", "revoked", "commit_failed")]
        return (f"{self.name} rc={self.proc.poll()} records={len(self.of('rec'))} rebalances={changes[-12:]}\n"
                f"stderr tail:\n" + "".join(self.stderr[-15:]))


def wait_until(condition, timeout: float, what: str, workers: list[Worker] = ()) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    details = "\n".join(w.diagnostics() for w in workers)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{details}")


def consumed(workers: list[Worker]) -> set[int]:
    return {e["i"] for w in workers for e in w.of("rec")}


def check_at_least_once(workers: list[Worker], count: int) -> int:
    """Every record consumed; none consumed again once a commit covering it was acknowledged.

    A consumer starts a partition it is assigned from the offset committed at
    that moment: the last commit acknowledged before it. So a redelivery of
    (p, o) is legitimate only if that commit was not past ``o`` (a commit
    racing the rebalance, a consumer that died before committing, or one
    that committed a lower offset after a newer one, which Kafka accepts from
    a member of the generation: aiokafka does it when a rebalance hands it
    back records it had already processed). Timestamps are
    ``time.monotonic()``, one clock for every process on the machine.
    Returns the number of redeliveries.
    """
    recs = sorted((e for w in workers for e in w.of("rec")), key=lambda e: e["t"])
    commits = sorted(((e["t"], int(p), o) for w in workers for e in w.of("commit") for p, o in e["offsets"].items()))
    assigned = {w.name: [(e["t"], set(e["partitions"])) for e in w.of("assigned")] for w in workers}
    missing = set(range(count)) - {e["i"] for e in recs}
    assert not missing, f"{len(missing)} records never consumed, e.g. {sorted(missing)[:20]}"
    seen: dict[tuple[int, int], dict] = {}
    redelivered = 0
    for e in recs:
        key = (e["p"], e["o"])
        if key not in seen:
            seen[key] = e
            continue
        redelivered += 1
        since = max((t for t, parts in assigned[e["w"]] if e["p"] in parts and t <= e["t"]), default=e["t"])
        last = [c for c in commits if c[1] == e["p"] and c[0] < since][-1:]
        covering = [c for c in last if c[2] > e["o"]]
        assert not covering, (f"record p{e['p']}@{e['o']} redelivered to {e['w']} (assigned at {since:.3f}) after "
                              f"a commit of offset {covering[-1][2]} was acknowledged at {covering[-1][0]:.3f}\n"
                              + _timeline(workers, e["p"], e["o"], e["t"]))
    return redelivered


def _timeline(workers: list[Worker], partition: int, offset: int, around: float) -> str:
    """The events near a failure, for the assertion message."""
    events = sorted((e for w in workers for e in list(w.events)
                     if abs(e["t"] - around) < 2 and e["ev"] != "started"
                     and (e["ev"] != "rec" or (e["p"] == partition and abs(e["o"] - offset) < 3))
                     and (e["ev"] != "commit" or str(partition) in e["offsets"])),
                    key=lambda e: e["t"])
    return "\n".join(f"{e['t']:.3f} {e['w']} {e['ev']} " + str({k: v for k, v in e.items() if k not in "tw"})
                      for e in events[-80:])


def fill(bootstrap: str, topic: str, count: int, first: int = 0) -> None:
    """Produce records ``first .. first+count-1`` (header ``i``), spread over the partitions by key."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i in range(first, first + count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("i", str(i).encode())])
        producer.poll(0)
    assert producer.flush(30) == 0


def commit_start(bootstrap: str, topic: str, group: str, partitions: int) -> None:
    """Commit offset 0 of every partition for ``group`` before any member joins (a commit from outside an empty group).

    With a committed offset everywhere, no member ever starts a partition by
    ``auto.offset.reset``. librdkafka 2.x applies a ListOffsets answer that
    arrives after the partition was revoked (it waits behind a long-poll
    Fetch on the same connection, as on any Kafka broker) and later hands out
    those stale records when the partition comes back, from offset 0 past a
    newer commit: a client race the at-least-once check would report as the
    broker's.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = consumer.commit(offsets=[TopicPartition(topic, p, 0) for p in range(partitions)],
                                    asynchronous=False)
        assert all(tp.error is None for tp in committed), committed
    finally:
        consumer.close()
