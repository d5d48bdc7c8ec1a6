"""Per-logger levels that change at runtime: Kafka's BROKER_LOGGER configs (``kafka-configs --entity-type
broker-loggers``), over structlog.

Every logger is made by ``structlog.get_logger(name)`` with a dotted name (``broker.cluster.controller``,
``storage.log``). A level set for a name applies to it and to the names under it (``broker.cluster`` covers
``broker.cluster.controller``) unless one of those has its own; everything else follows ``root``. Like Kafka,
changes are not persisted: a restart returns to the configured level.

Invariant: a logger's method for a level below its effective level returns without building an event; the
effective level of a name is computed once per change and then read from a dict.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog
from structlog._log_levels import LEVEL_TO_NAME

ROOT = "root"
# Kafka's (log4j's) level names and the numbers the logging module uses; TRACE, ALL and OFF at the ends.
KAFKA_LEVELS = {"ALL": 0, "TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
                "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": 100}
NAMES = {number: name for name, number in KAFKA_LEVELS.items()}
PACKAGES = ("broker", "storage", "coordinators", "protocol", "client")   # the first part of every logger name


class LogLevels:
    def __init__(self, root: int = logging.INFO) -> None:
        self.root = root
        self.levels: dict[str, int] = {}        # names given their own level
        self.seen: set[str] = set()             # names of loggers made so far
        self._effective: dict[str, int] = {}

    def of(self, name: str) -> int:
        level = self._effective.get(name)
        if level is None:
            probe, level = name, self.root
            while probe:
                if probe in self.levels:
                    level = self.levels[probe]
                    break
                probe = probe.rpartition(".")[0]
            self._effective[name] = level
        return level

    def is_logger(self, name: str) -> bool:
        """A name a level may be set for: root, or any name under kbroker's packages (made yet or not)."""
        return name == ROOT or name.split(".")[0] in PACKAGES

    def set(self, name: str, level: int | None) -> None:
        """Give ``name`` its own level, or (None) let it follow the names above it again."""
        if name == ROOT:
            self.root = level if level is not None else self.root
        elif level is None:
            self.levels.pop(name, None)
        else:
            self.levels[name] = level
        self._effective.clear()

    def described(self) -> list[tuple[str, str]]:
        """(logger, Kafka level name) for root, every logger made so far and every name given a level."""
        names = sorted((self.seen | set(self.levels)) - {ROOT})
        return [(ROOT, NAMES.get(self.root, "INFO"))] + [(n, NAMES.get(self.of(n), "INFO")) for n in names]


LEVELS = LogLevels()


class _NamedPrintLogger(structlog.PrintLogger):
    def __init__(self, file, name: str) -> None:
        super().__init__(file)
        self.name = name


class _NamedPrintLoggerFactory:
    def __init__(self, file=None) -> None:
        self.file = file or sys.stderr

    def __call__(self, *args: Any) -> _NamedPrintLogger:
        name = str(args[0]) if args else ROOT
        LEVELS.seen.add(name)
        return _NamedPrintLogger(self.file, name)


def _method(level: int):
    method_name = LEVEL_TO_NAME.get(level, "critical")

    def meth(self, event: str, *args: Any, **kw: Any) -> Any:
        if level < LEVELS.of(self._logger.name):
            return None
        return self._proxy_to_logger(method_name, event % args if args else event, **kw)
    meth.__name__ = method_name
    return meth


class LeveledBoundLogger(structlog.BoundLoggerBase):
    """A bound logger whose level is its name's in ``LEVELS`` (read on every call, so changes apply at once)."""

    debug = _method(logging.DEBUG)
    info = _method(logging.INFO)
    warning = warn = _method(logging.WARNING)
    error = err = _method(logging.ERROR)
    critical = fatal = _method(logging.CRITICAL)
    msg = _method(logging.CRITICAL)

    def exception(self, event: str, *args: Any, **kw: Any) -> Any:
        kw.setdefault("exc_info", True)
        return self.error(event, *args, **kw)

    def log(self, level: int, event: str, *args: Any, **kw: Any) -> Any:
        if level < LEVELS.of(self._logger.name):
            return None
        return self._proxy_to_logger(LEVEL_TO_NAME.get(level, "critical"), event % args if args else event, **kw)


def configure(level: int, processors: list) -> None:
    """structlog for the broker: ``level`` at root, per-logger levels from ``LEVELS`` thereafter."""
    LEVELS.set(ROOT, level)
    structlog.configure(processors=processors, wrapper_class=LeveledBoundLogger,
                        logger_factory=_NamedPrintLoggerFactory(sys.stderr), cache_logger_on_first_use=True)
