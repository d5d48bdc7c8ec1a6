"""LogManager: every partition log under ``log.dirs``, and the checkpoints that speed up recovery.

Each log dir holds ``<topic>-<partition>/`` folders plus Kafka's checkpoint
files: ``recovery-point-offset-checkpoint`` (offsets below which segments were
flushed), ``log-start-offset-checkpoint`` and ``replication-offset-checkpoint``
(high watermarks). ``.kafka_cleanshutdown`` marks a clean stop; without it the
logs are recovered from their recovery points on start-up.

A replica moving to another log dir (AlterReplicaLogDirs) has a *future* log
there, ``<topic>-<partition>.<id>-future``, which replaces the current one
once it has caught up: the current folder is renamed ``...-delete`` (removed
after ``file.delete.delay.ms``, as fetches may still be sending from it),
then the future folder takes the partition's name. A crash between the two
renames leaves a ``-delete`` folder and the future one, complete and flushed,
but no current one: start-up gives the future folder the partition's name.
A ``-future`` folder beside its partition's current folder is a move a stop
cut short: start-up opens it (recovered like any log after a crash) and keeps
it in ``found_futures`` for the move to go on once the replica is served
again, as Kafka resumes its alter-log-dirs fetchers. Any other ``-future`` or
``-delete`` folder is removed then.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid

import structlog

from kbroker.storage import cleaner
from kbroker.storage.checkpoint import CheckpointFile, read_checkpoint, write_checkpoint
from kbroker.storage.log import Log, partition_dir_name
from kbroker.storage.log_config import LONG_MAX, LogConfig
from kbroker.storage.logs import Logs
from kbroker.storage.open_files import DESCRIPTOR_ERRORS, OPEN_FILES

log = structlog.get_logger("storage.log_manager")
RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START = "log-start-offset-checkpoint"
REPLICATION = "replication-offset-checkpoint"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
CLEANER = "cleaner-offset-checkpoint"
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_MOVED_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)\.[0-9a-f]{32}-(?P<kind>future|delete)$")


class LogManager:
    def __init__(self, log_dirs: list[str], clock=time.time) -> None:
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.clock = clock
        self.logs = Logs()
        # Where a replica not hosted yet is to be created (AlterReplicaLogDirs before its LeaderAndIsr)
        self.preferred_dirs: dict[tuple[str, int], str] = {}
        self._retired: list[tuple[float, Log]] = []   # replaced by their future logs, deleted when due
        # Future logs of moves a stop cut short, found at start-up, until the mover takes them (take_future)
        self.found_futures: dict[tuple[str, int], Log] = {}
        # Failed log dirs (an I/O error on them), and the partitions whose logs were there
        self.offline_dirs: set[str] = set()
        self.offline_partitions: dict[tuple[str, int], str] = {}
        # Called with (log dir, partitions lost) when an I/O error takes a dir offline (the replica manager
        # stops those partitions)
        self.on_dir_failure = None
        self.descriptor_failures = 0   # operations that failed for want of a descriptor (a metric)
        self._descriptor_warned = -10.0
        self._checkpoints: dict[str, CheckpointFile] = {}   # path -> the file's text as last written
        for d in self.log_dirs:
            try:
                os.makedirs(d, exist_ok=True)
            except OSError as exc:
                self._offline_at_start(d, exc)

    # ------------------------------------------------------------------ failed log dirs (JBOD)
    @property
    def online_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def is_online(self, log_dir: str) -> bool:
        return log_dir not in self.offline_dirs

    def dir_of_offline(self, tp: tuple[str, int]) -> str | None:
        """The failed log dir ``tp``'s replica was in, or None."""
        return self.offline_partitions.get(tp)

    def _offline_at_start(self, log_dir: str, exc: OSError) -> None:
        self.offline_dirs.add(log_dir)
        log.error("log_dir_offline_at_startup", log_dir=log_dir, error=str(exc))

    def fail_dir(self, log_dir: str, exc: BaseException | None = None) -> list[tuple[str, int]]:
        """Take ``log_dir`` offline after an I/O error: its logs are closed and forgotten, their partitions
        listed as offline; returns them (empty if the dir was already offline)."""
        if log_dir in self.offline_dirs:
            return []
        self.offline_dirs.add(log_dir)
        lost = [tp for tp, lg in self.logs.items() if lg.parent_dir == log_dir]
        for tp in lost:
            self.offline_partitions[tp] = log_dir
            _close_quietly(self.logs.pop(tp))
        self._retired = [(t, lg) for t, lg in self._retired if lg.parent_dir != log_dir]
        for tp, future in list(self.found_futures.items()):
            if future.parent_dir == log_dir or tp in lost:
                _close_quietly(self.found_futures.pop(tp))
        self.preferred_dirs = {tp: d for tp, d in self.preferred_dirs.items() if d != log_dir}
        log.error("log_dir_failed", log_dir=log_dir, partitions=len(lost), error=str(exc) if exc else None)
        return lost

    def report(self, log_dir: str, exc: OSError) -> None:
        """An I/O error on ``log_dir``: take it offline and tell the broker (Kafka's LogDirFailureChannel).
        Running out of descriptors (EMFILE, ENFILE) is not the disk's fault: the operation failed, the dir
        stays online, and a warning names the limit."""
        if exc.errno in DESCRIPTOR_ERRORS:
            self.descriptor_failures += 1
            now = time.monotonic()
            if now >= self._descriptor_warned + 10:   # (at most one line in 10 s: it repeats while it lasts)
                self._descriptor_warned = now
                log.warning("out_of_file_descriptors", log_dir=log_dir, error=str(exc), failures=self.descriptor_failures,
                            open_log_files=len(OPEN_FILES), limit=_descriptor_limit())
            return
        if log_dir in self.offline_dirs:
            return
        lost = self.fail_dir(log_dir, exc)
        if self.on_dir_failure is not None:
            self.on_dir_failure(log_dir, lost)

    def _each_log(self, fn, logs=None) -> int:
        """``fn(log)`` for every log (or those of ``logs``); an I/O error takes that log's dir offline instead
        of stopping the loop. Returns the sum of what ``fn`` returned."""
        total = 0
        for lg in list(self.logs.values()) if logs is None else logs:
            if self.offline_dirs and lg.parent_dir in self.offline_dirs:
                continue
            try:
                total += fn(lg) or 0
            except OSError as exc:
                self.report(lg.parent_dir, exc)
        return total

    def discover(self) -> dict[tuple[str, int], str]:
        """Partition folders on disk: (topic, partition) -> log dir."""
        found = {}
        for d in self.online_dirs:
            try:
                names = os.listdir(d)
            except OSError as exc:
                self._offline_at_start(d, exc)
                continue
            for name in names:
                m = _PARTITION_DIR.match(name)
                if m and os.path.isdir(os.path.join(d, name)) and not name.endswith("-delete"):
                    found[(m["topic"], int(m["partition"]))] = d
        return found

    def _settle_moves(self, current: dict[tuple[str, int], str]) -> dict[tuple[str, int], str]:
        """Finish or drop what moves between log dirs left behind (see the module's docstring); ``current``
        (``discover``'s partition folders) gains the futures promoted. Returns the paths of the future
        folders kept, by partition: moves to resume."""
        moved = {d: [m for m in map(_MOVED_DIR.match, sorted(os.listdir(d))) if m is not None]
                 for d in self.online_dirs}
        swapping = {(m["topic"], int(m["partition"])) for ms in moved.values() for m in ms if m["kind"] == "delete"}
        kept: dict[tuple[str, int], str] = {}
        for d, matches in moved.items():
            for m in matches:
                tp = (m["topic"], int(m["partition"]))
                path = os.path.join(d, m.string)
                if m["kind"] == "future" and tp not in current and tp in swapping:
                    os.rename(path, os.path.join(d, partition_dir_name(*tp)))
                    current[tp] = d
                    log.warning("future_log_promoted_at_startup", topic=tp[0], partition=tp[1], log_dir=d)
                elif (m["kind"] == "future" and tp not in swapping and current.get(tp, d) != d
                      and tp not in kept):
                    kept[tp] = path
                else:
                    shutil.rmtree(path, ignore_errors=True)
        return kept

    def load_all(self, config_for) -> None:
        """Open every partition found on disk with ``config_for(topic)``; recover what needs it."""
        started = time.monotonic()
        found = self.discover()
        try:
            kept = self._settle_moves(found)
        except OSError as exc:
            log.error("log_dir_move_settling_failed", error=str(exc))
            kept = {}
        for d in self.online_dirs:
            try:
                self._load_dir(d, found, config_for, started)
            except OSError as exc:   # a dir that cannot be read is offline; the others serve (JBOD)
                for tp in [tp for tp, lg in self.logs.items() if lg.parent_dir == d]:
                    _close_quietly(self.logs.pop(tp))
                self._offline_at_start(d, exc)
        for tp, path in kept.items():
            if tp not in self.logs or os.path.dirname(path) in self.offline_dirs:
                continue   # (left on disk: the next start decides again)
            try:   # no checkpoint covers a future log: it is recovered whole, as after a crash
                self.found_futures[tp] = Log(path, tp[0], tp[1], config_for(tp[0]), clock=self.clock)
            except OSError as exc:
                log.error("future_log_not_loaded", topic=tp[0], partition=tp[1], path=path, error=str(exc))

    def take_future(self, tp: tuple[str, int]) -> Log | None:
        """The future log of ``tp``'s move that a stop cut short, if start-up found one (handed over once)."""
        return self.found_futures.pop(tp, None)

    def _load_dir(self, d: str, found, config_for, started: float) -> None:
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

    def get_or_create(self, topic: str, partition: int, config: LogConfig, is_new: bool = True) -> Log:
        """The partition's log, created in the preferred or least used online dir if there is none.

        Raises KafkaStorageError when the replica was in a failed dir, or when it is not ``is_new`` (it
        should exist) and some dir is offline: it may be there, and an empty log in its place would serve
        as if its records never were (Kafka's rule).
        """
        tp = (topic, partition)
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        if tp in self.offline_partitions:
            raise KafkaStorageError(f"{topic}-{partition} is in the failed log dir {self.offline_partitions[tp]}")
        if not is_new and self.offline_dirs:
            raise KafkaStorageError(f"cannot create a log for {topic}-{partition}: log dirs "
                                    f"{sorted(self.offline_dirs)} are offline")
        online = self.online_dirs
        if not online:
            raise KafkaStorageError("every log dir is offline")
        target = self.preferred_dirs.pop(tp, None)
        if target not in online and len(online) == 1:
            target = online[0]   # (the count below walks every log: with one dir there is nothing to choose)
        if target not in online:
            counts = {d: 0 for d in online}
            for lg in self.logs.values():
                counts[lg.parent_dir] = counts.get(lg.parent_dir, 0) + 1
            target = min(online, key=lambda d: counts.get(d, 0))
        try:
            created = Log(os.path.join(target, partition_dir_name(topic, partition)), topic, partition, config,
                          clock=self.clock)
        except OSError as exc:
            self.report(target, exc)
            raise KafkaStorageError(f"cannot create a log for {topic}-{partition} in {target}: {exc}") from exc
        self.logs[tp] = created
        return created

    # ------------------------------------------------------------------ moving a replica between log dirs
    def create_future(self, tp: tuple[str, int], log_dir: str) -> Log:
        """An empty log in ``log_dir`` for ``tp``'s replica to be copied into, starting at the current log's
        start offset."""
        current = self.logs[tp]
        path = os.path.join(log_dir, f"{partition_dir_name(*tp)}.{uuid.uuid4().hex}-future")
        future = Log(path, tp[0], tp[1], current.config, clock=self.clock)
        if current.log_start_offset > 0:
            future.truncate_fully_and_start_at(current.log_start_offset)
        return future

    def promote_future(self, tp: tuple[str, int], future: Log) -> Log:
        """Make ``future`` (caught up: same log end as the current log) the partition's log; returns the log
        now in use. Call with no append in between: the current log's producer state, leader epochs, log
        start and high watermark carry over as they are at this instant."""
        current = self.logs[tp]
        assert future.log_end_offset == current.log_end_offset, (future.log_end_offset, current.log_end_offset)
        future.producer_state = current.producer_state
        future.close()   # flushed, with a producer-state snapshot at the log end
        current.flush()
        name = partition_dir_name(*tp)
        retired = os.path.join(current.parent_dir, f"{name}.{uuid.uuid4().hex}-delete")
        for segment in current.segments:   # fetches may still send from them: their paths are about to change
            segment.detach()
        os.rename(current.directory, retired)
        _fsync_dir(current.parent_dir)
        final = os.path.join(future.parent_dir, name)
        os.rename(future.directory, final)
        _fsync_dir(future.parent_dir)
        current.directory = retired
        self._retired.append((self.clock() + current.config.file_delete_delay_ms / 1000, current))
        moved = Log(final, tp[0], tp[1], current.config, recovery_point=current.log_end_offset,
                    log_start_offset=current.log_start_offset, high_watermark=current.high_watermark,
                    clean_shutdown=True, clock=self.clock)
        # (loading forgets an epoch that starts at the log end: a leader's epoch with no batch yet is kept)
        moved.leader_epoch_cache.entries = list(current.leader_epoch_cache.entries)
        moved.leader_epoch_cache._save()
        self.logs[tp] = moved
        log.info("replica_log_dir_moved", topic=tp[0], partition=tp[1], log_dir=future.parent_dir,
                 log_end_offset=moved.log_end_offset)
        return moved

    def _reap_retired(self) -> None:
        now = self.clock()
        due = [lg for t, lg in self._retired if t <= now]
        self._retired = [(t, lg) for t, lg in self._retired if t > now]
        for lg in due:
            lg.delete()

    def delete(self, topic: str, partition: int) -> None:
        for logs in (self.logs, self.found_futures):
            existing = logs.pop((topic, partition), None)
            if existing is not None:
                existing.delete()

    def checkpoint(self) -> None:
        """Write each online dir's three checkpoint files (recovery points, log start offsets, high watermarks)."""
        by_dir: dict[str, tuple[list, list[Log]]] = {d: ([], []) for d in self.online_dirs}
        for tp, lg in self.logs.items():
            if (listed := by_dir.get(lg.parent_dir)) is not None:
                listed[0].append(tp)
                listed[1].append(lg)
        for d, (partitions, here) in by_dir.items():
            try:
                for name, offsets in ((RECOVERY_POINT, [lg.recovery_point for lg in here]),
                                      (LOG_START, [lg.log_start_offset for lg in here]),
                                      (REPLICATION, [lg.high_watermark for lg in here])):
                    path = os.path.join(d, name)
                    self._checkpoints.setdefault(path, CheckpointFile(path)).write(partitions, offsets)
            except OSError as exc:
                self.report(d, exc)

    def cleanup(self, start_moved=None) -> int:
        """Apply retention to every log; returns the number of segments deleted. ``start_moved((topic,
        partition))`` for each log whose log start offset moved (the broker tells the fetches that wait)."""
        def one(lg: Log) -> int:
            start = lg.log_start_offset
            deleted = lg.delete_old_segments()
            if start_moved is not None and lg.log_start_offset != start:
                start_moved((lg.topic, lg.partition))
            return deleted
        return self._each_log(one)

    def clean(self) -> int:
        """One log cleaner pass over every compacted log that needs it, in one go; returns how many were cleaned.

        ``cleaner-offset-checkpoint`` keeps, per log dir, where each log's
        dirty part begins, so a restart does not recompact what is clean.
        """
        return sum(cleaner.run_to_end(self._cleaning_dir(d)) for d in self.online_dirs)

    async def clean_in_slices(self, slice_s: float = 0.005) -> int:
        """The broker's pass, on its event loop: as ``clean``, but everything else runs at least every ``slice_s``
        seconds of cleaning and fsyncs run on a worker thread (Kafka's cleaner has threads of its own; a
        compaction done in one go here would stall every client for as long as it takes)."""
        cleaned = 0
        for d in self.online_dirs:
            cleaned += await cleaner.run_in_slices(self._cleaning_dir(d), slice_s)
        return cleaned

    def _cleaning_dir(self, d: str):
        """A generator (see ``cleaner.cleaning``) cleaning the logs of one dir; returns how many it cleaned. A log
        whose segments changed while it was being cleaned is left for the next pass; a failing dir is reported."""
        cleaned = 0
        try:
            # (the compacted logs first: a pass over a dir without any, every log.cleaner.backoff.ms, reads nothing)
            compacted = [(tp, lg) for tp, lg in self.logs.where("compacted", lambda lg: lg.config.compact)
                         if lg.parent_dir == d]
            if not compacted:
                return 0
            path = os.path.join(d, CLEANER)
            checkpoints = read_checkpoint(path)
            changed = False
            now_ms = int(self.clock() * 1000)
            for tp, lg in compacted:
                if self.logs.get(tp) is not lg:
                    continue
                first_dirty = max(checkpoints.get(tp, 0), lg.log_start_offset)
                if not cleaner.needs_cleaning(lg, first_dirty, now_ms):
                    continue
                try:
                    result = yield from cleaner.cleaning(lg, first_dirty, now_ms)
                except cleaner.Abandoned:
                    log.info("log_cleaning_abandoned", topic=tp[0], partition=tp[1])
                    continue
                checkpoints[tp] = result.first_uncleanable
                changed = True
                cleaned += 1
            if changed:
                write_checkpoint(path, {tp: o for tp, o in checkpoints.items() if tp in self.logs})
        except OSError as exc:
            self.report(d, exc)
        return cleaned

    def expire_producers(self, expiration_ms: int) -> int:
        """``producer.id.expiration.ms``: drop idle producers' state from every log."""
        now_ms = int(self.clock() * 1000)
        return sum(lg.producer_state.expire(now_ms, expiration_ms) for lg in self.logs.values())

    def flush_by_time(self) -> None:
        # Only logs with something unflushed and a finite flush.ms (Kafka's default is none) are looked at, from
        # the list of those with a finite one: the pass runs every second, and a walk of every log each time was
        # most of an idle broker's CPU at 50,000 partitions.
        due = [lg for _, lg in self.logs.where("flushed by time", lambda lg: lg.config.flush_ms < LONG_MAX)
               if lg.unflushed_messages]
        if due:
            self._each_log(lambda lg: lg.maybe_flush_by_time(), due)
        try:
            self._reap_retired()
        except OSError:
            pass   # a retired copy's dir failed: fail_dir forgets it

    def shutdown(self) -> None:
        # Every log is written out, then the file system synced once: an fsync per file (three per segment and
        # a snapshot per log) took minutes for 50,000 partitions. The checkpoints (recovery points now at each
        # log's end) and the clean-shutdown marker come after the sync, so a crash before them recovers as from
        # any crash (a torn snapshot is ignored and rebuilt).
        self._each_log(lambda lg: lg.close(durable=False))
        os.sync()
        for lg in self.logs.values():
            if lg.parent_dir not in self.offline_dirs:
                lg.recovery_point = lg.log_end_offset
        self.checkpoint()
        for _, lg in self._retired:
            _close_quietly(lg, delete=True)
        self._retired = []
        for lg in self.found_futures.values():   # not resumed (the replica was not served): kept for next time
            _close_quietly(lg)
        self.found_futures.clear()
        for d in self.online_dirs:   # a failed dir is recovered at the next start, not trusted as clean
            try:
                open(os.path.join(d, CLEAN_SHUTDOWN), "w").close()
            except OSError:
                pass
        self.logs.clear()


class KafkaStorageError(Exception):
    """A replica's log dir has failed (KAFKA_STORAGE_ERROR)."""


def _close_quietly(lg: Log, delete: bool = False) -> None:
    """Release a log's files on a dir that may be failing: errors are expected and change nothing."""
    try:
        lg.delete() if delete else lg.close()
    except OSError:
        for segment in lg.segments:
            try:
                segment.close()
            except OSError:
                pass


def _descriptor_limit() -> int:
    import resource

    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _fsync_dir(path: str) -> None:
    """Make a rename in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
