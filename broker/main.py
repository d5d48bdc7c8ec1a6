"""Run a broker until SIGTERM or SIGINT, on uvloop."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys

import structlog

from kbroker.broker.configuration import log_levels
from kbroker.broker.configuration.config import BrokerConfig, ConfigError
from kbroker.broker.server import Broker
from kbroker.storage.meta_properties import InconsistentMetaProperties


def configure_logging(level: str = "INFO") -> None:
    """structlog to stderr at ``level``; each logger's level can change later (BROKER_LOGGER configs)."""
    logging.basicConfig(format="%(message)s", stream=sys.stderr, level=getattr(logging, level.upper(), logging.INFO))
    log_levels.configure(getattr(logging, level.upper(), logging.INFO), [
        structlog.contextvars.merge_contextvars, structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso"), structlog.processors.format_exc_info,
        structlog.dev.ConsoleRenderer(colors=False)])


def raise_open_files_limit() -> None:
    """Connections and log files both take descriptors: use the hard limit, and say what it is."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    raised = soft
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            raised = hard
        except (ValueError, OSError):
            pass
    structlog.get_logger("broker").info("open_files_limit", soft_was=soft, hard=hard, soft=raised)


async def run_broker(config: BrokerConfig) -> None:
    broker = Broker(config)
    await broker.start()
    # What start-up built (modules, message schemas, loaded logs and coordinators) lives as long as the broker:
    # frozen, it is left out of the collector's full passes, which otherwise walk all of it (12 ms measured)
    # whenever a burst of allocations (a log cleaning, a coordinator loading) sets one off.
    gc.collect()
    gc.freeze()
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda s=sig: (structlog.get_logger("broker").info(
            "stop_requested", signal=signal.Signals(s).name), stopping.set()))
    # Tests and scripts started with port 0 learn the ports from these lines: each listener's and the metrics
    # endpoint's first, then the first listener's, last, once all are bound.
    for (name, _, _), (host, port) in zip(broker.config.listeners, broker.bound):
        print(f"kbroker listener {name} on {host}:{port}", flush=True)
    if broker.metrics_server is not None:
        print(f"kbroker metrics on port {broker.metrics_server.port}", flush=True)
    host, port = broker.bound[0]
    print(f"kbroker listening on {host}:{port}", flush=True)
    waiting = [asyncio.ensure_future(stopping.wait()), asyncio.ensure_future(broker.wait_stopped())]
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    for w in waiting:
        w.cancel()
    if broker.halted:   # every log dir failed: the broker stopped itself
        raise SystemExit(1)
    watchdog = loop.call_later(SLOW_SHUTDOWN_S, _log_pending_tasks)
    try:
        await broker.stop()
    finally:
        watchdog.cancel()


SLOW_SHUTDOWN_S = 15
LEFTOVER_TASKS_S = 5.0


def _log_pending_tasks() -> None:
    """Shutdown is taking long: say what every task is waiting in (a stuck stop is otherwise only a SIGKILL)."""
    log = structlog.get_logger("broker")
    for task in asyncio.all_tasks():
        frames = [f"{f.f_code.co_filename.rsplit('/', 2)[-1]}:{f.f_lineno} {f.f_code.co_name}"
                  for f in task.get_stack(limit=8)]
        log.warning("shutdown_slow_task", task=task.get_name(), coroutine=task.get_coro().__qualname__,
                    waiting_in=frames)


def serve(properties: str | None, overrides: list[str], log_level: str = "INFO") -> int:
    configure_logging(log_level)
    try:
        config = BrokerConfig.load(properties, overrides)
    except (ConfigError, OSError) as exc:
        print(f"kbroker: {exc}", file=sys.stderr)
        return 2
    import uvloop

    raise_open_files_limit()
    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(run_broker(config))
    except ConfigError as exc:   # a setting only checked as the broker builds what it names (a TLS keystore...)
        print(f"kbroker: {exc}", file=sys.stderr)
        return 2
    except InconsistentMetaProperties as exc:   # a log dir of another broker or cluster: Kafka exits too
        structlog.get_logger("broker").error("startup_refused", error=str(exc))
        print(f"kbroker: {exc}", file=sys.stderr)
        return 1
    finally:
        close_loop(loop)
    return 0


def close_loop(loop: asyncio.AbstractEventLoop, timeout: float = LEFTOVER_TASKS_S) -> None:
    """``asyncio.run``'s clean-up, bounded: the tasks still running once the broker stopped are cancelled and
    given ``timeout`` to end. One that does not (it swallowed its cancellation, or waits on something nothing
    will finish) is named in the log and left behind, so that the process exits: ``asyncio.run`` would wait on
    it for ever, and a broker that stopped cleanly would end in a SIGKILL."""
    leftover = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in leftover:
        task.cancel()
    if leftover:
        ended, stuck = loop.run_until_complete(asyncio.wait(leftover, timeout=timeout))
        for task in ended:   # (as asyncio.run reports them)
            if not task.cancelled() and task.exception() is not None:
                loop.call_exception_handler({"message": "unhandled exception during shutdown",
                                             "exception": task.exception(), "task": task})
        for task in stuck:
            frames = [f"{f.f_code.co_filename.rsplit('/', 2)[-1]}:{f.f_lineno} {f.f_code.co_name}"
                      for f in task.get_stack(limit=8)]
            structlog.get_logger("broker").warning("shutdown_task_stuck", task=task.get_name(),
                                                   coroutine=task.get_coro().__qualname__, waiting_in=frames)
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_default_executor())
    asyncio.set_event_loop(None)
    loop.close()
