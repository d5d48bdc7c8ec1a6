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
  asking for the dir the replica is in leaves it there.
"""

from __future__ import annotations

import asyncio
import os

import structlog

from kbroker.broker.replication.fetcher import truncation_offset
from kbroker.client.tasks import cancel_and_wait
from kbroker.protocol.errors import ErrorCode
from kbroker.storage.log import Log, OffsetOutOfRange

log = structlog.get_logger("broker.replication.alter_log_dirs")

CHUNK_BYTES = 1 << 20   # copied per event-loop turn: other requests run between chunks


class ReplicaAlterLogDirs:
    def __init__(self, replica_manager) -> None:
        self.replica_manager = replica_manager
        self.log_manager = replica_manager.log_manager
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
            return ErrorCode.REPLICA_NOT_AVAILABLE
        if current.parent_dir == log_dir or tp in self.futures:
            return ErrorCode.NONE
        self.futures[tp] = lm.create_future(tp, log_dir)
        self._tasks[tp] = asyncio.create_task(self._copy(tp))
        log.info("replica_log_dir_move_started", topic=tp[0], partition=tp[1], log_dir=log_dir)
        return ErrorCode.NONE

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
                if self._step(partition.log, future):
                    partition.log = self.log_manager.promote_future(tp, future)
                    del self.futures[tp], self._tasks[tp]
                    return
                await asyncio.sleep(0)
        except (OSError, OffsetOutOfRange) as exc:
            # The current log moved under the copy (retention, truncation) or a disk failed: start over later.
            log.warning("replica_log_dir_move_failed", topic=tp[0], partition=tp[1], error=str(exc))
        self._tasks.pop(tp, None)   # (this task ends here: not one to cancel)
        self.cancel(tp)

    @staticmethod
    def _step(current: Log, future: Log) -> bool:
        """Copy one chunk; True when ``future`` has everything ``current`` has (swap now, in this step)."""
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
        found = current.read(future.log_end_offset, CHUNK_BYTES, current.log_end_offset, True)
        if found is not None:
            future.append_as_follower(os.pread(found.segment.fileno(), found.length, found.position))
        return False

    async def close(self) -> None:
        for tp, task in list(self._tasks.items()):
            await cancel_and_wait(task)
        self._tasks.clear()
        for future in self.futures.values():
            future.close()   # left on disk: start-up removes it (the current log is intact)
        self.futures.clear()
