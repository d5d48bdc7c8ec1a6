"""ReplicaManager: every local partition, the append and fetch paths, and their purgatories.

Invariants:
* a partition's high watermark never exceeds the log end offset of any ISR
  member; on a single broker the ISR is this broker, so every append moves it;
* an append returns only after the bytes reached the log's file descriptor;
  acks=all needs the high watermark past the appended offsets, which on a
  single broker the append itself achieves (replication adds a DelayedProduce);
* fetch reads stop at the high watermark (consumers) or log end (followers).
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass

import structlog

from kbroker.broker.partitions.partition import READ_COMMITTED, Partition
from kbroker.broker.partitions.purgatory import Purgatory
from kbroker.broker.replication.delayed_produce import DelayedProduce
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.record_check import check_keyed_batch, check_no_log_append_time, check_timestamps
from kbroker.protocol.records import BatchHeader, InvalidBatch, validate_produce_records
from kbroker.protocol.types import FileRegion
from kbroker.storage.log import AppendInfo, OffsetOutOfRange
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import KafkaStorageError, LogManager
from kbroker.storage.logs import ByPartition

log = structlog.get_logger("broker.replica_manager")

__all__ = ["Partition", "ReplicaManager", "READ_COMMITTED"]


@dataclass
class PartitionResult:
    error: ErrorCode = ErrorCode.NONE
    info: AppendInfo | None = None
    message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()
    log_start_offset: int = -1   # (a refused append: the partition's, where Kafka's answer carries it)


# Refusals Kafka answers with no log start offset; any other refusal of an append (a record that fails
# validation, a sequence out of order, too few in-sync replicas...) carries the partition's.
_WITHOUT_LOG_START = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                                ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR})


def refused_append(partition, exc: InvalidBatch) -> PartitionResult:
    """What a batch refused on its way into ``partition`` is answered (with Kafka's log start offset rule)."""
    error = ErrorCode[exc.error]
    start = -1 if exc.in_request or error in _WITHOUT_LOG_START or partition is None \
        else partition.log.log_start_offset
    return PartitionResult(error, message=str(exc), record_errors=exc.record_errors, log_start_offset=start)


@dataclass(slots=True)
class FetchPartitionRequest:
    """One partition's read; never changed once made (a fetch session keeps one per position)."""
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


@dataclass(slots=True)
class FetchPartitionResult:
    topic: str
    partition: int
    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileRegion | None = None
    aborted_transactions: list | None = None
    diverging_epoch: tuple[int, int] | None = None
    current_leader: tuple[int, int] | None = None


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager, clock=time.time) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.clock = clock
        self.partitions: dict[tuple[str, int], Partition] = ByPartition()   # (a topic's without a walk of all)
        self.fetch_purgatory = Purgatory("fetch")
        self.isr_shrinks = self.isr_expands = 0   # on partitions led here (metrics)
        self.replication_bytes_in = 0             # appended as a follower (metrics)
        self.produce_purgatory = Purgatory("produce")
        # Set by the cluster member: called with (partition, replica_id) when a follower may rejoin the ISR.
        self.on_follower_caught_up = None
        # (topic, partition) -> whether the cluster has that partition (on other brokers); None: one broker
        self.partition_exists = None
        self.leader_quota = None   # replication throttle (ReplicationQuota) of what this broker sends as leader
        self.on_hosted = None   # called with (topic, partition) when this broker starts serving a replica
        # Set by the broker: called with (log dir, partitions lost) when a log dir fails
        self.on_log_dir_failure = None
        # Each topic's count of changes to its partitions hosted here or to who leads them (one broker's Metadata
        # answers, kept encoded per topic, read it: broker/handlers/metadata_topics.py)
        self.generations: dict[str, int] = {}
        log_manager.on_dir_failure = self._log_dir_failed

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ------------------------------------------------------------------ partitions
    def make_leader(self, topic: str, index: int, config: LogConfig, is_new: bool = True) -> Partition | None:
        """One broker: lead the partition (None if its log dir has failed)."""
        tp = (topic, index)
        existing = self.partitions.get(tp)
        if existing is not None:
            return existing
        self._changed(topic)
        try:
            partition_log = self.log_manager.get_or_create(topic, index, config, is_new)
        except KafkaStorageError as exc:
            log.error("partition_offline", topic=topic, partition=index, reason=str(exc))
            return None
        cache = partition_log.leader_epoch_cache
        if cache.latest_epoch < 0 and partition_log.log_end_offset == partition_log.log_start_offset:
            # Leading starts epoch 0 here, as Kafka's leader records its epoch when it takes the partition
            # (a cluster's does so in become_leader_or_follower): OffsetForLeaderEpoch on an empty partition
            # then answers where epoch 0 ends. Kept in memory only, so that making thousands of partitions
            # costs no fsync each: an empty log gets it again at the next start, and one written meanwhile,
            # whose checkpoint its first append then leaves unwritten (epoch 0 is known), is rebuilt from its
            # batches at the next start (ReplicaLogMixin._load_epoch_cache).
            cache.assign(0, partition_log.log_end_offset, save=False)
        partition = Partition(topic, index, partition_log, self.broker_id, 0, [self.broker_id], [self.broker_id],
                              broker_id=self.broker_id)
        partition.maybe_increment_high_watermark()
        self.partitions[tp] = partition
        if self.on_hosted is not None:
            self.on_hosted(tp)
        return partition

    def become_leader_or_follower(self, topic: str, index: int, state, topic_id: bytes,
                                  config: LogConfig) -> ErrorCode:
        """Apply one partition of a LeaderAndIsr; an older leader epoch than ours changes nothing."""
        tp = (topic, index)
        self._changed(topic)
        partition = self.partitions.get(tp)
        if partition is None:
            try:   # a replica in a failed log dir answers KAFKA_STORAGE_ERROR: the controller moves on
                plog = self.log_manager.get_or_create(topic, index, config, is_new=getattr(state, "is_new", True))
            except KafkaStorageError:
                return ErrorCode.KAFKA_STORAGE_ERROR
            partition = self.partitions[tp] = Partition(topic, index, plog, -1, -1, broker_id=self.broker_id)
            if self.on_hosted is not None:
                self.on_hosted(tp)
        elif state.leader_epoch <= partition.leader_epoch:
            if state.leader_epoch < partition.leader_epoch:
                return ErrorCode.STALE_CONTROLLER_EPOCH
            if state.partition_epoch <= partition.partition_epoch:
                return ErrorCode.NONE   # already applied (a new controller resends what it knows)
        if state.leader == self.broker_id and partition.leader_id == self.broker_id:
            self.count_isr_change(partition.isr, state.isr)
        partition.leader_id, partition.leader_epoch = state.leader, state.leader_epoch
        partition.replicas, partition.isr = list(state.replicas), list(state.isr)
        partition.partition_epoch, partition.topic_id = state.partition_epoch, topic_id
        if partition.is_leader:
            plog = partition.log
            plog.leader_epoch_cache.assign(state.leader_epoch, plog.log_end_offset)
            partition.leader_epoch_start_offset = plog.log_end_offset
            partition.reset_followers(self.now_ms())
            partition.maybe_increment_high_watermark()
        else:
            partition.followers, partition.pending_isr = {}, None
        self.high_watermark_moved(tp)   # parked produces and fetches re-check who leads
        log.info("partition_state_changed", topic=topic, partition=index, leader=state.leader,
                 leader_epoch=state.leader_epoch, isr=list(state.isr))
        return ErrorCode.NONE

    def stop_replica(self, topic: str, index: int, delete: bool) -> None:
        """Stop serving a replica; with ``delete`` its log goes too (topic deletion)."""
        tp = (topic, index)
        # (deleted, as in remove_topic, the topic's count goes: a replica moved off this broker leaves none behind)
        if delete:
            self.generations.pop(topic, None)
        else:
            self._changed(topic)
        partition = self.partitions.get(tp)
        if partition is None:
            if delete:
                self.log_manager.delete(topic, index)
            return
        if delete:
            self.partitions.pop(tp)
            self.log_manager.delete(topic, index)
        else:
            partition.leader_id = -1
        self.high_watermark_moved(tp)

    def _changed(self, topic: str) -> None:
        self.generations[topic] = self.generations.get(topic, 0) + 1

    def count_isr_change(self, before, after) -> None:
        """A led partition's committed ISR went from ``before`` to ``after``: a shrink or an expansion (metrics)."""
        old, new = set(before), set(after)
        if old:
            self.isr_shrinks += new < old
            self.isr_expands += new > old

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def missing_error(self, topic: str, index: int) -> ErrorCode:
        """The error for a partition with no replica here: NOT_LEADER_OR_FOLLOWER when the cluster has it
        elsewhere (a client with stale metadata, e.g. after a reassignment, looks its leader up again, as
        Kafka's getPartitionOrError answers), else UNKNOWN_TOPIC_OR_PARTITION."""
        if self.log_manager.dir_of_offline((topic, index)) is not None:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self.partition_exists is not None and self.partition_exists(topic, index):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def remove_topic(self, topic: str) -> None:
        # (its count goes with it: answers kept of the topic were of its TopicMetadata, which goes too, and one
        # made again under the name is another)
        self.generations.pop(topic, None)
        for tp in self.partitions.of_topic(topic):
            self.partitions.pop(tp)
            self.log_manager.delete(*tp)
            self.fetch_purgatory.check_and_complete(tp)

    def update_config(self, topic: str, config: LogConfig) -> None:
        for tp in self.partitions.of_topic(topic):
            self.partitions[tp].log.config = config

    # ------------------------------------------------------------------ produce
    def append_records(self, topic: str, index: int, records, required_acks: int, *,
                       from_coordinator: bool = False, wake_fetches: bool = True,
                       validated: BatchHeader | None = None, keys_checked: bool = False) -> PartitionResult:
        """Validate and append one partition's batch. Errors come back as Kafka error codes.

        ``from_coordinator``: a coordinator's own batch (built by the broker,
        keyed by construction), so the per-record key check is skipped, as
        Kafka skips it for coordinator-origin appends.
        ``wake_fetches=False``: the caller appends more partitions of the same
        request and calls ``wake_fetches`` once they are all in (Kafka's
        delayed-action queue), so a parked follower fetch answers with every
        partition of the request in one response instead of one per partition.
        ``validated``: the batch's header from ``validate_produce_records`` on these very bytes (a produce that
        checked the batch before asking for its KIP-890 verification), so the CRC pass is not made twice.
        ``keys_checked``: the produce handler already read the records of this batch for a compacted topic
        (off the event loop, for a compressed one: ``handlers.produce``).
        """
        partition = self.partitions.get((topic, index))
        if partition is None:
            return PartitionResult(self.missing_error(topic, index))
        if not partition.is_leader:
            return PartitionResult(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                   message=f"broker {self.broker_id} is not the leader of {topic}-{index}")
        if records is None:
            return PartitionResult(ErrorCode.CORRUPT_MESSAGE, message="null records")
        config = partition.log.config
        if required_acks == -1 and len(partition.isr) < partition.min_isr:
            return PartitionResult(ErrorCode.NOT_ENOUGH_REPLICAS,
                                   message=f"ISR {len(partition.isr)} < min.insync.replicas {partition.min_isr}",
                                   log_start_offset=partition.log.log_start_offset)
        try:
            header = validated if validated is not None else validate_produce_records(
                records, config.max_message_bytes, allow_control=from_coordinator)
            if config.compact and not from_coordinator and not header.is_control and not keys_checked:
                check_keyed_batch(records, 0, header, config.max_inflated_bytes)
            if config.message_timestamp_type == "CreateTime" and not from_coordinator and not header.is_control:
                check_timestamps(records, header, self.now_ms(), config.message_timestamp_before_max_ms,
                                 config.message_timestamp_after_max_ms, config.max_inflated_bytes)
            elif not from_coordinator and not header.is_control:
                check_no_log_append_time(records, header, config.max_inflated_bytes)
            info = partition.log.append_as_leader(records, header, partition.leader_epoch)
        except InvalidBatch as exc:
            log.info("produce_rejected", topic=topic, partition=index, error=exc.error, reason=str(exc))
            return refused_append(partition, exc)
        except OSError as exc:
            self.log_manager.report(partition.log.parent_dir, exc)
            return PartitionResult(ErrorCode.KAFKA_STORAGE_ERROR, message=f"log dir failed: {exc}")
        if not info.duplicate:
            partition.maybe_increment_high_watermark()
            if wake_fetches:
                self.fetch_purgatory.check_and_complete((topic, index))
        return PartitionResult(info=info)

    def wake_fetches(self, appended) -> None:
        """Complete the fetches parked on ``appended`` partitions (after ``append_records(wake_fetches=False)``)."""
        for tp in appended:
            self.fetch_purgatory.check_and_complete(tp)

    def complete_when_replicated(self, waiting: dict[tuple[str, int], tuple[int, dict]], response,
                                 timeout_ms: int):
        """``response`` once every partition's high watermark has passed its offset (the ISR has the writes),
        at once if it already has, else a future of it from the produce purgatory (see DelayedProduce for
        the errors written into each partition's entry). Acks=all produce, markers and coordinator writes
        all wait here."""
        if all((p := self.partitions.get(tp)) is not None and p.log.high_watermark >= need
               for tp, (need, _) in waiting.items()):
            return response   # a single broker, or followers already caught up: no operation to park
        op = DelayedProduce(self, waiting, response, timeout_ms)
        if self.produce_purgatory.try_complete_else_watch(op, list(waiting)):
            return op.future.result()
        return op.future

    async def wait_replicated(self, topic: str, index: int, timeout_ms: int) -> ErrorCode:
        """The error code once the whole ISR has everything appended to the partition so far."""
        partition = self.partitions.get((topic, index))
        if partition is None or not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        entry = {"error_code": ErrorCode.NONE}
        result = self.complete_when_replicated({(topic, index): (partition.log.log_end_offset, entry)}, entry,
                                               timeout_ms)
        if isinstance(result, asyncio.Future):
            result = await result
        return result["error_code"]

    def replicated_or_wait(self, topic: str, index: int, timeout_ms: int):
        """None when the ISR already has everything appended to this partition (its high watermark is at the
        log end, as on a single broker), else a function that starts ``wait_replicated`` (a function, so that
        no coroutine is made that nobody awaits should its caller be cancelled first)."""
        partition = self.partitions.get((topic, index))
        if partition is not None and partition.is_leader and \
                partition.log.high_watermark >= partition.log.log_end_offset:
            return None
        return functools.partial(self.wait_replicated, topic, index, timeout_ms)

    def log_start_moved(self, tp: tuple[str, int]) -> None:
        """Retention or DeleteRecords moved the partition's log start: fetches parked on it, and fetch sessions
        that hold it at rest, look again."""
        self.fetch_purgatory.check_and_complete(tp)

    def high_watermark_moved(self, tp: tuple[str, int]) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    # ------------------------------------------------------------------ fetch
    def read(self, request: FetchPartitionRequest, replica_id: int, isolation_level: int,
             min_one_batch: bool, from_follower: bool = False) -> FetchPartitionResult:
        """``from_follower``: a consumer's fetch carrying client metadata (Fetch v11+, KIP-392), which a
        follower serves from its own log up to its high watermark, as Kafka does."""
        partition = self.partitions.get((request.topic, request.partition))
        result = FetchPartitionResult(request.topic, request.partition)
        if partition is None:
            result.error = self.missing_error(request.topic, request.partition)
            return result
        result.error = self._fetch_error(partition, request, replica_id, from_follower)
        if result.error:
            result.current_leader = (partition.leader_id, partition.leader_epoch)
            return result
        plog = partition.log
        if request.last_fetched_epoch >= 0:
            epoch, end = plog.leader_epoch_cache.end_offset_for(request.last_fetched_epoch, plog.log_end_offset)
            if end < 0 and replica_id < 0:
                # A consumer's epoch newer than any this log has (Kafka: OFFSET_OUT_OF_RANGE, and the consumer
                # resets its position), told no offsets with it as below
                result.error = ErrorCode.OFFSET_OUT_OF_RANGE
                result.high_watermark = result.last_stable_offset = result.log_start_offset = -1
                return result
            if epoch < request.last_fetched_epoch or end < request.fetch_offset:
                # The fetcher's log diverges from ours: it truncates to this point first (KIP-320).
                result.diverging_epoch = (epoch, end)
                result.high_watermark = plog.high_watermark
                result.log_start_offset = plog.log_start_offset
                return result
        if replica_id >= 0:
            # The high watermark moves with a follower's position, or waits on the leader's end: when neither
            # (an idle partition's every round) there is nothing to compute.
            moved = partition.update_follower(replica_id, request.fetch_offset, self.now_ms())
            if (moved or plog.high_watermark < plog.log_end_offset) and partition.maybe_increment_high_watermark():
                self.high_watermark_moved((request.topic, request.partition))
            if (self.on_follower_caught_up is not None and replica_id not in partition.isr
                    and partition.can_join_isr(replica_id)):
                self.on_follower_caught_up(partition, replica_id)
        result.high_watermark = plog.high_watermark
        result.last_stable_offset = plog.last_stable_offset
        result.log_start_offset = plog.log_start_offset
        if self.leader_throttled(partition, replica_id):
            return result   # a throttled replica over the rate: its position is noted, no records this round
        bound = partition.fetch_bound(replica_id, isolation_level)
        try:
            found = plog.read(request.fetch_offset, request.max_bytes, bound, min_one_batch)
        except OffsetOutOfRange:
            result.error = ErrorCode.OFFSET_OUT_OF_RANGE
            if replica_id < 0:   # (a consumer is told no offsets with it, as Kafka tells it; it looks them up)
                result.high_watermark = result.last_stable_offset = result.log_start_offset = -1
            # (a follower keeps them: kbroker's fetcher truncates or starts over from them at once)
            return result
        except OSError as exc:
            self.log_manager.report(plog.parent_dir, exc)
            result.error = ErrorCode.KAFKA_STORAGE_ERROR
            return result
        if found is not None:
            result.records = FileRegion(found.segment, found.position, found.length)
            if replica_id >= 0 and self.leader_quota is not None:
                self.leader_quota.record(partition, found.length, self.clock())
            if isolation_level == READ_COMMITTED and replica_id < 0:
                # Clients drop an aborted producer's records from its first offset to its marker.
                result.aborted_transactions = [
                    {"producer_id": a.producer_id, "first_offset": a.first_offset}
                    for a in plog.aborted_transactions(request.fetch_offset, plog.fetch_upper_bound(found))]
        return result

    def leader_throttled(self, partition: Partition, replica_id: int) -> bool:
        """Whether a follower's fetch of ``partition`` gets no records now (replication throttle)."""
        return (replica_id >= 0 and self.leader_quota is not None
                and self.leader_quota.holds_back(partition, replica_id, self.clock()))

    @staticmethod
    def _fetch_error(partition: Partition, request: FetchPartitionRequest, replica_id: int,
                     from_follower: bool = False) -> ErrorCode:
        """The leader serves fetches, to the partition's own replicas or consumers, at its epoch; a follower
        serves consumers that may read from it (``from_follower``), at the epoch it knows."""
        if not partition.is_leader and not (from_follower and replica_id < 0 and partition.leader_id >= 0):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if request.current_leader_epoch >= 0:   # (a Fetch's negative epoch names none, in Kafka's FetchRequest)
            if request.current_leader_epoch < partition.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if request.current_leader_epoch > partition.leader_epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH
        if replica_id >= 0 and replica_id not in partition.replicas:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER   # Kafka: "not recognized as a valid replica"
        return ErrorCode.NONE

    def fetch(self, requests: list[FetchPartitionRequest], *, replica_id: int, isolation_level: int,
              max_bytes: int, from_follower: bool = False, used: int = 0) -> list[FetchPartitionResult]:
        """Read every requested partition within the response's ``max_bytes`` (the first batch always fits);
        ``used``: bytes of records the response already carries from other reads."""
        results = []
        remaining = max_bytes - used
        got_records = used > 0
        for req in requests:
            limited = FetchPartitionRequest(req.topic, req.partition, req.fetch_offset,
                                            max(0, min(req.max_bytes, remaining)), req.current_leader_epoch,
                                            req.last_fetched_epoch)
            result = self.read(limited, replica_id, isolation_level, min_one_batch=not got_records,
                               from_follower=from_follower)
            if result.records is not None:
                remaining -= result.records.length
                got_records = True
            results.append(result)
        return results

    def _log_dir_failed(self, log_dir: str, lost: list[tuple[str, int]]) -> None:
        """A log dir failed with the logs of ``lost``: those partitions stop (produce and fetch answer
        KAFKA_STORAGE_ERROR), what waited on them answers now, and the broker is told (fetchers,
        coordinators, the controller)."""
        for topic in {tp[0] for tp in lost}:
            self._changed(topic)
        stopped = [tp for tp in lost if self.partitions.pop(tp, None) is not None]
        for tp in stopped:
            self.high_watermark_moved(tp)
        log.error("partitions_offline", log_dir=log_dir, partitions=len(stopped))
        if self.on_log_dir_failure is not None:
            self.on_log_dir_failure(log_dir, stopped)

    def shutdown(self) -> None:
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()
