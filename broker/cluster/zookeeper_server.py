"""A standalone ZooKeeper server as a plain Java process (Debian's ``zookeeper`` package).

Used by ``make cluster`` and by the cluster tests: ZooKeeper is never
embedded or imitated; this starts the real server on a loopback port with its
data in a folder of ours, and stops it with a signal like any process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"


def free_port() -> int:
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
        if not os.path.exists(ZOOKEEPER_JAR):
            raise RuntimeError(f"{ZOOKEEPER_JAR} is missing: install Debian's zookeeper package (make apt)")
        os.makedirs(self.data_dir, exist_ok=True)
        self.port = self.port or free_port()
        config = os.path.join(self.data_dir, "zoo.cfg")
        with open(config, "w", encoding="utf-8") as f:
            f.write(f"dataDir={self.data_dir}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
                    "tickTime=500\nminSessionTimeout=1000\nmaxSessionTimeout=60000\n"
                    "admin.enableServer=false\n4lw.commands.whitelist=ruok,stat\n")
        log = open(os.path.join(self.data_dir, "zookeeper.log"), "ab")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-Dzookeeper.jmx.log4j.disable=true", "-cp", f"{self.data_dir}:{ZOOKEEPER_JAR}",
             MAIN, config], stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"zookeeper exited with {self.proc.returncode}; see {self.data_dir}/zookeeper.log")
            if self.ruok():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"zookeeper did not answer on {self.connect} within {timeout}s")

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
