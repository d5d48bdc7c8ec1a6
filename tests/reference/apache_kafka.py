"""Apache Kafka itself, beside kbroker: KRaft nodes assembled from Maven Central's jars.

``jars()`` runs ``mvn dependency:copy-dependencies`` on ``tests/reference/kafka/pom.xml`` once per
version into the ignored ``.cache/kafka-<version>/libs``; a node is then what Kafka's own scripts
start, ``java -cp 'libs/*' kafka.Kafka server.properties`` after ``kafka.tools.StorageTool format``.

``KafkaNode`` is one combined broker + controller on free loopback ports, data in a directory of
the caller's; ``KafkaCluster`` is three of them voting in one quorum, for replicated comparisons.
Both return from ``start()`` only once every node's Metadata lists every broker.

The heap is set in one place, ``HEAP``; ``SHIPPED_HEAP`` is what ``kafka-server-start.sh`` gives.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from kbroker.broker.cluster.zookeeper_server import free_port
from kbroker.client.maven import gather_once
from tests.cluster import brokers_listed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POM = os.path.join(ROOT, "tests", "reference", "kafka", "pom.xml")
LOG_CONFIG = os.path.join(ROOT, "tests", "reference", "kafka", "log4j2.properties")
VERSION = os.environ.get("KBROKER_REFERENCE_KAFKA", "4.2.1")

# A 2-core, 24 GiB machine runs a reference node beside kbroker, ZooKeeper, three-node clusters and
# the load generator: 2 GiB is room for Kafka's page-cache-backed design (the heap holds no data),
# and starting at 512 MiB keeps an idle node's RSS honest for the memory rows of the bench.
HEAP = ("-Xms512m", "-Xmx2g")
SHIPPED_HEAP = ("-Xms1g", "-Xmx1g")
# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS, so the node runs as it ships.
JVM_OPTS = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")

# What every comparison sets on both brokers alike: one node cannot hold three replicas of the
# internal topics, and nobody waits out the first group's rebalance delay.
SINGLE_NODE = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}


def jars(version: str = VERSION) -> str:
    """The directory holding Kafka ``version``'s jars, fetched through Maven on first use (``client.maven``)."""
    return gather_once(POM, os.path.join(ROOT, ".cache", f"kafka-{version}"), f"Kafka {version}'s jars",
                       f"-Dkafka.version={version}")


ZOOKEEPER_POM = os.path.join(ROOT, "tests", "reference", "kafka", "zookeeper", "pom.xml")


def zookeeper_jars(version: str) -> str:
    """The directory holding a Kafka 3.x release's jars (its ZooKeeper-mode broker, tools and Java clients),
    fetched through Maven on first use from ``tests/reference/kafka/zookeeper/pom.xml``."""
    return gather_once(ZOOKEEPER_POM, os.path.join(ROOT, ".cache", f"kafka-{version}"), f"Kafka {version}'s jars",
                       f"-Dkafka.version={version}")


