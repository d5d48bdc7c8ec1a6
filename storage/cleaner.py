"""The log cleaner: compaction for every topic whose ``cleanup.policy`` includes ``compact``.

Kafka's scheme, on whole segments:

* the *cleanable* part of a log runs from its start to the first
  uncleanable offset: the active segment's base, the last stable offset
  (no open transaction's records are touched), and no segment holding a
  record younger than ``min.compaction.lag.ms``;
* the *dirty* part is what was appended since the last clean (the
  ``cleaner-offset-checkpoint``); a log is cleaned when dirty bytes make up at
  least ``min.cleanable.dirty.ratio`` of the cleanable bytes, or when a dirty
  segment is older than ``max.compaction.lag.ms``;
* the newest offset of every key in the dirty part is mapped, then each
  cleanable segment is rewritten keeping a record only if no later record
  has its key; a tombstone (null value) goes once it has been through a
  clean and is older than ``delete.retention.ms``; records without a key
  cannot be compacted and go;
* consecutive small segments are merged while they fit in ``segment.bytes``.

Batches keep their base and last offsets (offsets never change), their
producer id, epoch and sequence; a batch emptied entirely is dropped unless
it is its producer's latest, which keeps the producer's sequence state.
A batch with nothing removed is copied byte for byte.

Transactions, as Kafka's cleaner treats them: batches of an aborted
transaction (known from the segments' ``.txnindex``) go whole; a marker goes
once no record of its transaction is left and it has been through a clean
and is older than ``delete.retention.ms``, like a tombstone.

Crash safety: the cleaned segment is written to ``.cleaned``, fsynced,
renamed to ``.swap``, and only then replaces the old segments; ``Log._load``
finishes an interrupted swap and discards a ``.cleaned`` file.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from dataclasses import dataclass

import structlog
from construct import StreamError

from kbroker.protocol.records import InvalidBatch, iter_records, rebuild_batch
from kbroker.storage.segment import segment_name

log = structlog.get_logger("storage.cleaner")

CLEANED_SUFFIX = ".log.cleaned"
RECORDS_PER_STEP = 256   # records decoded between two chances to pause (a few hundred microseconds)
SWAP_SUFFIX = ".log.swap"


@dataclass
class CleanResult:
    first_uncleanable: int
    segments_before: int = 0
    segments_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_removed: int = 0


def first_uncleanable_offset(plog, now_ms: int) -> int:
    """Where cleaning must stop: active segment, LSO (the HW for now), and the minimum compaction lag."""
    bound = min(plog.active_segment.base_offset, plog.last_stable_offset)
    lag = plog.config.min_compaction_lag_ms
    if lag > 0:
        for segment in plog.segments[:-1]:
            if segment.largest_timestamp() > now_ms - lag:
                bound = min(bound, segment.base_offset)
                break
    return bound


def _cleanable_segments(plog, upto: int) -> list:
    return [s for i, s in enumerate(plog.segments) if plog._segment_end(i) <= upto and s.size]


def needs_cleaning(plog, first_dirty: int, now_ms: int) -> bool:
    if not plog.config.compact:
        return False
    upto = first_uncleanable_offset(plog, now_ms)
    segments = _cleanable_segments(plog, upto)
    dirty = [s for s in segments if s.base_offset >= first_dirty]
    if not dirty:
        return False
    if any(s.largest_timestamp() < now_ms - plog.config.max_compaction_lag_ms for s in dirty):
        return True
    total = sum(s.size for s in segments)
    return total > 0 and sum(s.size for s in dirty) / total >= plog.config.min_cleanable_dirty_ratio


def _offset_map(plog, first_dirty: int, upto: int, latest: dict[bytes, int]):
    """Fill ``latest`` with each key's newest offset below ``upto``; a generator, pausing after every batch and
    every ``RECORDS_PER_STEP`` records."""
    bound = plog.config.max_inflated_bytes
    for header, data in plog.iter_batches(first_dirty, upto):
        if not header.is_control:
            try:
                for n, record in enumerate(iter_records(data, max_inflated=bound), 1):
                    if record.key is not None and record.offset < upto:
                        latest[bytes(record.key)] = record.offset
                    if n % RECORDS_PER_STEP == 0:
                        yield
            except UNREADABLE as exc:
                _unreadable(plog, header, exc)   # its keys stay unmapped: it is kept whole below, too
        yield


def _groups(segments: list, max_bytes: int) -> list[list]:
    """Consecutive segments merged while their total size fits in ``segment.bytes``."""
    groups: list[list] = []
    size = 0
    for segment in segments:
        if groups and size + segment.size <= max_bytes and segment.base_offset - groups[-1][0].base_offset < 2**31:
            groups[-1].append(segment)
            size += segment.size
        else:
            groups.append([segment])
            size = segment.size
    return groups


class Abandoned(Exception):
    """The log's segments changed while a cleaning was paused: its output is dropped, the next pass retries."""


