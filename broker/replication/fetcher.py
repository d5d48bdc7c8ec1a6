"""Replica fetchers: followers copy their leaders' logs with Fetch requests over the Kafka protocol.

One ``ReplicaFetcher`` per (leader broker, fetcher index); a partition goes
to fetcher ``hash(partition) % num.replica.fetchers`` of its leader. Each
sends one long-polling Fetch (v12, ``replica_id`` = this broker) for all its
partitions, appends what comes back unchanged and takes the leader's high
watermark. A diverging epoch in the answer (KIP-320) truncates the local
tail first; the next fetch then resumes from the new log end.

Fetches run in an incremental fetch session (KIP-227), as Kafka's followers'
do: after a full fetch opens it, a fetch names only the partitions whose
position changed (and forgets those that left), and the leader answers only
partitions with records or a new high watermark, so an idle partition costs
neither side an entry per round. A session the leader lost or an epoch out of
step (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH), or a fetch
that failed on the way, starts over with a full fetch.

An idle round (a fetch naming nothing, answered with nothing) is sent again
from the connection's callback while nothing here may have moved
(broker/replication/idle_rounds.py): the task below sees only the answers
that say something.

Building an incremental fetch looks only at the partitions that may have
moved since the last one (``touched``: added, removed, answered, out of
backoff); every ``REVISIT_S`` (and for every full fetch, or while a
replication quota holds partitions back) it looks at all of them, so that a
change no event announces here (retention moving a follower's log start) is
sent within that bound.

Invariants: a fetcher only touches partitions assigned to it at the leader
epoch it was given; a partition moved elsewhere meanwhile is left alone; what
the leader's session holds for each partition is ``in_session``, updated only
from an answered fetch.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import structlog

from kbroker.client.connection import ConnectionClosed, KafkaConnection
from kbroker.broker.partitions.fetch_sessions import next_epoch
from kbroker.broker.replication.idle_rounds import IdleRounds
from kbroker.broker.replication.quota import follower_quota
from kbroker.client.tasks import cancel_and_wait
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records import InvalidBatch

log = structlog.get_logger("broker.replication.fetcher")
FETCH = 1
REVISIT_S = 5.0
FETCH_VERSION = 12


SESSION_LOST = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH)


@dataclass
class FetchTarget:
    leader_epoch: int
    failed_until: float = 0.0


def truncation_offset(plog, leader_epoch: int, leader_end: int) -> int:
    """Where a follower cuts its log given the leader's (epoch, end offset) for its last epoch (Kafka's rule).

    The follower keeps what it shares with the leader: up to the leader's end
    of that epoch, or up to its own end of the largest epoch both know; the
    next fetch then checks again from there.
    """
    if leader_end < 0:
        return plog.high_watermark
    if leader_epoch < 0:
        return min(leader_end, plog.log_end_offset)
    epoch, end = plog.leader_epoch_cache.end_offset_for(leader_epoch, plog.log_end_offset)
    if epoch < 0:
        return min(leader_end, plog.log_end_offset)
    if epoch != leader_epoch:
        return min(end, plog.log_end_offset)
    return min(leader_end, end)


class ReplicaFetcher:
    def __init__(self, manager: "ReplicaFetcherManager", leader_id: int, index: int, address: tuple[str, int]):
        self.manager = manager
        self.leader_id = leader_id
        self.index = index
        self.address = address
        self.partitions: dict[tuple[str, int], FetchTarget] = {}
        self.wake = asyncio.Event()
        self.conn: KafkaConnection | None = None
        self.session_id = 0
        self.session_epoch = 0   # the next fetch's; 0: a full fetch that opens a new session
        # partition -> (fetch offset, log start offset, leader epoch, last fetched epoch) as the leader's session has it
        self.in_session: dict[tuple[str, int], tuple] = {}
        self.backing_off: set[tuple[str, int]] = set()   # partitions whose target has a failed_until set
        self.touched: set[tuple[str, int]] = set()   # partitions that may have moved since the last request built
        self.revisit_at = 0.0   # (monotonic) when the next request looks at every partition
        self.held_back = False   # the last request was built under a replication quota (some may be held back)
        self.idle = IdleRounds(self, FETCH, FETCH_VERSION)   # its connection's repeater
        self.task = asyncio.create_task(self._run())

    def add(self, tp: tuple[str, int], leader_epoch: int) -> None:
        self.partitions[tp] = FetchTarget(leader_epoch)
        self.touched.add(tp)
        self.wake.set()

    def remove(self, tp: tuple[str, int]) -> None:
        self.partitions.pop(tp, None)
        self.touched.add(tp)

    def at_rest(self) -> bool:
        """Nothing here may have moved since the fetch that is out was built, so the next would be built the
        same (broker/replication/idle_rounds.py): no partition touched or backing off, the periodic full look
        not due, no replication quota."""
        return not (self.touched or self.backing_off or self.held_back or self.manager.quota.limited) and \
            time.monotonic() < self.revisit_at

    async def _run(self) -> None:
        config = self.manager.config
        backoff = config["replica.fetch.backoff.ms"] / 1000
        while True:
            now = asyncio.get_running_loop().time()
            ready = self._ready(now)
            if not ready:
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), backoff if self.partitions else None)
                except asyncio.TimeoutError:
                    pass
                continue
            built = self._request(ready)
            if built is None:
                self.revisit_at = 0.0   # (what it found is in no answered fetch: the next one looks again)
                await asyncio.sleep(backoff)
                continue
            body, in_session = built
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = await KafkaConnection.open(*self.address, client_id=self.manager.client_id,
                                                           timeout=config["replica.socket.timeout.ms"] / 1000,
                                                           **self.manager.connect_options)
                    self.conn.repeater = self.idle
                self.idle.sent(body)
                response = await self.conn.request(FETCH, FETCH_VERSION, body,
                                                   timeout=config["replica.socket.timeout.ms"] / 1000)
            except (ConnectionClosed, ConnectionError, OSError, asyncio.TimeoutError) as exc:
                log.debug("replica_fetch_failed", leader=self.leader_id, error=str(exc))
                await self._close()
                self.session_epoch = 0   # (the leader may or may not have taken that epoch)
                await asyncio.sleep(backoff)
                continue
            if response.error_code in SESSION_LOST:
                log.debug("replica_fetch_session_lost", leader=self.leader_id,
                          error=ErrorCode(response.error_code).name)
                self.session_epoch = 0
                continue
            if body["session_epoch"] == -1:
                pass   # (no session: kbroker.replica.fetch.sessions is off)
            elif body["session_epoch"] == 0:
                self.session_id = response.session_id
                self.session_epoch = 1 if response.session_id else 0   # (no session: full fetches again)
            else:
                self.session_epoch = next_epoch(self.session_epoch)
            self.in_session = in_session
            self._process(ready, response, now + backoff)   # (a partition re-added meanwhile has a new target)

    def _ready(self, now: float) -> dict:
        """The partitions to fetch now and their targets as they are (a copy: one re-added while the fetch is
        out gets a new target, and the answer is not applied to it): all but those backing off after an
        error."""
        ready = dict(self.partitions)
        for tp in list(self.backing_off):
            target = ready.get(tp)
            if target is None or target.failed_until <= now:
                self.backing_off.discard(tp)
                self.touched.add(tp)
            else:
                del ready[tp]
        return ready

    def _request(self, ready) -> tuple[dict, dict] | None:
        """(the Fetch, what the leader's session holds once it is answered), or None with nothing to fetch.
        A full fetch names every partition; an incremental one those whose position moved, and forgets those
        no longer fetched here (moved, in backoff, or held back by the replication quota, as Kafka's do)."""
        config = self.manager.config
        rm = self.manager.replica_manager
        quota, now = self.manager.quota, time.monotonic()
        limited = quota.limited   # (no rate: nothing is held back, and each partition's check is saved)
        sessions = config["kbroker.replica.fetch.sessions"]
        full = self.session_epoch == 0 or not sessions
        if full or limited or self.held_back or now >= self.revisit_at:
            looked, in_session = ready, {}
            self.revisit_at = now + REVISIT_S
        else:   # only what may have moved: the rest stands as the leader's session has it
            looked, in_session = {tp: ready[tp] for tp in self.touched if tp in ready}, dict(self.in_session)
            for tp in self.touched:
                if tp not in ready:
                    in_session.pop(tp, None)
        self.touched, self.held_back = set(), limited
        topics: dict[str, list] = {}
        partitions = rm.partitions
        for tp, target in looked.items():
            partition = partitions.get(tp)
            if partition is None:   # (not hosted here yet, or lost with its log dir): looked at again next time
                in_session.pop(tp, None)
                self.touched.add(tp)
                continue
            if limited and quota.holds_back(partition, self.manager.broker_id, now):
                in_session.pop(tp, None)
                continue
            plog = partition.log
            state = (plog.log_end_offset, plog.log_start_offset, target.leader_epoch,
                     plog.leader_epoch_cache.latest_epoch)
            in_session[tp] = state
            if full or self.in_session.get(tp) != state:
                topics.setdefault(tp[0], []).append({
                    "partition": tp[1], "current_leader_epoch": state[2], "fetch_offset": state[0],
                    "last_fetched_epoch": state[3], "log_start_offset": state[1],
                    "partition_max_bytes": config["replica.fetch.max.bytes"]})
        if not in_session:
            return None
        forgotten: dict[str, list[int]] = {}
        if not full:
            for topic, index in self.in_session.keys() - in_session.keys():
                forgotten.setdefault(topic, []).append(index)
        return {"replica_id": self.manager.broker_id, "max_wait_ms": config["replica.fetch.wait.max.ms"],
                "min_bytes": config["replica.fetch.min.bytes"],
                "max_bytes": config["replica.fetch.response.max.bytes"], "isolation_level": 0,
                "session_id": self.session_id if sessions else 0,
                "session_epoch": self.session_epoch if sessions else -1,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in forgotten.items()],
                "rack_id": ""}, in_session

    def _process(self, sent, response, retry_at: float) -> None:
        rm = self.manager.replica_manager
        for topic in response.responses:
            for p in topic.partitions:
                tp = (topic.topic, p.partition_index)
                self.touched.add(tp)   # (its log or backoff may change here: the next request looks at it)
                target = self.partitions.get(tp)
                partition = rm.get(*tp)
                if target is None or target is not sent.get(tp) or partition is None or partition.is_leader:
                    continue   # reassigned while the fetch was out
                error = ErrorCode(p.error_code)
                try:
                    if error == ErrorCode.NONE:
                        high_watermark = partition.log.high_watermark
                        self._apply(partition, p)
                        if partition.log.high_watermark != high_watermark:   # consumers reading this follower
                            rm.fetch_purgatory.check_and_complete(tp)
                        if p.records:
                            rm.replication_bytes_in += len(p.records)
                            self.manager.quota.record(partition, len(p.records), time.monotonic())
                    elif error == ErrorCode.OFFSET_OUT_OF_RANGE:
                        self._out_of_range(partition, p)
                    else:
                        # NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH...: wait for the controller's word.
                        target.failed_until = retry_at
                        self.backing_off.add(tp)
                        log.debug("replica_fetch_error", topic=tp[0], partition=tp[1], error=error.name)
                except InvalidBatch as exc:
                    target.failed_until = retry_at
                    self.backing_off.add(tp)
                    log.warning("replica_fetch_bad_batch", topic=tp[0], partition=tp[1], error=str(exc))
                except OSError as exc:   # the replica's log dir failed: it goes offline with the dir
                    rm.log_manager.report(partition.log.parent_dir, exc)

    @staticmethod
    def _apply(partition, p) -> None:
        plog = partition.log
        diverging = p.diverging_epoch
        if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
            plog.truncate_to(truncation_offset(plog, diverging.epoch, diverging.end_offset))
            return
        if p.records:
            plog.append_as_follower(p.records)
        plog.high_watermark = min(max(p.high_watermark, plog.high_watermark), plog.log_end_offset)
        if p.log_start_offset > plog.log_start_offset:   # the leader deleted records (DeleteRecords, retention)
            plog.advance_log_start_offset(p.log_start_offset)

    @staticmethod
    def _out_of_range(partition, p) -> None:
        plog = partition.log
        if plog.log_end_offset < p.log_start_offset:
            plog.truncate_fully_and_start_at(p.log_start_offset)   # the leader deleted what we lack
        else:
            plog.truncate_to(max(p.high_watermark, plog.log_start_offset))

    async def _close(self) -> None:
        if self.conn is not None:
            await self.conn.close()
        self.conn = None

    async def stop(self) -> None:
        if not await cancel_and_wait(self.task):
            log.warning("replica_fetcher_stop_timed_out", leader=self.leader_id)
        await self._close()


class ReplicaFetcherManager:
    def __init__(self, broker_id: int, replica_manager, config, address_of, connect_options=None) -> None:
        """``address_of(broker_id)``: the (host, port) of a leader's inter-broker listener, or None;
        ``connect_options``: ``KafkaConnection.open``'s security arguments to reach it with (TLS, SASL)."""
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.config = config
        self.address_of = address_of
        self.client_id = f"replica-fetcher-{broker_id}"
        self.connect_options = connect_options or {}
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self.quota = follower_quota(broker_id, config)
        self.assigned: dict[tuple[str, int], ReplicaFetcher] = {}

    def follow(self, tp: tuple[str, int], leader_id: int, leader_epoch: int) -> None:
        self.unfollow(tp)
        address = self.address_of(leader_id)
        if address is None or leader_id < 0:
            return
        key = (leader_id, hash(tp) % max(1, self.config["num.replica.fetchers"]))
        fetcher = self.fetchers.get(key)
        if fetcher is None or fetcher.address != address:
            if fetcher is not None:
                asyncio.ensure_future(fetcher.stop())
            fetcher = self.fetchers[key] = ReplicaFetcher(self, leader_id, key[1], address)
        fetcher.add(tp, leader_epoch)
        self.assigned[tp] = fetcher

    def resize(self) -> None:
        """``num.replica.fetchers`` changed: hand every followed partition to its fetcher under the new count
        (Kafka's resizeThreadPool) and stop the fetchers left with none. A response that a moved partition's
        old fetcher still receives is dropped (``_process`` checks the partition is still its own)."""
        followed = [(tp, f.leader_id, f.partitions[tp].leader_epoch) for tp, f in self.assigned.items()
                    if tp in f.partitions]
        for tp, leader_id, epoch in followed:
            self.follow(tp, leader_id, epoch)
        for key, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                del self.fetchers[key]
                asyncio.ensure_future(fetcher.stop())

    def unfollow(self, tp: tuple[str, int]) -> None:
        fetcher = self.assigned.pop(tp, None)
        if fetcher is not None:
            fetcher.remove(tp)

    async def shutdown(self) -> None:
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()
        self.fetchers.clear()
        self.assigned.clear()
