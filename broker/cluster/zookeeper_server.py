"""A standalone ZooKeeper server as a plain Java process (Debian's ``zookeeper`` package).

Used by ``make cluster`` and by the cluster tests: ZooKeeper is never
embedded or imitated; this starts the real server on a loopback port with its
data in a folder of ours, and stops it with a signal like any process.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
# Debian's zookeeper depends on libslf4j-java; without a binding on the class path ZooKeeper logs nothing, not
# even why it exits.
SLF4J_SIMPLE_JAR = "/usr/share/java/slf4j-simple.jar"
MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
ATTEMPTS = 3
LOWEST_PORT = 10000


def ephemeral_ports() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low, high = f.read().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A loopback port nothing is bound to, for a server started as another process.

    Picked below the kernel's ephemeral range where that range leaves room: a port from binding port 0 is drawn
    from the same range as every outgoing connection's local port, and a JVM that takes a second to start can find
    its port taken by one of them and exit (ZooKeeper and Kafka both do). Below the range only another listener
    can take it in between."""
    low, _ = ephemeral_ports()
    if low - LOWEST_PORT >= 1000:
        pick = random.SystemRandom()
        for _ in range(50):
            port = pick.randrange(LOWEST_PORT, low)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ZooKeeperServer:
    data_dir: str
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "ZooKeeperServer":
        """Starts the server and returns once it answers ``ruok``.

        A port of our own picking can still be taken before the JVM binds it; ZooKeeper then exits, and it is
        started again on another port (up to ``ATTEMPTS`` times). A port the caller gave is never changed."""
        if not os.path.exists(ZOOKEEPER_JAR):
            raise RuntimeError(f"{ZOOKEEPER_JAR} is missing: install Debian's zookeeper package (make apt)")
        os.makedirs(self.data_dir, exist_ok=True)
        ours, attempts = not self.port, 0
        deadline = time.monotonic() + timeout
        while True:
            attempts += 1
            self.port = self.port or free_port()
            self._launch()
            if self._answers_by(deadline):
                return self
            if self.proc.poll() is None:
                self.stop()
                raise RuntimeError(f"zookeeper did not answer on {self.connect} within {timeout}s")
            if not ours or attempts == ATTEMPTS:
                raise RuntimeError(f"zookeeper exited with {self.proc.returncode}; see {self.data_dir}/zookeeper.log")
            self.port = 0

    def _answers_by(self, deadline: float) -> bool:
        """Whether the server answers ``ruok`` before ``deadline``; False as soon as its process exits."""
        while time.monotonic() < deadline and self.proc.poll() is None:
            if self.ruok():
                return True
            time.sleep(0.1)
        return False

    def _launch(self) -> None:
        config = os.path.join(self.data_dir, "zoo.cfg")
        with open(config, "w", encoding="utf-8") as f:
            f.write(f"dataDir={self.data_dir}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
                    "tickTime=500\nminSessionTimeout=1000\nmaxSessionTimeout=60000\n"
                    "admin.enableServer=false\n4lw.commands.whitelist=ruok,stat\n")
        classpath = [self.data_dir, ZOOKEEPER_JAR] + [SLF4J_SIMPLE_JAR] * os.path.exists(SLF4J_SIMPLE_JAR)
        with open(os.path.join(self.data_dir, "zookeeper.log"), "ab") as log:
            self.proc = subprocess.Popen(
                ["java", "-Xmx256m", "-Dzookeeper.jmx.log4j.disable=true",
                 "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.showDateTime=true",
                 "-cp", ":".join(classpath), MAIN, config], stdout=log, stderr=log, start_new_session=True)

    def ruok(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"ruok")
                return s.recv(4) == b"imok"
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
