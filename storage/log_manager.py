"""LogManager: every partition log under ``log.dirs``, and the checkpoints that speed up recovery.

Each log dir holds ``<topic>-<partition>/`` folders plus Kafka's checkpoint
files: ``recovery-point-offset-checkpoint`` (offsets below which segments were
flushed), ``log-start-offset-checkpoint`` and ``replication-offset-checkpoint``
(high watermarks). ``.kafka_cleanshutdown`` marks a clean stop; without it the
logs are recovered from their recovery points on start-up.
"""

from __future__ import annotations

import os
import re
import time

import structlog

from kbroker.storage import cleaner
from kbroker.storage.checkpoint import read_checkpoint, write_checkpoint
from kbroker.storage.log import Log, partition_dir_name
from kbroker.storage.log_config import LogConfig

log = structlog.get_logger("storage.log_manager")
RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START = "log-start-offset-checkpoint"
REPLICATION = "replication-offset-checkpoint"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
CLEANER = "cleaner-offset-checkpoint"
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


class LogManager:
    def __init__(self, log_dirs: list[str], clock=time.time) -> None:
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.clock = clock
        self.logs: dict[tuple[str, int], Log] = {}
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)

    def discover(self) -> dict[tuple[str, int], str]:
        """Partition folders on disk: (topic, partition) -> log dir."""
        found = {}
        for d in self.log_dirs:
            for name in os.listdir(d):
                m = _PARTITION_DIR.match(name)
                if m and os.path.isdir(os.path.join(d, name)) and not name.endswith("-delete"):
                    found[(m["topic"], int(m["partition"]))] = d
        return found

    def load_all(self, config_for) -> None:
        """Open every partition found on disk with ``config_for(topic)``; recover what needs it."""
        started = time.monotonic()
        found = self.discover()
        for d in self.log_dirs:
            clean = os.path.exists(os.path.join(d, CLEAN_SHUTDOWN))
            recovery = read_checkpoint(os.path.join(d, RECOVERY_POINT))
            starts = read_checkpoint(os.path.join(d, LOG_START))
            hws = read_checkpoint(os.path.join(d, REPLICATION))
            for tp, log_dir in found.items():
                if log_dir != d or tp in self.logs:
                    continue
                self.logs[tp] = Log(os.path.join(d, partition_dir_name(*tp)), tp[0], tp[1], config_for(tp[0]),
                                    recovery_point=recovery.get(tp, 0), log_start_offset=starts.get(tp, 0),
                                    high_watermark=hws.get(tp, 0), clean_shutdown=clean, clock=self.clock)
            if clean:
                os.unlink(os.path.join(d, CLEAN_SHUTDOWN))
            log.info("logs_loaded", log_dir=d, clean_shutdown=clean, partitions=len(self.logs),
                     seconds=round(time.monotonic() - started, 3))

    def get(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig) -> Log:
        tp = (topic, partition)
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        counts = {d: 0 for d in self.log_dirs}
        for lg in self.logs.values():
            counts[os.path.dirname(lg.directory)] = counts.get(os.path.dirname(lg.directory), 0) + 1
        target = min(self.log_dirs, key=lambda d: counts.get(d, 0))
        created = Log(os.path.join(target, partition_dir_name(topic, partition)), topic, partition, config,
                      clock=self.clock)
        self.logs[tp] = created
        return created

    def delete(self, topic: str, partition: int) -> None:
        existing = self.logs.pop((topic, partition), None)
        if existing is not None:
            existing.delete()

    def checkpoint(self) -> None:
        for d in self.log_dirs:
            here = {tp: lg for tp, lg in self.logs.items() if os.path.dirname(lg.directory) == d}
            write_checkpoint(os.path.join(d, RECOVERY_POINT), {tp: lg.recovery_point for tp, lg in here.items()})
            write_checkpoint(os.path.join(d, LOG_START), {tp: lg.log_start_offset for tp, lg in here.items()})
            write_checkpoint(os.path.join(d, REPLICATION), {tp: lg.high_watermark for tp, lg in here.items()})

    def cleanup(self) -> int:
        """Apply retention to every log; returns the number of segments deleted."""
        return sum(lg.delete_old_segments() for lg in list(self.logs.values()))

    def clean(self) -> int:
        """One log cleaner pass over every compacted log that needs it; returns how many were cleaned.

        ``cleaner-offset-checkpoint`` keeps, per log dir, where each log's
        dirty part begins, so a restart does not recompact what is clean.
        """
        now_ms = int(self.clock() * 1000)
        cleaned = 0
        for d in self.log_dirs:
            path = os.path.join(d, CLEANER)
            checkpoints = read_checkpoint(path)
            changed = False
            for tp, lg in list(self.logs.items()):
                if os.path.dirname(lg.directory) != d or not lg.config.compact:
                    continue
                first_dirty = max(checkpoints.get(tp, 0), lg.log_start_offset)
                if not cleaner.needs_cleaning(lg, first_dirty, now_ms):
                    continue
                result = cleaner.clean(lg, first_dirty, now_ms)
                checkpoints[tp] = result.first_uncleanable
                changed = True
                cleaned += 1
            if changed:
                write_checkpoint(path, {tp: o for tp, o in checkpoints.items() if tp in self.logs})
        return cleaned

    def expire_producers(self, expiration_ms: int) -> int:
        """``producer.id.expiration.ms``: drop idle producers' state from every log."""
        now_ms = int(self.clock() * 1000)
        return sum(lg.producer_state.expire(now_ms, expiration_ms) for lg in self.logs.values())

    def flush_by_time(self) -> None:
        for lg in self.logs.values():
            lg.maybe_flush_by_time()

    def shutdown(self) -> None:
        for lg in self.logs.values():
            lg.flush()
        self.checkpoint()
        for lg in self.logs.values():
            lg.close()
        for d in self.log_dirs:
            open(os.path.join(d, CLEAN_SHUTDOWN), "w").close()
        self.logs.clear()
