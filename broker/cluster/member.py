"""ClusterMember: this broker's part in a ZooKeeper cluster.

It registers the broker in ``/brokers/ids``, runs the controller election,
applies the controller's LeaderAndIsr / UpdateMetadata / StopReplica (fenced
by controller epoch), starts and stops replica fetchers, proposes ISR changes
with AlterPartition, writes new topics to ZooKeeper, and hands leadership
away with ControlledShutdown before a clean stop.

Fencing: when this broker's ZooKeeper session expires (or the process was
paused longer than the session timeout, e.g. SIGSTOP), it stops acting as
leader of anything at once; the controller has meanwhile elected others, and
this broker only leads again when a LeaderAndIsr says so.
"""

from __future__ import annotations

import asyncio
import time

import structlog
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError
from kazoo.protocol.states import KazooState

from kbroker.broker.cluster.controller import KafkaController
from kbroker.broker.cluster.isr_proposals import IsrProposals
from kbroker.broker.cluster.metadata_cache import MetadataCache
from kbroker.broker.cluster.process_clock import ProcessClock
from kbroker.broker.cluster.zk_acls import ClusterAcls
from kbroker.broker.cluster.zk_client import BrokerInfo, KafkaZkClient, TopicAssignment, TopicExists
from kbroker.broker.cluster.zk_store import ZkTopicStore
from kbroker.broker.metadata import TopicMetadata, new_cluster_id
from kbroker.storage import meta_properties
from kbroker.broker.replication.fetcher import ReplicaFetcherManager
from kbroker.client.connection import ConnectionClosed, KafkaConnection
from kbroker.client.tasks import cancel_and_wait, sleep_to_beat
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("broker.cluster.member")
CONTROLLED_SHUTDOWN = 7
ZK_AWAY = (ConnectionLoss, SessionExpiredError, ConnectionClosedError)