def clean(plog, first_dirty: int, now_ms: int) -> CleanResult:
    """Compact ``plog`` up to its first uncleanable offset in one go; returns what changed (the new checkpoint)."""
    return run_to_end(cleaning(plog, first_dirty, now_ms))


def run_to_end(steps):
    """Drive a ``cleaning`` generator without pausing, its blocking steps run where they come."""
    failure = None
    try:
        while True:
            step, failure = _resume(steps, failure), None
            if step is not None:
                try:
                    step()
                except OSError as exc:
                    failure = exc   # raised inside the generator, where the step was asked for
    except StopIteration as done:
        return done.value


def _resume(steps, failure: Exception | None):
    """The generator's next yield; a failed step's error is raised inside it, where it asked for the step."""
    return next(steps) if failure is None else steps.throw(failure)


async def run_in_slices(steps, slice_s: float):
    """Drive a ``cleaning`` generator on the event loop: other callbacks run at least every ``slice_s`` seconds
    of cleaning, and its blocking steps (fsyncs) run on a worker thread."""
    loop = asyncio.get_running_loop()
    deadline = time.perf_counter() + slice_s
    failure = None
    try:
        while True:
            step, failure = _resume(steps, failure), None
            if step is not None:
                work = loop.run_in_executor(None, step)
                try:
                    await asyncio.shield(work)
                except asyncio.CancelledError:
                    await asyncio.wait([work])   # the generator's cleanup closes what the step uses: not before
                    raise
                except OSError as exc:
                    failure = exc
                deadline = time.perf_counter() + slice_s
            elif time.perf_counter() >= deadline:
                await asyncio.sleep(0)
                deadline = time.perf_counter() + slice_s
    except StopIteration as done:
        return done.value
    finally:
        steps.close()


