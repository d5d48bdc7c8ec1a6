"""Kafka's offset checkpoint files: a version line, a count line, then ``topic partition offset`` lines.

Written atomically (temporary file, fsync, rename), so a crash leaves either
the old or the new file, never a torn one.
"""

from __future__ import annotations

import os

from kbroker.storage.open_files import with_room

VERSION = 0


def write_atomically(path: str, data: bytes, durable: bool = True) -> None:
    """``durable=False``: no fsync before the rename; the caller syncs the whole file system afterwards (a
    broker shutting down with tens of thousands of logs: one sync instead of one per file)."""
    with_room(_write_atomically, path, data, durable)


def _write_atomically(path: str, data: bytes, durable: bool) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        if durable:
            os.fsync(f.fileno())
    os.replace(tmp, path)


def write_checkpoint(path: str, offsets: dict[tuple[str, int], int]) -> None:
    write_atomically(path, _text(offsets))


def _text(offsets: dict[tuple[str, int], int]) -> bytes:
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    return ("\n".join(lines) + "\n").encode()


class CheckpointFile:
    """A checkpoint file written whole at every interval, as Kafka writes it: the write is also what finds a
    failed log dir under partitions nothing else touches. Its text is made again only when its partitions or
    their offsets changed since the last write: at 50,000 idle partitions, sorting and formatting the same
    lines each minute was most of the broker's CPU.

    Invariant: ``_text`` is the file's text for ``_partitions`` at ``_offsets`` (the same order), as last
    written or attempted."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._partitions: list = []
        self._offsets: list[int] = []
        self._text = _text({})

    def write(self, partitions: list[tuple[str, int]], offsets: list[int]) -> None:
        # (Lists compared item by item, identity first: the same key tuples and, at rest, the same ints.)
        if offsets != self._offsets or partitions != self._partitions:
            self._text = _text(dict(zip(partitions, offsets)))
            self._partitions, self._offsets = partitions, offsets
        write_atomically(self.path, self._text)


def read_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """The offsets in a checkpoint file; a missing or malformed file reads as empty."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != VERSION:
            return {}
        count = int(lines[1])
        result = {}
        for line in lines[2:2 + count]:
            topic, partition, offset = line.rsplit(" ", 2)
            result[(topic, int(partition))] = int(offset)
        return result
    except (IndexError, ValueError):
        return {}