class ClusterMember:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.broker_id = broker.broker_id
        self.zk = KafkaZkClient(self.config["zookeeper.connect"], self.config["zookeeper.session.timeout.ms"],
                                self.config["zookeeper.connection.timeout.ms"])
        self.cache = MetadataCache()
        self.topics = ZkTopicStore(self)
        self.acls = ClusterAcls(self, broker.authorizer) if broker.authorizer is not None else None
        self.controller: KafkaController | None = None
        self.fetchers = ReplicaFetcherManager(self.broker_id, broker.replica_manager, self.config,
                                              self._leader_address, broker.inter_broker_connect)
        self.controller_epoch_seen = 0
        self.loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Task] = set()
        self._controller_conn: KafkaConnection | None = None
        self._last_tick = time.monotonic()
        self._pause_limit = self.config["zookeeper.session.timeout.ms"] / 1000
        self._clock: ProcessClock | None = None
        self.stopping = False
        # Set as the broker starts to stop, before its controlled shutdown (Kafka's isShuttingDown): from then on
        # a partition it is told to follow gets no fetcher. A fetcher started then would catch up with the new
        # leader just before the broker leaves, and a Kafka 3.3 leader holds its high watermark at a replica
        # that caught up within replica.lag.time.max.ms, gone or not.
        self.shutting_down = False
        self.registered = False   # /brokers/ids/<id> written by this session or an earlier one
        self.broker_epoch = -1    # that znode's czxid: requests for an earlier run of this broker carry a lower one
        self._leadership_applied = asyncio.Event()   # set after each LeaderAndIsr is applied
        self.isr_proposals = IsrProposals(self)
        broker.replica_manager.on_follower_caught_up = self._expand_isr
        broker.replica_manager.partition_exists = lambda topic, index: self.cache.partition(topic, index) is not None

    # ------------------------------------------------------------------ plumbing
    async def zk_call(self, fn, *args):
        """A ZooKeeper call off the event loop. While ZooKeeper is away (connection lost, or the session
        expired and a new one is being made) it waits and tries again, for up to ``request.timeout.ms``:
        a metadata change made during an outage is applied when ZooKeeper returns, not dropped."""
        deadline = self.loop.time() + self.config["request.timeout.ms"] / 1000
        delay = 0.1
        while True:
            try:
                return await asyncio.to_thread(fn, *args)
            except ZK_AWAY as exc:
                if self.stopping or self.loop.time() + delay > deadline:
                    raise
                log.info("zookeeper_call_waiting", call=getattr(fn, "__name__", "?"), error=type(exc).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    def spawn(self, coro) -> asyncio.Task:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("cluster_task_failed", task=task.get_coro().__qualname__, error=repr(task.exception()))

    def _leader_address(self, broker_id: int):
        return self.cache.endpoint(broker_id, self.config.inter_broker_listener)

    # ------------------------------------------------------------------ start and session
    async def start(self) -> None:
        await self.zk_call(self.zk.start)
        cluster_id = await self.zk_call(self.zk.get_or_create_cluster_id,
                                        self.config["cluster.id"] or new_cluster_id())
        # Kafka's check before it serves a log: a data dir of another cluster (ZooKeeper wiped, or
        # zookeeper.connect naming the wrong ensemble) stops the broker, rather than its logs becoming strays here.
        meta_properties.verify_cluster(self.config.log_dirs, self.broker_id, cluster_id)
        meta_properties.write(self.config.log_dirs, self.broker_id, cluster_id)
        self.topics.cluster_id = cluster_id
        self.zk.add_listener(self._session_state)
        await self.topics.load_broker_configs()   # (before registering: advertised.listeners may be one)
        await self.topics.load_group_configs()
        await self.topics.load_features()
        await self.topics.load_users()
        await self.topics.load_tokens()
        await self.topics.load_quotas()
        if self.acls is not None:
            await self.acls.start()
        await self._register()
        self.controller = KafkaController(self.broker, self.zk)
        self.controller.start()
        self._clock = ProcessClock(self._pause_limit)
        self.spawn(self._watch_pauses())
        self.spawn(self._shrink_isr_periodically())
        await self.topics.watch_config_changes()

    def _registration(self) -> tuple[BrokerInfo, dict[str, str]]:
        endpoints = self.broker.endpoints
        names = {e[0] for e in endpoints}
        security = {name: protocol for name, protocol in self.config.security_protocol_map.items() if name in names}
        return BrokerInfo(self.broker_id, list(endpoints), self.config["broker.rack"]), security

    async def _register(self) -> None:
        self.broker_epoch = await self.zk_call(self.zk.register_broker, *self._registration(),
                                               self.config["zookeeper.session.timeout.ms"] / 1000 + 5)
        self.registered = True
        log.info("broker_registered", broker_id=self.broker_id, endpoints=self.broker.endpoints,
                 broker_epoch=self.broker_epoch)

    async def update_registration(self) -> None:
        """Our advertised endpoints changed (a dynamic advertised.listeners): rewrite the registration."""
        if self.registered:
            await self.zk_call(self.zk.update_broker_registration, *self._registration())
            log.info("broker_registration_updated", broker_id=self.broker_id, endpoints=self.broker.endpoints)

    def _session_state(self, state) -> None:
        """kazoo's thread: a lost session means the controller has already moved our leaderships."""
        if state == KazooState.LOST and not self.stopping:
            self.loop.call_soon_threadsafe(self._session_lost)

    def _session_lost(self) -> None:
        log.warning("zookeeper_session_expired", broker_id=self.broker_id)
        self.fence_leaderships("zookeeper session expired")
        if self.controller is not None and self.controller.active:
            self.controller.enqueue("elect")
        self.spawn(self._reregister())

    async def _reregister(self) -> None:
        while True:
            try:
                await self._register()
                if self.controller is not None:
                    self.controller.enqueue("elect")
                await self.topics.watch_config_changes(resume=True)   # the old session's watches went with it
                if self.acls is not None:
                    await self.acls.start(resume=True)
                return
            except Exception as exc:   # ZooKeeper still away: keep trying
                log.warning("broker_reregister_failed", error=str(exc))
                await asyncio.sleep(1)

    async def _watch_pauses(self) -> None:
        """A process paused past its session timeout (SIGSTOP) must not go on as leader (``ProcessClock`` tells
        such a pause from a loop that was only busy). This timer notices
        a pause even when nothing arrives; ``check_paused`` on every request notices it first when a request
        is what wakes the process (the event loop may run the socket's callback before any timer). A tick of a
        tenth of the limit (at most a second: an idle broker wakes for little else) keeps a busy loop's normal
        gaps far below it; a pause is noticed at the first wake after it whatever the tick."""
        tick = min(1.0, self._pause_limit / 10)
        while True:
            await sleep_to_beat(tick)   # (with the broker's other periodic tasks: one wake-up for them all)
            self.check_paused()

    def check_paused(self) -> None:
        now = time.monotonic()
        gap = now - self._last_tick
        if gap > self._pause_limit:
            if self._clock is None or self._clock.stopped_since(self._last_tick, now):
                self.fence_leaderships(f"process paused for {gap:.1f}s")
            else:   # (a callback held the event loop; kazoo's thread kept the session, and we our leaderships)
                log.warning("event_loop_blocked", seconds=round(gap, 1))
        self._last_tick = now

    def fence_leaderships(self, reason: str) -> None:
        rm = self.broker.replica_manager
        fenced = 0
        for tp, partition in rm.partitions.items():
            if partition.is_leader:
                partition.leader_id = -1
                partition.partition_epoch = -1   # the controller's next word about it is applied in full
                rm.high_watermark_moved(tp)
                self.broker.coordination.leadership_changed(tp[0], tp[1], False)
                fenced += 1
        if fenced:
            log.warning("leaderships_fenced", partitions=fenced, reason=reason)

    # ------------------------------------------------------------------ controller requests
    def check_controller_epoch(self, epoch: int) -> bool:
        if epoch < self.controller_epoch_seen:
            return False
        self.controller_epoch_seen = epoch
        return True

    def stale(self, request, api: str) -> ErrorCode:
        """Why a controller's request must be refused: sent by an older controller, or meant for an earlier run
        of this broker (one that stopped and started again before the controller noticed: Kafka's
        STALE_BROKER_EPOCH; -1 is a controller that does not know epochs)."""
        if request.broker_epoch != -1 and request.broker_epoch < self.broker_epoch:
            log.info("stale_broker_epoch", api=api, broker_epoch=request.broker_epoch,
                     current=self.broker_epoch, controller_id=request.controller_id)
            return ErrorCode.STALE_BROKER_EPOCH
        if not self.check_controller_epoch(request.controller_epoch):
            return ErrorCode.STALE_CONTROLLER_EPOCH
        return ErrorCode.NONE

    async def update_metadata(self, request) -> ErrorCode:
        if error := self.stale(request, "UpdateMetadata"):
            return error
        added, deleted = self.cache.update(request)
        store = self.topics.topics
        gone_ids = {name: store.pop(name).topic_id for name in deleted if name in store}
        configs = {name: await self.zk_call(self.zk.topic_config, name) for name in added - set(store)}
        for name, topic_configs in configs.items():   # (entries go in whole, after the awaits)
            store.setdefault(name, TopicMetadata(name, self.cache.topic_ids.get(name, bytes(16)), 0, 1,
                                                 topic_configs))
        for name in {topic.topic_name for topic in request.topic_states}:   # (the topics this update named)
            meta, parts = store.get(name), self.cache.partitions.get(name)
            if meta is not None and parts is not None:
                meta.partitions = len(parts)
                meta.topic_id = self.cache.topic_ids.get(name, meta.topic_id)
                meta.replication_factor = len(parts[0].replicas) if 0 in parts else 1
        for name in deleted:
            self.broker.coordination.topic_deleted(name, gone_ids.get(name))
        return ErrorCode.NONE

    async def leader_and_isr(self, request) -> tuple[ErrorCode, dict]:
        if error := self.stale(request, "LeaderAndIsr"):
            return error, {}
        rm = self.broker.replica_manager
        errors = {}
        for leader in request.live_leaders:
            if leader.broker_id not in self.cache.brokers:
                self.cache.brokers.setdefault(leader.broker_id, _live(leader, self.config.inter_broker_listener))
        for topic in request.topic_states:
            name = topic.topic_name
            if name not in self.topics.topics:
                configs = await self.zk_call(self.zk.topic_config, name)
                self.topics.topics[name] = TopicMetadata(name, topic.topic_id, 0, 1, configs)
            config = self.broker.topic_config(name)
            for state in topic.partition_states:
                tp = (name, state.partition_index)
                error = rm.become_leader_or_follower(name, state.partition_index, state, topic.topic_id, config)
                errors[(topic.topic_id, state.partition_index)] = error
                if error:
                    continue
                partition = rm.get(*tp)
                if partition.is_leader or self.shutting_down:
                    self.fetchers.unfollow(tp)
                else:
                    self.fetchers.follow(tp, state.leader, state.leader_epoch)
                self.broker.coordination.leadership_changed(name, state.partition_index, partition.is_leader)
        self._leadership_applied.set()
        return ErrorCode.NONE, errors

    def stop_replica(self, request) -> tuple[ErrorCode, list]:
        if error := self.stale(request, "StopReplica"):
            return error, []
        out = []
        for topic in request.topic_states:
            for p in topic.partition_states:
                tp = (topic.topic_name, p.partition_index)
                self.fetchers.unfollow(tp)
                self.broker.coordination.leadership_changed(tp[0], tp[1], False)
                self.broker.replica_manager.stop_replica(tp[0], tp[1], p.delete_partition)
                out.append((tp, ErrorCode.NONE))
        return ErrorCode.NONE, out

    # ------------------------------------------------------------------ topics
    async def write_topic(self, assignment: TopicAssignment, configs: dict[str, str]) -> ErrorCode:
        try:
            await self.zk_call(self.zk.create_topic, assignment, configs)
        except TopicExists:
            return ErrorCode.TOPIC_ALREADY_EXISTS
        log.info("topic_created", topic=assignment.name, partitions=len(assignment.partitions))
        return ErrorCode.NONE

    async def wait_for_leaders(self, counts: dict[str, int], timeout_ms: int) -> set[str]:
        """Wait (as Kafka's DelayedCreatePartitions) until each topic's first ``count`` partitions have
        leaders; returns the topics that still lack some at the timeout."""
        deadline = self.loop.time() + max(timeout_ms, 0) / 1000
        missing = {name for name, count in counts.items() if not self.cache.has_leaders(name, count)}
        while missing:
            remaining = deadline - self.loop.time()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(self.cache.changed.wait(), remaining)
            except asyncio.TimeoutError:
                break
            missing = {name for name in missing if not self.cache.has_leaders(name, counts[name])}
        return missing

    # ------------------------------------------------------------------ ISR changes
    def _expand_isr(self, partition, replica_id: int) -> None:
        self.isr_proposals.propose(partition, partition.isr + [replica_id])

    async def _shrink_isr_periodically(self) -> None:
        max_lag = self.config["replica.lag.time.max.ms"]
        rm = self.broker.replica_manager
        while True:
            await sleep_to_beat(max_lag / 2000)
            now, me = rm.now_ms(), self.broker_id
            for partition in list(rm.partitions.values()):
                if partition.leader_id == me and len(partition.isr) > 1:
                    lagging = partition.out_of_sync(now, max_lag)
                    if lagging:
                        log.info("isr_shrinking", topic=partition.topic, partition=partition.index,
                                 out_of_sync=lagging)
                        self.isr_proposals.propose(partition, [r for r in partition.isr if r not in lagging])

    async def controller_request(self, api_key: int, version: int, body: dict):
        address = self.cache.endpoint(self.cache.controller_id, self.config.inter_broker_listener)
        if address is None:
            raise ConnectionClosed("no controller known")
        conn = self._controller_conn
        if conn is None or conn.closed or (conn.stream.get_extra_info("peername") or ())[:2] != address:
            if conn is not None:
                await conn.close()
            # (negotiated: a Kafka 2.8 controller reads AlterPartition, its AlterIsr, at v0 only)
            conn = self._controller_conn = await KafkaConnection.open(
                *address, client_id=f"broker-{self.broker_id}", negotiate=True, **self.broker.inter_broker_connect)
        return await conn.request(api_key, conn.usable(api_key, version), body, timeout=30)

    # ------------------------------------------------------------------ shutdown
    async def controlled_shutdown(self) -> None:
        """Ask the controller to move our leaderships; retried per ``controlled.shutdown.*``. From here on this
        broker follows no partition it is made a follower of (``shutting_down``)."""
        self.shutting_down = True
        if not self.config["controlled.shutdown.enable"]:
            return
        log.info("controlled_shutdown_started", broker_id=self.broker_id)
        for attempt in range(self.config["controlled.shutdown.max.retries"]):
            try:
                if self.controller is not None and self.controller.active:
                    error, remaining = await self.controller.enqueue("controlled_shutdown", self.broker_id,
                                                                     self.broker_epoch)
                else:
                    response = await self.controller_request(CONTROLLED_SHUTDOWN, 3, {
                        "broker_id": self.broker_id, "broker_epoch": self.broker_epoch})
                    error, remaining = ErrorCode(response.error_code), response.remaining_partitions
                if error == ErrorCode.NONE:
                    log.info("controlled_shutdown_succeeded", remaining=len(remaining))
                    await self._wait_leaderships_moved(5.0)
                    if self.controller is not None and self.controller.active and \
                            not await self.controller.channel.flushed(5.0):
                        log.warning("controlled_shutdown_metadata_not_acknowledged")
                    return
                log.warning("controlled_shutdown_failed", error=error.name, attempt=attempt)
            except Exception as exc:
                log.warning("controlled_shutdown_failed", error=str(exc), attempt=attempt)
            await asyncio.sleep(self.config["controlled.shutdown.retry.backoff.ms"] / 1000)

    async def _wait_leaderships_moved(self, timeout_s: float) -> None:
        """The controller answers before its LeaderAndIsr reach us: wait until we lead nothing movable."""
        rm = self.broker.replica_manager
        deadline = self.loop.time() + timeout_s
        while any(p.is_leader and len(p.replicas) > 1 and len(p.isr) > 1 for p in rm.partitions.values()):
            remaining = deadline - self.loop.time()
            if remaining <= 0:
                return
            self._leadership_applied.clear()
            try:
                await asyncio.wait_for(self._leadership_applied.wait(), remaining)
            except asyncio.TimeoutError:
                return

    async def stop(self) -> None:
        self.stopping = True
        if self._clock is not None:
            self._clock.close()
        for task in list(self._tasks):
            await cancel_and_wait(task, timeout=2)
        await self.fetchers.shutdown()
        if self.controller is not None:
            await self.controller.close()
        if self._controller_conn is not None:
            await self._controller_conn.close()
        await self.zk_call(self.zk.stop)


def _live(leader, listener: str):
    from kbroker.broker.cluster.metadata_cache import LiveBroker

    return LiveBroker(leader.broker_id, {listener: (leader.host_name, leader.port)})