def cleaning(plog, first_dirty: int, now_ms: int):
    """Compact ``plog`` up to its first uncleanable offset; a generator returning the CleanResult.

    It yields None where it may pause (after each batch read) and a function
    to run where the work blocks (an fsync). After every pause it checks that
    the log's segments did not change (``Log.segments_changed``: retention,
    truncation, a move or deletion) and otherwise raises ``Abandoned``,
    leaving no swap and no ``.cleaned`` file. Each group's swap itself happens
    between two pauses, so the log is never seen half swapped.
    """
    upto = first_uncleanable_offset(plog, now_ms)
    result = CleanResult(first_uncleanable=upto)
    segments = _cleanable_segments(plog, upto)
    if not segments:
        return result
    changed = plog.segments_changed
    latest: dict[bytes, int] = {}
    for _ in _offset_map(plog, max(first_dirty, plog.log_start_offset), upto, latest):
        yield
        if plog.segments_changed != changed:
            raise Abandoned
    delete_horizon = now_ms - plog.config.delete_retention_ms
    producers = plog.producer_state.producers
    aborted = [entry for segment in plog.segments for entry in segment.txn_index.entries]
    context = _TxnContext(aborted)
    result.segments_before = len(segments)
    result.bytes_before = sum(s.size for s in segments)
    for group in _groups(segments, plog.config.segment_bytes):
        base = group[0].base_offset
        cleaned_path = os.path.join(plog.directory, segment_name(base) + CLEANED_SUFFIX)
        fd = os.open(cleaned_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        swapped = False
        try:
            written: list[tuple[int, int, int, int]] = []   # (position, size, last offset, max timestamp)
            position = 0
            for segment in group:
                end = plog._segment_end(plog.segments.index(segment))
                for header, data in plog.iter_batches(segment.base_offset, end):
                    if header.base_offset < segment.base_offset:
                        continue   # iter_batches starts at the batch holding the offset
                    out = yield from _retained(plog, header, data, latest, delete_horizon, first_dirty,
                                               producers, result, context)
                    if plog.segments_changed != changed:
                        raise Abandoned
                    if out is not None:
                        os.write(fd, out)
                        written.append((position, len(out), header.last_offset, header.max_timestamp))
                        position += len(out)
                    yield
                    if plog.segments_changed != changed:
                        raise Abandoned
            yield functools.partial(os.fsync, fd)
            if plog.segments_changed != changed:
                raise Abandoned
            swap_path = os.path.join(plog.directory, segment_name(base) + SWAP_SUFFIX)
            os.rename(cleaned_path, swap_path)
            swapped = True
            plog.replace_segments(group, swap_path, written)
            changed = plog.segments_changed   # this swap's own change
        finally:
            os.close(fd)
            if not swapped:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(cleaned_path)
        result.bytes_after += position
        result.segments_after += 1
    log.info("log_cleaned", topic=plog.topic, partition=plog.partition, first_dirty=first_dirty,
             first_uncleanable=upto, segments_before=result.segments_before, segments_after=result.segments_after,
             bytes_before=result.bytes_before, bytes_after=result.bytes_after, records_removed=result.records_removed)
    return result


# A stored batch the cleaner cannot read: one that decompresses past its topic's bound (a compressed bomb
# written before produce refused them), or whose records are broken. It is logged and kept whole.
UNREADABLE = (InvalidBatch, StreamError, UnicodeDecodeError, ValueError)


def _unreadable(plog, header, exc: Exception) -> None:
    log.error("batch_not_cleaned", topic=plog.topic, partition=plog.partition, base_offset=header.base_offset,
              last_offset=header.last_offset, reason=str(exc))


class _TxnContext:
    """What the cleaner knows of transactions while it walks the log in offset order."""

    def __init__(self, aborted) -> None:
        self.aborted = aborted
        self.has_data: dict[int, bool] = {}   # producer id -> records of its current transaction were kept

    def is_aborted(self, header) -> bool:
        return any(a.producer_id == header.producer_id and a.first_offset <= header.base_offset <= a.last_offset
                   for a in self.aborted)


def _retained(plog, header, data, latest: dict[bytes, int], delete_horizon: int, first_dirty: int, producers,
              result: CleanResult, context: _TxnContext):
    """The batch as it is after cleaning: unchanged bytes, a rebuilt batch, or None when it goes; a generator
    returning it, pausing every ``RECORDS_PER_STEP`` records."""
    if header.is_control:
        had_data = context.has_data.pop(header.producer_id, False)
        if not had_data and header.base_offset < first_dirty and header.max_timestamp < delete_horizon:
            result.records_removed += 1
            return None   # a marker whose transaction left nothing behind, past delete.retention.ms
        return bytes(data)
    if header.is_transactional and context.is_aborted(header):
        result.records_removed += header.records_count
        return None
    kept = []
    total = 0
    try:
        for total, r in enumerate(iter_records(data, max_inflated=plog.config.max_inflated_bytes), 1):
            if total % RECORDS_PER_STEP == 0:
                yield
            if r.key is None:
                continue
            if latest.get(bytes(r.key), -1) > r.offset:
                continue
            if r.value is None and r.offset < first_dirty and header.max_timestamp < delete_horizon:
                continue   # a tombstone that has been through a clean and outlived delete.retention.ms
            kept.append(r)
    except UNREADABLE as exc:
        _unreadable(plog, header, exc)
        return bytes(data)   # kept as it is: the rest of the log is still cleaned
    result.records_removed += total - len(kept)
    if header.is_transactional and kept:
        context.has_data[header.producer_id] = True
    if len(kept) == total:
        return bytes(data)
    if not kept:
        entry = producers.get(header.producer_id) if header.has_producer_id else None
        if entry is None or not entry.batches or entry.batches[-1].last_offset != header.last_offset:
            return None
    return rebuild_batch(header, kept)
