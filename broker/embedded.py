"""A real broker inside this process, for tests and scripts: ``with KBroker() as b: b.bootstrap_servers``.

The broker runs on its own event loop (uvloop) in a daemon thread, listens on
127.0.0.1 on a port the kernel picks, and keeps its data in a directory of
its own (a temporary one, removed afterwards, unless ``data_dir`` is given).
It is the same broker as ``kbroker serve``, with single-broker settings for
the internal topics and no rebalance delay; ``config`` overrides any key.
Clients reach it over real sockets, from any thread or event loop.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import threading
import time

import structlog

from kbroker.broker.configuration import log_levels

EMBEDDED_DEFAULTS = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}


def _quiet_logging() -> None:
    """Warnings and errors to stderr, unless the program configured structlog itself (then its choice stands)."""
    if not structlog.is_configured():
        log_levels.configure(logging.WARNING, [
            structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info, structlog.dev.ConsoleRenderer(colors=False)])


class KBroker:
    def __init__(self, data_dir: str | None = None, config: dict[str, str] | None = None) -> None:
        self._data_dir = data_dir
        self._config = dict(config or {})
        self._temporary: str | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.broker = None
        self.start_seconds = 0.0   # how long start() took

    @property
    def bootstrap_servers(self) -> str:
        host, port = self.broker.bound[0]
        return f"{host}:{port}"

    @property
    def port(self) -> int:
        return self.broker.bound[0][1]

    def start(self) -> "KBroker":
        from kbroker.broker.configuration.config import BrokerConfig   # (imported here: a pytest run that never uses the fixture
        from kbroker.broker.server import Broker          # does not load the broker)

        began = time.perf_counter()
        _quiet_logging()
        if self._data_dir is None:
            self._temporary = self._data_dir = tempfile.mkdtemp(prefix="kbroker-")
        config = BrokerConfig.from_dict({**EMBEDDED_DEFAULTS, "log.dirs": self._data_dir, **self._config})
        self.broker = Broker(config)
        self._thread = threading.Thread(target=self._run, name="kbroker", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("kbroker did not start within 30 s")
        if self._error is not None:
            raise self._error
        self.start_seconds = time.perf_counter() - began
        return self

    def _run(self) -> None:
        import uvloop

        loop = self._loop = uvloop.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:   # a failed start: start() raises it in the caller's thread
            self._error = exc
            self._ready.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        await self.broker.start()
        self._ready.set()
        await self._stopping.wait()
        await self.broker.stop()

    def run_on_loop(self, coro):
        """Run ``coro`` on the broker's own event loop and return its result: for a benchmark or test that
        calls into the broker's objects, which belong to that loop's thread."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def stop(self) -> None:
        if self._thread is not None and self._thread.is_alive() and self._loop is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join(60)
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)
            self._temporary = None

    def __enter__(self) -> "KBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
