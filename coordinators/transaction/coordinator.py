"""The transaction coordinator: Kafka's transactional-id state machine, persisted in ``__transaction_state``.

Every durable transition is two-phase: the metadata gets a pending state, the
new value is appended to ``__transaction_state`` (acks=all), and only then does
the transition complete; a failed append leaves the old state. Ending a
transaction goes Ongoing -> Prepare{Commit,Abort} (written, and on the state
partition's ISR) -> markers written to every partition (WriteTxnMarkers, or
appended here for partitions this broker leads) -> Complete{Commit,Abort}
(written). A coordinator that restarts finds the Prepare state in the log
and finishes the job.

Invariants:
* a transactional id maps to one producer id at a time; the epoch only grows
  (a new producer id starts again at epoch 0);
* while a pending state is set, every other request for the id answers
  CONCURRENT_TRANSACTIONS;
* markers for a transaction carry the epoch that ended it, which fences any
  older producer on every partition it touched;
* a transaction of version 2 (KIP-890 part 2: EndTxn v5, the client read
  ``transaction.version`` 2) is ended under the next epoch: Prepare, markers
  and Complete carry epoch + 1, which EndTxn returns and the producer's next
  transaction uses, so a late write of the one before is fenced everywhere
  (an epoch that ran out moves to a new producer id at Complete, which the
  Prepare names as ``next_producer_id``);
* no marker is written before the Prepare state is on the state partition's
  ISR, so whichever broker coordinates next knows the outcome markers carry.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Awaitable, Callable

import structlog

from kbroker.coordinators.partitioning import partition_for
from kbroker.coordinators.transaction import records
from kbroker.coordinators.transaction.metadata import (MAX_EPOCH, Marker, TransactionConfig, TransactionMetadata,
                                                       fenced)
from kbroker.coordinators.transaction.state import TransactionState
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("coordinators.transaction")

T = TransactionState
Store = Callable[[int, list[tuple[bytes, bytes | None]]], ErrorCode]
SendMarkers = Callable[[Marker], Awaitable[None]]
WriteMarkersNow = Callable[[Marker], list[tuple[str, int]]]   # the partitions it could not write at once
# None when everything appended to this state partition is on its ISR, else a function whose awaitable gives the
# error code once it is (NONE) or cannot be (NOT_LEADER_OR_FOLLOWER: the shard moved; anything else: try again).
StateReplicated = Callable[[int], Callable[[], Awaitable[ErrorCode]] | None]


class TransactionCoordinator:
    def __init__(self, config: TransactionConfig, scheduler, store: Store, new_producer_id: Callable[[], int],
                 send_markers: SendMarkers, write_markers_now: WriteMarkersNow | None = None,
                 state_replicated: StateReplicated | None = None) -> None:
        self.config = config
        self.scheduler = scheduler
        self.store = store
        self.new_producer_id = new_producer_id
        self.send_markers = send_markers
        self.write_markers_now = write_markers_now
        self.state_replicated = state_replicated
        self.transactions: dict[str, TransactionMetadata] = {}
        self.coordinator_epochs: dict[int, int] = {}   # state partition -> its leader epoch when loaded
        self._tasks: set[asyncio.Task] = set()
        self._completions: dict[str, asyncio.Task] = {}

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.state_partitions)

    def now_ms(self) -> int:
        return self.scheduler.now_ms()

    # ------------------------------------------------------------------ persistence
    def _write(self, meta: TransactionMetadata, target: TransactionState, *, producer_id: int, epoch: int,
               partitions: set, start_ms: int, next_producer_id: int = -1) -> ErrorCode:
        """Two-phase: pending, append the would-be state, then apply it (or roll back to the old one)."""
        now = self.now_ms()
        meta.pending = target
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(partitions):
            by_topic.setdefault(topic, []).append(p)
        value = records.value({
            "producer_id": producer_id, "producer_epoch": epoch, "transaction_timeout_ms": meta.timeout_ms,
            "transaction_status": target.id,
            "transaction_partitions": [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()],
            "transaction_last_update_timestamp_ms": now, "transaction_start_timestamp_ms": start_ms,
            **({"client_transaction_version": meta.client_version, "next_producer_id": next_producer_id,
                "previous_producer_id": meta.producer_id if producer_id != meta.producer_id
                else meta.last_producer_id} if meta.client_version >= 2 else {})})
        error = self.store(self.partition_for(meta.transactional_id), [(records.key(meta.transactional_id), value)])
        meta.pending = None
        if error:
            return error
        if (producer_id, epoch) != (meta.producer_id, meta.producer_epoch):
            if producer_id != meta.producer_id:
                meta.last_producer_id = meta.producer_id
            meta.last_producer_epoch = meta.producer_epoch
        meta.producer_id, meta.producer_epoch = producer_id, epoch
        meta.transition_to(target)
        meta.partitions = set(partitions)
        meta.start_ms = start_ms
        meta.last_update_ms = now
        meta.next_producer_id = next_producer_id
        return ErrorCode.NONE

    # ------------------------------------------------------------------ InitProducerId
    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_producer_id: int,
                         expected_epoch: int, version: int) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) for a (re)starting transactional producer; fences older instances.

        As Kafka's coordinator: a request naming a producer (KIP-360: any id but -1) must name the current id,
        or the one an exhausted epoch left; then its epoch must be the current one (bumped, and remembered as
        the last) or the last one (a retry of the bump that made the current: answered with it, unbumped).
        Without one the epoch is bumped and no last is kept, so the instance before cannot retry."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, -1, -1
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        meta = self.transactions.get(transactional_id)
        if meta is None:
            meta = self.transactions[transactional_id] = TransactionMetadata(
                transactional_id, self.new_producer_id(), -1, timeout_ms)
        if meta.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        expected = expected_producer_id != -1   # (only -1 names none: a negative id too must be a known one)
        if expected and not (meta.producer_epoch == -1 or expected_producer_id == meta.producer_id or (
                expected_producer_id == meta.last_producer_id and expected_epoch >= MAX_EPOCH)):
            return fenced(version >= 4), -1, -1
        if meta.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT, T.PREPARE_EPOCH_FENCE):
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if meta.state is T.ONGOING:
            # The previous instance left a transaction open: abort it under a bumped epoch, then the
            # client retries (CONCURRENT_TRANSACTIONS is retriable) and gets the next epoch.
            self._fence_and_abort(meta, "a new producer instance started")
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        current = meta.producer_epoch
        if current >= MAX_EPOCH and (not expected or expected_epoch == current):
            producer_id, epoch, last = self.new_producer_id(), 0, current if expected else -1
        elif not expected:
            producer_id, epoch, last = meta.producer_id, current + 1, -1
        elif current == -1 or expected_epoch == current:
            producer_id, epoch, last = meta.producer_id, current + 1, current
        elif expected_epoch == meta.last_producer_epoch:
            producer_id, epoch, last = meta.producer_id, current, meta.last_producer_epoch
        else:
            return fenced(version >= 4), -1, -1
        meta.timeout_ms = timeout_ms
        error = self._write(meta, T.EMPTY, producer_id=producer_id, epoch=epoch, partitions=set(), start_ms=-1)
        if error:
            return error, -1, -1
        meta.last_producer_epoch = last
        log.info("transactional_producer_initialised", transactional_id=transactional_id,
                 producer_id=producer_id, epoch=epoch)
        return ErrorCode.NONE, producer_id, epoch

    # ------------------------------------------------------------------ AddPartitions / AddOffsets
    def _validate(self, transactional_id: str, producer_id: int, epoch: int, version_fenced: bool
                  ) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        meta = self.transactions.get(transactional_id)
        if meta is not None and meta.next_producer_id == producer_id >= 0:
            return ErrorCode.CONCURRENT_TRANSACTIONS, meta   # the id a version 2 end moves to, at its Complete
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, meta
        if epoch != meta.producer_epoch:
            return fenced(version_fenced), meta
        if meta.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, meta
        return ErrorCode.NONE, meta

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: list[tuple[str, int]], version: int) -> ErrorCode:
        error, meta = self._validate(transactional_id, producer_id, epoch, version >= 2)
        if error:
            return error
        if meta.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT, T.PREPARE_EPOCH_FENCE):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        was_ongoing = meta.state is T.ONGOING
        if was_ongoing and set(partitions) <= meta.partitions:
            return ErrorCode.NONE
        error = self._write(meta, T.ONGOING, producer_id=meta.producer_id, epoch=meta.producer_epoch,
                            partitions=(meta.partitions if was_ongoing else set()) | set(partitions),
                            start_ms=meta.start_ms if was_ongoing else self.now_ms())
        if not error and not was_ongoing:
            self._schedule_timeout(meta)   # a transaction's clock starts with its first partition
        return error

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn v4 verify_only (KIP-890): is each partition part of the open transaction? As
        Kafka's coordinator answers: CONCURRENT_TRANSACTIONS while the transaction is being decided, and
        TRANSACTION_ABORTABLE for a partition outside it (which the partition leader turns into
        INVALID_TXN_STATE for a producer older than Produce v11)."""
        error, meta = self._validate(transactional_id, producer_id, epoch, True)
        if error and error != ErrorCode.CONCURRENT_TRANSACTIONS:
            return {tp: error for tp in partitions}
        if meta.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
            return {tp: ErrorCode.CONCURRENT_TRANSACTIONS for tp in partitions}
        ongoing = meta.state is T.ONGOING
        return {tp: ErrorCode.NONE if ongoing and tp in meta.partitions else ErrorCode.TRANSACTION_ABORTABLE
                for tp in partitions}

    # ------------------------------------------------------------------ EndTxn
    def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                        version: int, after_response: Callable[[Callable[[], None]], None] | None = None
                        ) -> ErrorCode:
        """Decide the transaction (its Prepare state written) and start completing it. ``after_response``
        (the request's ``run_after_response``): where every marker can be written here, they and the Complete
        state are written by the action handed to it, after EndTxn's answer left, as Kafka's coordinator answers
        once the Prepare is written and completes afterwards; without it, before this returns.

        EndTxn v5 ends a version 2 transaction under the next epoch (``producer_after_end`` says which producer
        id and epoch the client goes on with). Which checks apply is the request's version, whatever the
        transaction began as (as Kafka: a v5 end is version 2's). A version 2 retry names the epoch before the
        bump: it is answered as the first was while the transaction is decided or complete, and anything else
        with an epoch that is not the current one is PRODUCER_FENCED. A version 2 abort with no transaction
        open still ends one: the epoch is bumped all the same."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        version_2 = version >= 5
        meta = self.transactions.get(transactional_id)
        if not version_2:   # (version 1: the epoch does not move at an end, so the same epoch is a retry)
            error, meta = self._validate(transactional_id, producer_id, epoch, version >= 2)
            retry = True
        elif meta is None:
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        elif meta.pending is not None:
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        else:
            error, retry = meta.version_2_end_check(producer_id, epoch)
        if error:
            return error
        state = meta.state
        if state is T.ONGOING:
            return self._prepare_end(meta, commit, after_response, version_2=version_2)
        if state in (T.COMPLETE_COMMIT, T.COMPLETE_ABORT) and retry:
            return ErrorCode.NONE if commit == (state is T.COMPLETE_COMMIT) else ErrorCode.INVALID_TXN_STATE
        if state in (T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT):
            if not commit and version_2:
                # A version 2 client aborts a transaction it began even if no partition reached this
                # coordinator (its first write may still be on the way): the end bumps the epoch all the same,
                # which fences that write wherever it lands.
                return self._prepare_end(meta, False, after_response, version_2=True)
            return ErrorCode.INVALID_TXN_STATE
        if state is T.PREPARE_COMMIT:
            return ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE
        if state is T.PREPARE_ABORT:
            return ErrorCode.CONCURRENT_TRANSACTIONS if not commit else ErrorCode.INVALID_TXN_STATE
        return ErrorCode.INVALID_TXN_STATE

    def producer_after_end(self, transactional_id: str) -> tuple[int, int]:
        """The producer id and epoch a client goes on with after EndTxn (v5 returns them)."""
        meta = self.transactions.get(transactional_id)
        if meta is None:
            return -1, -1
        if meta.next_producer_id >= 0:
            return meta.next_producer_id, 0
        return meta.producer_id, meta.producer_epoch

    def _prepare_end(self, meta: TransactionMetadata, commit: bool, after_response=None,
                     version_2: bool = False) -> ErrorCode:
        target = T.PREPARE_COMMIT if commit else T.PREPARE_ABORT
        epoch, next_producer_id = meta.producer_epoch, -1
        meta.client_version = 2 if version_2 else 0   # (what this end is; the records carry it)
        if version_2:
            # (the epoch is bumped even at MAX_EPOCH: Short.MaxValue stays the markers', never a producer's)
            epoch += 1
            if meta.producer_epoch >= MAX_EPOCH:
                next_producer_id = self.new_producer_id()
        error = self._write(meta, target, producer_id=meta.producer_id, epoch=epoch,
                            partitions=meta.partitions, start_ms=meta.start_ms, next_producer_id=next_producer_id)
        if error:
            return error
        self.scheduler.cancel(("txn-timeout", meta.transactional_id))
        log.debug("transaction_prepared", transactional_id=meta.transactional_id, commit=commit,
                 partitions=len(meta.partitions))
        self._start_completion(meta, after_response)
        return ErrorCode.NONE

    def completion(self, transactional_id: str) -> asyncio.Task | None:
        """The marker-writing task of a transaction that EndTxn just prepared, while it runs."""
        task = self._completions.get(transactional_id)
        return task if task is not None and not task.done() else None

    def _start_completion(self, meta: TransactionMetadata, after_response=None) -> None:
        """Markers, then the Complete state, as Kafka orders them: no marker before the Prepare state is on the
        state partition's ISR (a marker that outlived a Prepare lost with this broker would have decided a
        transaction the next coordinator knows as still open). At once where the Prepare already is and
        ``write_markers_now`` can write every marker here (in ``after_response``'s action, or before this
        returns), else in a task that waits for the Prepare and retries until both are done."""
        commit = meta.state is T.PREPARE_COMMIT
        state_partition = self.partition_for(meta.transactional_id)
        epoch = self.coordinator_epochs.get(state_partition, 0)
        marker = Marker(meta.producer_id, meta.producer_epoch, commit, epoch, sorted(meta.partitions),
                        meta.client_version)
        waiting = None if self.state_replicated is None else self.state_replicated(state_partition)
        if waiting is None and (self.write_markers_now is not None or not marker.partitions):
            if after_response is not None:
                after_response(functools.partial(self._complete_here, meta, marker, state_partition))
            else:
                self._complete_here(meta, marker, state_partition)
            return
        self._completions[meta.transactional_id] = self._spawn(self._complete(meta, marker, state_partition,
                                                                              waiting))

    def _complete_here(self, meta: TransactionMetadata, marker: Marker, state_partition: int) -> None:
        """Markers and the Complete state with no wait; what fails retriably goes on in ``_complete``'s task."""
        if marker.partitions:
            marker.partitions = self.write_markers_now(marker)
        if not marker.partitions and not self._write_complete(meta, marker.commit):
            log.debug("transaction_completed", transactional_id=meta.transactional_id, commit=marker.commit)
            return
        self._completions[meta.transactional_id] = self._spawn(self._complete(meta, marker, state_partition, None))

    def _write_complete(self, meta: TransactionMetadata, commit: bool) -> ErrorCode:
        """(A version 2 end whose epoch ran out moves to its next producer id here, once the markers are in.)"""
        producer_id, epoch = (meta.next_producer_id, 0) if meta.next_producer_id >= 0 else \
            (meta.producer_id, meta.producer_epoch)
        return self._write(meta, T.COMPLETE_COMMIT if commit else T.COMPLETE_ABORT, producer_id=producer_id,
                           epoch=epoch, partitions=set(), start_ms=meta.start_ms)

    async def _complete(self, meta: TransactionMetadata, marker: Marker, state_partition: int,
                        waiting: Callable[[], Awaitable[ErrorCode]] | None) -> None:
        """Wait for the Prepare state's replication (``waiting``, from ``state_replicated``), write the markers,
        then the Complete state; retried until all are done (or the shard moves: its next coordinator finishes
        from what its log holds)."""
        commit = marker.commit
        while waiting is not None:
            error = await waiting()
            if error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                log.info("transaction_completion_left_to_next_coordinator",
                         transactional_id=meta.transactional_id, state_partition=state_partition)
                return
            waiting = None
            if error:
                log.warning("transaction_prepare_not_replicated", transactional_id=meta.transactional_id,
                            error=ErrorCode(error).name)
                await asyncio.sleep(0.1)
                waiting = self.state_replicated(state_partition)
        if marker.partitions:
            await self.send_markers(marker)
        while True:
            error = self._write_complete(meta, commit)
            if not error:
                break
            log.warning("transaction_complete_retry", transactional_id=meta.transactional_id, error=error.name)
            await asyncio.sleep(0.1)
        log.debug("transaction_completed", transactional_id=meta.transactional_id, commit=commit)

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ------------------------------------------------------------------ timeouts and fencing
    def _schedule_timeout(self, meta: TransactionMetadata) -> None:
        transactional_id = meta.transactional_id
        self.scheduler.schedule(("txn-timeout", transactional_id), meta.timeout_ms,
                                lambda: self._timed_out(transactional_id))

    def _timed_out(self, transactional_id: str) -> None:
        meta = self.transactions.get(transactional_id)
        if meta is not None and meta.state is T.ONGOING and meta.pending is None:
            self._fence_and_abort(meta, "transaction timed out")

    def abort_timed_out(self) -> int:
        """The periodic sweep (transaction.abort.timed.out.transaction.cleanup.interval.ms)."""
        now, aborted = self.now_ms(), 0
        for meta in list(self.transactions.values()):
            if meta.state is T.ONGOING and meta.pending is None and now - meta.start_ms > meta.timeout_ms:
                self._fence_and_abort(meta, "transaction timed out")
                aborted += 1
        return aborted

    def _fence_and_abort(self, meta: TransactionMetadata, reason: str) -> None:
        """Bump the epoch (fencing the current producer) and abort its open transaction under it."""
        log.info("transaction_fenced_and_aborted", transactional_id=meta.transactional_id, reason=reason,
                 producer_id=meta.producer_id, epoch=meta.producer_epoch)
        meta.transition_to(T.PREPARE_EPOCH_FENCE)
        epoch = meta.producer_epoch + 1
        error = self._write(meta, T.PREPARE_ABORT, producer_id=meta.producer_id, epoch=epoch,
                            partitions=meta.partitions, start_ms=meta.start_ms)
        if error:
            meta.state = T.ONGOING   # undo the in-memory step; the next sweep tries again
            return
        self.scheduler.cancel(("txn-timeout", meta.transactional_id))
        self._start_completion(meta)

    def expire_transactional_ids(self) -> int:
        now, expired = self.now_ms(), 0
        for meta in list(self.transactions.values()):
            if meta.state in (T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT) and meta.pending is None and \
                    now - meta.last_update_ms > self.config.id_expiration_ms:
                error = self.store(self.partition_for(meta.transactional_id),
                                   [(records.key(meta.transactional_id), None)])
                if not error:
                    del self.transactions[meta.transactional_id]
                    expired += 1
        return expired

    # ------------------------------------------------------------------ describe
    def describe(self, transactional_id: str) -> dict:
        meta = self.transactions.get(transactional_id)
        if meta is None:
            return undescribed(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(p)
        return {"error_code": 0, "transactional_id": transactional_id, "transaction_state": meta.state.label,
                "transaction_timeout_ms": meta.timeout_ms, "transaction_start_time_ms": meta.start_ms,
                "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}

    def list(self, states: set[str], producer_ids: set[int]) -> list[dict]:
        return [{"transactional_id": m.transactional_id, "producer_id": m.producer_id,
                 "transaction_state": m.state.label}
                for m in self.transactions.values()
                if (not states or m.state.label in states) and (not producer_ids or m.producer_id in producer_ids)]

    # ------------------------------------------------------------------ replay
    def replay_stored(self, _partition: int, stored) -> None:
        """Apply one record read back from ``__transaction_state`` (a StoredRecord); it has no markers."""
        if stored.key is not None:
            self.replay(stored.key, stored.value)

    def replay(self, key: bytes, value: bytes | None) -> None:
        transactional_id = records.decode_key(key)
        decoded = records.decode_value(value)
        if decoded is None:
            self.transactions.pop(transactional_id, None)
            return
        previous = self.transactions.get(transactional_id)
        meta = TransactionMetadata(transactional_id, decoded.producer_id, decoded.producer_epoch,
                                   decoded.transaction_timeout_ms, T.from_id(decoded.transaction_status))
        if previous is not None and previous.producer_id != decoded.producer_id:
            meta.last_producer_id, meta.last_producer_epoch = previous.producer_id, previous.producer_epoch
        meta.partitions = {(t.topic, p) for t in (decoded.transaction_partitions or []) for p in t.partition_ids}
        meta.start_ms = decoded.transaction_start_timestamp_ms
        meta.last_update_ms = decoded.transaction_last_update_timestamp_ms
        meta.client_version = decoded.client_transaction_version
        meta.next_producer_id = decoded.next_producer_id
        if decoded.previous_producer_id >= 0:
            meta.last_producer_id = decoded.previous_producer_id
        self.transactions[transactional_id] = meta

    def loaded(self, partition: int | None = None, coordinator_epoch: int = 0) -> None:
        """After replay (of one shard, or all): finish transactions a crash left prepared; time the open ones.

        ``coordinator_epoch`` is the state partition's leader epoch: markers
        carry it, so a partition leader can refuse a deposed coordinator's.
        """
        if partition is not None:
            self.coordinator_epochs[partition] = coordinator_epoch
        for meta in self.transactions.values():
            if partition is not None and self.partition_for(meta.transactional_id) != partition:
                continue
            if meta.state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
                log.info("transaction_resumed", transactional_id=meta.transactional_id, state=meta.state.label)
                self._start_completion(meta)
            elif meta.state is T.ONGOING:
                remaining = max(0, meta.start_ms + meta.timeout_ms - self.now_ms())
                transactional_id = meta.transactional_id
                self.scheduler.schedule(("txn-timeout", transactional_id), remaining,
                                        lambda t=transactional_id: self._timed_out(t))

    def unload_partition(self, partition: int) -> int:
        """Leadership of a state partition left: forget its ids; their unfinished marker writes stop here
        (the next coordinator finds the Prepare state in the log and finishes them)."""
        gone = [t for t in self.transactions if self.partition_for(t) == partition]
        for transactional_id in gone:
            del self.transactions[transactional_id]
            self.scheduler.cancel(("txn-timeout", transactional_id))
            task = self._completions.pop(transactional_id, None)
            if task is not None:
                task.cancel()
        self.coordinator_epochs.pop(partition, None)
        return len(gone)

    def shutdown(self) -> None:
        self.scheduler.cancel_all()
        for task in list(self._tasks):
            task.cancel()


def undescribed(transactional_id: str, error: ErrorCode) -> dict:
    """DescribeTransactions' entry for an id refused or not found: Kafka leaves every other field at its zero
    value."""
    return {"error_code": error, "transactional_id": transactional_id, "transaction_state": "",
            "transaction_timeout_ms": 0, "transaction_start_time_ms": 0, "producer_id": 0, "producer_epoch": 0,
            "topics": []}