# The scripts of Kafka's distribution that other test suites call (librdkafka's test_kafka_topics() runs
# $KAFKA_PATH/bin/kafka-topics.sh), each the tool's main class from the jars.
SCRIPTS = {"kafka-topics.sh": "org.apache.kafka.tools.TopicCommand", "kafka-configs.sh": "kafka.admin.ConfigCommand",
           "kafka-acls.sh": "org.apache.kafka.tools.AclCommand", "kafka-consumer-groups.sh": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"}
TOOLS_LOG_CONFIG = os.path.join(ROOT, "tests", "reference", "kafka", "tools-log4j2.properties")


# A tool's run is mostly the JVM starting: loading and verifying Kafka's classes and compiling code it runs
# once. Classes are loaded from a class-data archive of the jars (AppCDS) and compiled by C1 only, which
# halves a tool's second (TopicCommand 1.0 s to 0.45 s, ConfigCommand 1.3 s to 0.7 s on the 2-core machine).
# CDS's own messages go to stdout, which the tests read, so they are off.
TOOL_JVM = ("-XX:TieredStopAtLevel=1", "-Xlog:cds*=off")


def tools_archive(libs: str) -> str:
    """Where the class-data archive of the jars in ``libs`` is kept. The JVM checks it against the class
    path and the JDK, and ignores one that does not match; a tool run makes it when it is missing."""
    return os.path.join(os.path.dirname(libs), "tools.jsa")


def tool(main: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """One of Kafka's command-line tools, run as its kafka-*.sh script runs it (a small heap, warnings to
    stderr), from the class-data archive (``TOOL_JVM``). The first run without one dumps its classes into a
    file of its own, renamed into place once the run is over, so concurrent first runs do not collide."""
    libs = jars()
    archive = tools_archive(libs)
    dump = None if os.path.exists(archive) else f"{archive}.{os.getpid()}.{time.monotonic_ns()}"
    sharing = f"-XX:ArchiveClassesAtExit={dump}" if dump else f"-XX:SharedArchiveFile={archive}"
    command = ["java", "-Xms64m", "-Xmx256m", *TOOL_JVM, sharing, f"-Dlog4j2.configurationFile={TOOLS_LOG_CONFIG}",
               "-cp", os.path.join(libs, "*"), main, *args]
    result = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)
    if dump and os.path.exists(dump):
        os.replace(dump, archive)
    return result


def kafka_path(version: str = VERSION) -> str:
    """A directory laid out as Kafka's distribution for its ``bin/`` scripts (``KAFKA_PATH``): each script
    runs its tool from the Maven-gathered jars (``jars()``)."""
    libs = jars(version)
    home = os.path.dirname(libs)
    os.makedirs(os.path.join(home, "bin"), exist_ok=True)
    for script, main in SCRIPTS.items():
        path = os.path.join(home, "bin", script)
        text = (f'#!/bin/sh\nexec java -Xmx512m {shlex.join(TOOL_JVM)} -XX:SharedArchiveFile={tools_archive(libs)} '
                f'-Dlog4j2.configurationFile={TOOLS_LOG_CONFIG} -cp "{os.path.join(libs, "*")}" {main} "$@"\n')
        if not os.path.exists(path) or open(path).read() != text:
            with open(path + ".tmp", "w") as f:
                f.write(text)
            os.chmod(path + ".tmp", 0o755)
            os.replace(path + ".tmp", path)
    return home


def java(libs: str, main: str, *args: str, heap=HEAP) -> list[str]:
    return ["java", *heap, *JVM_OPTS, f"-Dlog4j2.configurationFile={LOG_CONFIG}", "-cp", os.path.join(libs, "*"),
            main, *args]


@dataclass
class KafkaNode:
    """One KRaft node, broker and controller in one process, as ``kafka-server-start.sh`` runs it."""

    root: str
    overrides: dict[str, str] = field(default_factory=dict)
    node_id: int = 1
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    voters: str = ""            # controller.quorum.voters of a cluster; empty: a standalone quorum of one
    cluster_id: str = ""
    heap: tuple[str, ...] = HEAP
    version: str = VERSION
    sasl: object = None         # the SaslCredentials start() asks Metadata with, for a SASL client listener
    system_properties: dict[str, str] = field(default_factory=dict)   # the JVM's -D settings
    proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> str:
        return os.path.join(self.root, "data")

    @property
    def log_path(self) -> str:
        return os.path.join(self.root, "kafka.log")

    def properties(self) -> dict[str, str]:
        quorum = ({"controller.quorum.voters": self.voters} if self.voters else
                  {"controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}"})
        return {"process.roles": "broker,controller", "node.id": str(self.node_id), **quorum,
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "log.dirs": self.data_dir, **self.overrides}

    def launch(self) -> None:
        """Format (once) and start the process; ``start`` also waits for it."""
        libs = jars(self.version)
        os.makedirs(self.root, exist_ok=True)
        config = os.path.join(self.root, "server.properties")
        with open(config, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in self.properties().items())
        if not os.path.exists(os.path.join(self.data_dir, "meta.properties")):
            if not self.cluster_id:
                self.cluster_id = subprocess.run(java(libs, "kafka.tools.StorageTool", "random-uuid",
                                                      heap=("-Xmx128m",)),
                                                 capture_output=True, text=True, check=True).stdout.strip()
            fmt = ["format", "-t", self.cluster_id, "-c", config, *([] if self.voters else ["--standalone"])]
            run = subprocess.run(java(libs, "kafka.tools.StorageTool", *fmt, heap=("-Xmx256m",)),
                                 capture_output=True, text=True)
            if run.returncode != 0:
                raise RuntimeError(f"kafka-storage format failed:\n{run.stdout}{run.stderr}")
        log = open(self.log_path, "ab")
        options = (*self.heap, *(f"-D{k}={v}" for k, v in self.system_properties.items()))
        self.proc = subprocess.Popen(java(libs, "kafka.Kafka", config, heap=options), stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def start(self, timeout: float = 90.0) -> "KafkaNode":
        self.launch()
        wait_formed([self], 1, timeout)
        return self

    def tail_log(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (Kafka's controlled shutdown) and wait; SIGKILL after ``timeout``."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def pid(self) -> int:
        return self.proc.pid


@dataclass
class KafkaCluster:
    """``size`` KRaft nodes, each broker and controller, voting in one static quorum."""

    root: str
    size: int = 3
    overrides: dict[str, str] = field(default_factory=dict)
    heap: tuple[str, ...] = HEAP
    version: str = VERSION
    nodes: list[KafkaNode] = field(default_factory=list)

    def start(self, timeout: float = 120.0) -> "KafkaCluster":
        self.nodes = [KafkaNode(os.path.join(self.root, f"node-{i}"), dict(self.overrides), node_id=i,
                                heap=self.heap, version=self.version) for i in range(1, self.size + 1)]
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        cluster_id = subprocess.run(java(jars(self.version), "kafka.tools.StorageTool", "random-uuid",
                                         heap=("-Xmx128m",)), capture_output=True, text=True,
                                    check=True).stdout.strip()
        for node in self.nodes:
            node.voters, node.cluster_id = voters, cluster_id
            node.launch()
        wait_formed(self.nodes, self.size, timeout)
        return self

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes if n.proc and n.proc.poll() is None)

    def stop(self) -> None:
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)
        for node in self.nodes:
            node.stop()

    def pids(self) -> list[int]:
        return [n.pid() for n in self.nodes]


def wait_formed(nodes: list[KafkaNode], brokers: int, timeout: float) -> None:
    """Until every node answers Metadata listing ``brokers`` brokers (an unfenced broker is listed)."""
    deadline = time.monotonic() + timeout
    while True:
        dead = [n for n in nodes if n.proc.poll() is not None]
        if dead:
            raise RuntimeError(f"Kafka node {dead[0].node_id} exited {dead[0].proc.returncode}:\n"
                               f"{dead[0].tail_log()}")
        if all(brokers_listed(n.port, 5, n.sasl) >= brokers for n in nodes):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"Kafka did not list {brokers} brokers in {timeout} s:\n{nodes[0].tail_log()}")
        time.sleep(0.2)


def main() -> int:
    """``make kafka``: one node on free ports, data in ./data/kafka-reference, until Ctrl-C."""
    import shutil

    root = os.path.abspath(os.path.join("data", "kafka-reference"))
    shutil.rmtree(root, ignore_errors=True)
    port = int(os.environ.get("KAFKA_PORT", "0")) or free_port()
    node = KafkaNode(root, dict(SINGLE_NODE), port=port)
    print(f"starting Apache Kafka {node.version} (jars from Maven Central, cached in .cache/)", flush=True)
    node.start()
    print(f"Apache Kafka {node.version} listening on {node.bootstrap}  (log: {node.log_path}; Ctrl-C stops it)",
          flush=True)
    stop: list[int] = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop and node.proc.poll() is None:
        time.sleep(0.2)
    print("stopping Kafka", flush=True)
    code = node.stop()
    print(f"Kafka exited {code}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
