"""ReplicaAlterLogDirs: moving a local replica to another of ``log.dirs`` while it keeps serving
(AlterReplicaLogDirs, Kafka's ReplicaAlterLogDirsThread).

Invariants:
* the current log serves every read and write until the swap; the future log
  only copies it, batch for batch, at the same offsets, as a follower copies
  its leader;
* the swap happens in one event-loop step in which the future log's end equals
  the current log's, so no append falls between copy and swap;
* a future log whose tail the current log no longer has (the replica, as a
  follower, truncated) is cut back by leader epochs before copying on;
* one move per partition: asking for another dir abandons the move under way,
  asking for the dir the replica is in leaves it there;
* a move a stop cut short goes on from where its future log ends once the
  replica is served again (``resume``), as Kafka restarts its alter-log-dirs
  fetchers from the future logs it finds at start-up;
* ``replica.alter.log.dirs.io.max.bytes.per.second`` (dynamic) bounds the bytes
  copied per second over all moves: a copy over it waits out its throttle time.
"""

from __future__ import annotations

import asyncio
import os

import structlog

from kbroker.broker.replication.fetcher import truncation_offset
from kbroker.broker.replication.quota import alter_log_dirs_quota
from kbroker.client.tasks import cancel_and_wait
from kbroker.protocol.errors import ErrorCode
from kbroker.storage.log import Log, OffsetOutOfRange

log = structlog.get_logger("broker.replication.alter_log_dirs")

CHUNK_BYTES = 1 << 20   # copied per event-loop turn: other requests run between chunks


class ReplicaAlterLogDirs:
    def __init__(self, replica_manager, config) -> None:
        """``config``: the broker's (its copy rate changes at runtime)."""
        self.replica_manager = replica_manager
        self.log_manager = replica_manager.log_manager
        self.quota = alter_log_dirs_quota(replica_manager.broker_id, config)
        self.futures: dict[tuple[str, int], Log] = {}
        self._tasks: dict[tuple[str, int], asyncio.Task] = {}

    def alter(self, tp: tuple[str, int], log_dir: str) -> ErrorCode:
        """Ask for ``tp``'s replica to live in ``log_dir``; Kafka's answer for that partition."""
        lm = self.log_manager
        if log_dir not in lm.log_dirs:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if not lm.is_online(log_dir):
            return ErrorCode.KAFKA_STORAGE_ERROR
        future = self.futures.get(tp)
        if future is not None and future.parent_dir != log_dir:
            self.cancel(tp)
        partition = self.replica_manager.get(*tp)
        current = lm.get(*tp)
        if partition is None or current is None:
            if lm.dir_of_offline(tp) is not None:
                return ErrorCode.KAFKA_STORAGE_ERROR
            lm.preferred_dirs[tp] = log_dir   # created there when the controller assigns it here
            return self.replica_manager.missing_error(*tp)
        if current.parent_dir == log_dir or tp in self.futures:
            return ErrorCode.NONE
        self.futures[tp] = lm.create_future(tp, log_dir)
        self._tasks[tp] = asyncio.create_task(self._copy(tp))
        log.info("replica_log_dir_move_started", topic=tp[0], partition=tp[1], log_dir=log_dir)
        return ErrorCode.NONE

    def resume(self, tp: tuple[str, int]) -> None:
        """``tp``'s replica is served again: go on with a move of it that a stop cut short, if any."""
        future = self.log_manager.take_future(tp)
        if future is None:
            return
        if tp in self.futures or not self.log_manager.is_online(future.parent_dir):
            future.delete()
            return
        self.futures[tp] = future
        self._tasks[tp] = asyncio.create_task(self._copy(tp))
        log.info("replica_log_dir_move_resumed", topic=tp[0], partition=tp[1], log_dir=future.parent_dir,
                 from_offset=future.log_end_offset)

    def lag(self, tp: tuple[str, int]) -> int:
        """How far the future log is behind the current one (DescribeLogDirs' offset lag of a future replica)."""
        future, partition = self.futures.get(tp), self.replica_manager.get(*tp)
        if future is None or partition is None:
            return 0
        return max(partition.log.log_end_offset - future.log_end_offset, 0)

    def cancel(self, tp: tuple[str, int]) -> None:
        """Abandon ``tp``'s move (another dir asked for, the replica deleted or its dir failed)."""
        task = self._tasks.pop(tp, None)
        if task is not None:
            task.cancel()
        future = self.futures.pop(tp, None)
        if future is not None:
            future.delete()

    async def _copy(self, tp: tuple[str, int]) -> None:
        future = self.futures[tp]
        try:
            while True:
                partition = self.replica_manager.get(*tp)
                if partition is None:   # deleted meanwhile
                    break
                wait = self.quota.throttle_time(asyncio.get_running_loop().time())
                if wait > 0:
                    await asyncio.sleep(wait)   # over the copy rate: one timed wait, the throttle time
                    continue
                if self._step(partition, future):
                    partition.log = self.log_manager.promote_future(tp, future)
                    del self.futures[tp], self._tasks[tp]
                    return
                await asyncio.sleep(0)
        except (OSError, OffsetOutOfRange) as exc:
            # The current log moved under the copy (retention, truncation) or a disk failed: start over later.
            log.warning("replica_log_dir_move_failed", topic=tp[0], partition=tp[1], error=str(exc))
        self._tasks.pop(tp, None)   # (this task ends here: not one to cancel)
        self.cancel(tp)

    def _step(self, partition, future: Log) -> bool:
        """Copy one chunk (at most a second's worth of the copy rate, at least one batch); True when
        ``future`` has everything the partition's current log has (swap now, in this step)."""
        current = partition.log
        if future.leader_epoch_cache.latest_epoch >= 0:
            epoch, end = current.leader_epoch_cache.end_offset_for(future.leader_epoch_cache.latest_epoch,
                                                                   current.log_end_offset)
            if end < 0:   # the current log forgot every epoch the copy has (truncated fully): copy anew
                future.truncate_fully_and_start_at(current.log_start_offset)
            else:
                future.truncate_to(truncation_offset(future, epoch, end))
        if future.log_end_offset > current.log_end_offset:
            future.truncate_to(current.log_end_offset)
        if future.log_end_offset < current.log_start_offset:
            future.truncate_fully_and_start_at(current.log_start_offset)
        if future.log_end_offset == current.log_end_offset:
            return True
        chunk_bytes = max(min(CHUNK_BYTES, self.quota.rate), 1)
        found = current.read(future.log_end_offset, chunk_bytes, current.log_end_offset, True)
        if found is not None:
            future.append_as_follower(os.pread(found.segment.fileno(), found.length, found.position))
            self.quota.record(partition, found.length, asyncio.get_running_loop().time())
        return False

    async def close(self) -> None:
        for tp, task in list(self._tasks.items()):
            await cancel_and_wait(task)
        self._tasks.clear()
        for future in self.futures.values():
            future.close()   # left on disk: the next start resumes the move from it
        self.futures.clear()
