"""LeaderEpochFileCache: the ``leader-epoch-checkpoint`` of one partition (KIP-101).

One entry per leader epoch: (epoch, the first offset written in it). A leader
adds its epoch when it becomes leader; a follower adds each epoch it first
sees in the batches it copies. A returning replica asks the leader where its
last epoch ends and truncates what follows, so replicas never diverge.

Invariants: epochs and start offsets both strictly ascend; no entry starts at
or past the log end offset after ``truncate_from_end``. The file is Kafka's
format (a version line, a count line, then ``epoch offset`` lines), written
atomically on every change.
"""

from __future__ import annotations

import bisect
import os

from kbroker.storage.checkpoint import write_atomically

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochFileCache:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, FILE_NAME)
        self.entries: list[tuple[int, int]] = []
        self.exists = os.path.exists(self.path)
        if self.exists:
            self._load()

    def _load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().split("\n")
            count = int(lines[1])
            self.entries = [(int(e), int(o)) for e, o in (lines[2 + i].split() for i in range(count))]
        except (ValueError, IndexError):
            # Damaged (or left empty by a crash after a write that was not synced): the log rebuilds it from
            # the batches' epochs, as it does a missing one.
            self.entries = []
            self.exists = False

    def _save(self, durable: bool = True) -> None:
        """``durable=False``: no fsync (see ``write_atomically``); for a cache the log can rebuild from its
        batches, which a crash before the file reaches the disk only makes it do again."""
        lines = ["0", str(len(self.entries))] + [f"{e} {o}" for e, o in self.entries]
        write_atomically(self.path, ("\n".join(lines) + "\n").encode(), durable)
        self.exists = True

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def epochs(self) -> list[int]:
        return [e for e, _ in self.entries]

    def assign(self, epoch: int, start_offset: int, *, save: bool = True) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; older or equal epochs are ignored.

        Entries that start at or after ``start_offset`` are dropped first:
        they belong to a tail that truncation has removed or is about to.
        """
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return False
        while self.entries and self.entries[-1][1] >= start_offset:
            self.entries.pop()
        self.entries.append((epoch, start_offset))
        if save:
            self._save()
        return True

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answering OffsetForLeaderEpoch for ``requested``, as Kafka does.

        The end offset is the start of the next higher epoch (the log end for
        the latest); the epoch returned is the largest known one <= requested.
        """
        if requested == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested == self.entries[-1][0]:
            return requested, log_end_offset
        i = bisect.bisect_right(self.entries, (requested, 1 << 63))
        if i >= len(self.entries):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET   # newer than anything this replica has seen
        higher_start = self.entries[i][1]
        if i == 0:
            return requested, higher_start
        return self.entries[i - 1][0], higher_start

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset`` (the log was truncated there)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._save()

    def clear_and_flush(self) -> None:
        self.entries = []
        self._save()
