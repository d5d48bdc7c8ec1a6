"""A real kbroker process for tests: started on a free 127.0.0.1 port, killed or stopped like any server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from kbroker.broker.cluster.zookeeper_server import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TEST_OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    # KIP-848 members heartbeat every 5 s by default: a test's group settles in a few heartbeats, not minutes.
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "100",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.session.timeout.ms": "1000",
    "group.share.min.record.lock.duration.ms": "1000",
    "num.partitions": "1",
    "log.cleaner.backoff.ms": "200",
}


@dataclass
class BrokerProcess:
    data_dir: str
    overrides: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen | None = None
    log_path: str = ""
    open_files_limit: int | None = None   # the process's RLIMIT_NOFILE (soft and hard), if not inherited
    test_overrides: bool = True           # False: Kafka's defaults wherever ``overrides`` says nothing

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        # A port picked below the ephemeral range, kept across restarts: a restarted broker binds it again, and
        # one of the kernel's range could have become some outgoing connection's local port while it was down.
        self.port = self.port or free_port()
        settings = {**(TEST_OVERRIDES if self.test_overrides else {}), "log.dirs": self.data_dir,
                    "listeners": f"PLAINTEXT://127.0.0.1:{self.port}", **self.overrides}
        args = [sys.executable, "-m", "kbroker.broker.cli", "serve", "--log-level",
                os.environ.get("KBROKER_TEST_LOG_LEVEL", "INFO")]
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        os.makedirs(self.data_dir, exist_ok=True)
        self.log_path = os.path.join(os.path.dirname(self.data_dir.rstrip("/")), "broker.log")
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, env={**os.environ,
                                     "PYTHONUNBUFFERED": "1"}, preexec_fn=self._limit_open_files)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline().decode()
            if line.startswith("kbroker listening on"):
                self.port = int(line.rsplit(":", 1)[1])
                return self
            if not line and self.proc.poll() is not None:
                break
        raise RuntimeError(f"broker did not start; see {self.log_path}:\n{self.tail_log()}")

    def _limit_open_files(self) -> None:
        if self.open_files_limit is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files_limit, self.open_files_limit))

    def tail_log(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except FileNotFoundError:
            return ""

    def connections(self) -> int:
        """The connections the broker still holds on its port: its side of each, from ``/proc/net/tcp``, until it
        closes it (a client's close leaves the broker's side in CLOSE_WAIT until the broker sees it; once the
        broker closes it, the socket has no inode)."""
        held = 0
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table) as rows:
                for row in list(rows)[1:]:
                    fields = row.split()
                    local_port, state, inode = int(fields[1].rsplit(":", 1)[1], 16), fields[3], fields[9]
                    held += local_port == self.port and state != "0A" and inode != "0"   # (0A: listening)
        return held

    def kill(self) -> None:
        """kill -9: no flush, no checkpoint, no clean-shutdown marker."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def pause(self) -> None:
        """SIGSTOP: the process stays, its sockets stay open, it answers nothing."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: the broker's graceful shutdown. Returns its exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._dump_stacks()
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def _dump_stacks(self) -> None:
        """A broker that ignores SIGTERM is a bug: leave its stacks in its log for the failure report."""
        try:
            spy = os.path.join(os.path.dirname(sys.executable), "py-spy")
            found = subprocess.run([spy, "dump", "--pid", str(self.proc.pid)],
                                   capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.TimeoutExpired):
            return
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write("\n--- stacks at SIGTERM timeout ---\n" + found)

    def restart(self) -> "BrokerProcess":
        self.stop()
        return self.start()
