"""The broker process: components, listeners, periodic maintenance and graceful shutdown.

Start-up: load every partition log (recovering after an unclean stop), make
this broker the leader of every partition it hosts, then listen. SIGTERM:
stop accepting, let in-flight requests finish, flush logs and checkpoints.
"""

from __future__ import annotations

import asyncio
import functools
import time

import structlog

from kbroker.broker.configuration.config import BrokerConfig
from kbroker.broker.network.connection import accept
from kbroker.broker.network.connection_limits import ConnectionLimits
from kbroker.broker.configuration.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from kbroker.broker.partitions.fetch_sessions import FetchSessionCache
from kbroker.broker.metrics.client_telemetry import ClientTelemetry
from kbroker.broker.metrics.counters import BrokerCounters
from kbroker.broker.configuration.quotas import QuotaManager
from kbroker.broker.security.authorizer import Authorizer
from kbroker.broker.security.credentials import ScramCredentialCache
from kbroker.broker.security.delegation_tokens import DelegationTokenCache, TokenInfo
from kbroker.broker.security.listeners import inter_broker_sasl, inter_broker_tls, listener_security
from kbroker.broker.network.heap import CHECK_MS, HeapTrimmer
from kbroker.broker.network.log_regions import SendMemory
from kbroker.protocol.framing import FrameStream
from kbroker.storage.open_files import OPEN_FILES, capacity_for_limit
from kbroker.protocol.receive_budget import ReceiveBudget
from kbroker.broker.metadata import LocalMetadataStore, new_cluster_id
from kbroker.broker.transactions.producer_ids import ProducerIdManager
from kbroker.broker.partitions.replica_manager import ReplicaManager
from kbroker.broker.partitions.log_dir_failure import handle_log_dir_failure
from kbroker.broker.replication.alter_log_dirs import ReplicaAlterLogDirs
from kbroker.broker.replication.quota import leader_quota
from kbroker.broker.admin.operations import AdminOperations
from kbroker.broker.handlers.metadata_topics import TopicAnswers
from kbroker.client.tasks import sleep_to_beat
from kbroker.broker.coordination.hosting import CoordinatorHosting
from kbroker.broker.coordination.shards import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC
from kbroker.broker.shares.manager import SharePartitionManager
from kbroker.coordinators.share.coordinator import ShareCoordinator
from kbroker.broker.transactions.inter_broker import InterBrokerChannel
from kbroker.broker.partitions.topic_ids import TopicIds
from kbroker.coordinators.group.coordinator import GroupConfig, GroupCoordinator
from kbroker.coordinators.internal_topic import InternalTopicStore
from kbroker.coordinators.scheduler import LoopScheduler
from kbroker.coordinators.transaction.coordinator import TransactionConfig, TransactionCoordinator
from kbroker.storage import meta_properties
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager

log = structlog.get_logger("broker.server")

class Broker:
    """The hub every handler reaches through ``ctx.broker``: the components of one broker, its listeners and
    its lifecycle. What admin requests change lives in ``admin`` (broker/admin/), the coordinators' internal
    topics and shard loading in ``coordination`` (broker/coordination/)."""

    def __init__(self, config: BrokerConfig, clock=time.time) -> None:
        self.config = config
        self.listener_security = listener_security(config)   # (bad TLS settings stop the start here)
        # KafkaConnection.open's security arguments for reaching other brokers' inter-broker listener
        self.inter_broker_connect = {"ssl": inter_broker_tls(config), "sasl": inter_broker_sasl(config)}
        self.clock = clock
        self.broker_id = config.broker_id
        # (refused here if a log dir is another broker's; a cluster's id is ZooKeeper's: ClusterMember.start)
        stored_cluster_id = meta_properties.stored_cluster_id(config.log_dirs, self.broker_id)
        cluster_id = config["cluster.id"] or stored_cluster_id
        if not config["zookeeper.connect"]:
            cluster_id = cluster_id or new_cluster_id()
            meta_properties.verify_cluster(config.log_dirs, self.broker_id, cluster_id)
            meta_properties.write(config.log_dirs, self.broker_id, cluster_id)
        self.metadata = LocalMetadataStore(config.log_dirs[0], self.broker_id, cluster_id)
        self.dynamic = DynamicBrokerConfig(self)
        if not config["zookeeper.connect"]:   # (a cluster's come from ZooKeeper: ClusterMember.start)
            self.dynamic.load(self.metadata.broker_configs.get(DEFAULT_ENTITY, {}),
                              self.metadata.broker_configs.get(str(self.broker_id), {}))
        self.default_log_config = config.log_config()
        self.credentials = ScramCredentialCache()
        self.tokens = DelegationTokenCache(config["delegation.token.secret.key"])
        if not config["zookeeper.connect"]:   # a cluster's come from ZooKeeper only (ClusterMember.start)
            for user, texts in self.metadata.users.items():
                self.credentials.replace(user, texts)
            for token_id, text in self.metadata.tokens.items():
                self.tokens.replace(token_id, TokenInfo.from_json(text.encode()))
        # ACLs: None (everything allowed, as Kafka without authorizer.class.name) or the one authorizer
        self.authorizer = Authorizer(config["super.users"], config["allow.everyone.if.no.acl.found"]) \
            if config["authorizer.class.name"] else None
        if self.authorizer is not None and not config["zookeeper.connect"]:
            self.authorizer.load(self.metadata.acls)   # (a cluster's come from ZooKeeper: ClusterMember.start)
        self.metrics = BrokerCounters()
        self.client_telemetry = ClientTelemetry(self)
        self.topic_ids = TopicIds(self)
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        self.topic_answers = TopicAnswers()   # Metadata answers' topic entries, kept encoded
        self.metrics_server = None   # a MetricsServer once started with metrics.port
        self.quotas = QuotaManager(config["quota.window.num"], config["quota.window.size.seconds"],
                                   config["controller.quota.window.num"] * config["controller.quota.window.size.seconds"])
        if not config["zookeeper.connect"]:   # (a cluster's come from ZooKeeper: ClusterMember.start)
            for entity, values in self.metadata.quotas.items():
                self.quotas.replace(entity, values)
        self.log_manager = LogManager(config.log_dirs, clock=clock)
        self.replica_manager = ReplicaManager(self.broker_id, self.log_manager, clock)
        self.replica_manager.on_log_dir_failure = lambda d, lost: handle_log_dir_failure(self, d, lost)
        self.alter_log_dirs = ReplicaAlterLogDirs(self.replica_manager, config)
        self.replica_manager.on_hosted = self.alter_log_dirs.resume   # moves a stop cut short go on
        self.replica_manager.leader_quota = leader_quota(self.broker_id, config)
        self.halted = False   # stopped because every log dir failed
        self._stopping = False
        self.producer_ids = ProducerIdManager(config.log_dirs[0])
        self.cluster = None   # a ClusterMember once started with zookeeper.connect
        self.offsets_store = InternalTopicStore(self.replica_manager, OFFSETS_TOPIC, clock,
                                                config["offsets.topic.compression.codec"])
        self.group_coordinator = GroupCoordinator(GroupConfig.from_broker(config), LoopScheduler(clock),
                                                  self.offsets_store.append, lambda: self.metadata.topics,
                                                  self.partition_racks,
                                                  lambda group_id: self.metadata.group_configs.get(group_id, {}),
                                                  lambda *asked: self.shares.state_initializer.start(*asked))
        self.inter_broker = InterBrokerChannel(self)
        self.share_state_store = InternalTopicStore(self.replica_manager, SHARE_STATE_TOPIC, clock)
        self.share_coordinator = ShareCoordinator(config["share.coordinator.state.topic.num.partitions"],
                                                  self.share_state_store.append)
        self.shares = SharePartitionManager(self)        # share partitions of the partitions led here
        self.txn_store = InternalTopicStore(self.replica_manager, TXN_TOPIC, clock)
        self.txn_coordinator = TransactionCoordinator(TransactionConfig.from_broker(config), LoopScheduler(clock),
                                                      self.txn_store.append, lambda: self.producer_ids.generate(),
                                                      self.inter_broker.write_markers,
                                                      self.inter_broker.write_markers_now,
                                                      lambda partition: self.replica_manager.replicated_or_wait(
                                                          TXN_TOPIC, partition, config["request.timeout.ms"]))
        self.connections: set = set()
        self.connection_limits = ConnectionLimits(config)
        self.quotas.on_ip_rates.append(self.connection_limits.set_ip_rates)   # (taken at start: start())
        self.receive_budget: ReceiveBudget | None = None   # queued.max.request.bytes, made with the listeners
        self.send_memory = SendMemory(config["kbroker.fetch.send.memory.bytes"])
        self.servers: list[asyncio.AbstractServer] = []
        self.endpoints: list[tuple[str, str, int]] = []   # advertised (listener, host, port)
        self.bound: list[tuple[str, int]] = []              # where the listeners actually listen
        self._tasks: list[asyncio.Task] = []
        self._stopped = asyncio.Event()
        self.admin = AdminOperations(self)               # what admin requests change
        self.coordination = CoordinatorHosting(self)     # internal topics and coordinator shards

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id

    def topic_config(self, topic: str) -> LogConfig:
        meta = self.metadata.topics.get(topic)
        return self.default_log_config.with_overrides(meta.configs if meta else {})

    def on_controller_seen(self, controller_id: int) -> None:
        log.debug("controller_seen", controller_id=controller_id)

    def partition_racks(self, topic: str, index: int) -> frozenset[str]:
        """The racks (``broker.rack``) of the partition's replicas: where a rack-aware assignor sends a member."""
        if self.cluster is None:
            rack = self.config["broker.rack"]
            return frozenset([rack]) if rack else frozenset()
        info = self.partition_info(topic, index)
        brokers = self.cluster.cache.brokers
        return frozenset(brokers[r].rack for r in (info[2] if info else []) if r in brokers and brokers[r].rack)

    def live_brokers(self, listener: str = "") -> list[tuple[int, str, int, str | None]]:
        """(id, host, port, rack) of every live broker as advertised on ``listener`` (the one a request came
        in on; default the first), as Kafka answers each listener with its own endpoints. A broker without
        that listener is left out."""
        listener = listener or self.endpoints[0][0]
        if self.cluster is None:
            _, host, port = next((e for e in self.endpoints if e[0] == listener), self.endpoints[0])
            return [(self.broker_id, host, port, None)]
        out = []
        for b in sorted(self.cluster.cache.brokers.values(), key=lambda b: b.broker_id):
            if listener in b.endpoints:
                out.append((b.broker_id, *b.endpoints[listener], b.rack))
        return out

    @property
    def controller_id(self) -> int:
        return self.broker_id if self.cluster is None else self.cluster.cache.controller_id

    def partition_info(self, topic: str, index: int):
        """(leader, leader_epoch, replicas, isr, offline) as clients see it, or None."""
        if self.cluster is not None:
            info = self.cluster.cache.partition(topic, index)
            return None if info is None else (info.leader, info.leader_epoch, info.replicas, info.isr,
                                               info.offline)
        p = self.replica_manager.get(topic, index)
        if p is None and self.log_manager.dir_of_offline((topic, index)) is not None:
            return -1, -1, [self.broker_id], [], [self.broker_id]   # its log dir failed: offline
        return None if p is None else (p.leader_id, p.leader_epoch, list(p.replicas), list(p.isr), [])

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        started = time.monotonic()
        self._size_open_files()
        self.connection_limits.set_ip_rates(self.quotas.ip_rates())   # (a cluster's come with ZooKeeper's, later)
        self.log_manager.load_all(self.topic_config)
        if len(self.log_manager.logs) > OPEN_FILES.capacity:
            log.warning("partitions_beyond_open_files", partitions=len(self.log_manager.logs),
                        open_files_max=OPEN_FILES.capacity,
                        note="log files are opened on demand and closed least recently used first; raise the "
                             "descriptor limit (ulimit -n) to keep more of them open")
        if self.config["zookeeper.connect"]:
            await self._start_listeners()
            await self._start_metrics()
            await self._start_cluster()
            self._start_periodic_tasks()
            log.info("broker_started", broker_id=self.broker_id, endpoints=self.endpoints, cluster=True,
                     seconds=round(time.monotonic() - started, 3))
            return
        for name, topic in self.metadata.topics.items():
            config = self.topic_config(name)
            for index in range(topic.partitions):
                self.replica_manager.make_leader(name, index, config, is_new=False)
        for (topic, index) in list(self.log_manager.logs):
            if topic not in self.metadata.topics:  # deleted while we were down
                self.log_manager.delete(topic, index)
        self.coordination.load_group_coordinator()
        self.coordination.load_share_coordinator()
        await self._start_listeners()
        await self._start_metrics()
        self._start_periodic_tasks()
        # After the listeners: finishing a prepared transaction sends its markers to this broker's listener.
        self.coordination.load_transaction_coordinator()
        log.info("broker_started", broker_id=self.broker_id, endpoints=self.endpoints,
                 partitions=len(self.replica_manager.partitions), seconds=round(time.monotonic() - started, 3))

    def _size_open_files(self) -> None:
        """The cache of open log files gets half the process's descriptors (or kbroker.log.open.files.max)."""
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = self.config["kbroker.log.open.files.max"]
        OPEN_FILES.capacity = wanted if wanted > 0 else capacity_for_limit(soft)
        log.info("log_files_cache", open_files_max=OPEN_FILES.capacity, descriptor_limit=soft, hard_limit=hard)

    async def _start_cluster(self) -> None:
        """ZooKeeper mode: register, join the controller election; the controller assigns our replicas."""
        from kbroker.broker.cluster.member import ClusterMember
        from kbroker.broker.cluster.zk_store import ZkProducerIdManager

        self.cluster = ClusterMember(self)
        self.metadata = self.cluster.topics
        await self.cluster.start()
        self.producer_ids = ZkProducerIdManager(self.cluster.zk, self.broker_id)
        await self.producer_ids.start()

    async def _start_listeners(self) -> None:
        # One budget for the requests every client listener is receiving; a separate inter-broker listener has
        # none, so that replication and markers never wait behind clients' requests.
        self.receive_budget = ReceiveBudget(self.config["queued.max.request.bytes"])
        separate = len(self.config.listeners) > 1
        for name, host, port in self.config.listeners:
            budget = None if separate and name == self.config.inter_broker_listener else self.receive_budget
            server = await asyncio.get_running_loop().create_server(
                lambda n=name, b=budget: FrameStream(self.config["socket.request.max.bytes"],
                                                     on_connect=lambda stream, n=n: accept(self, stream, n),
                                                     budget=b),
                host or None, port, reuse_address=True, ssl=self.listener_security[name].tls,
                backlog=self.config["socket.listen.backlog.size"],
                # a peer that stops reading never answers our close_notify: give up on it well within shutdown
                **({"ssl_shutdown_timeout": 5} if self.listener_security[name].tls else {}))
            self.servers.append(server)
            self.bound.append(server.sockets[0].getsockname()[:2])
        self.advertise()

    def advertise(self) -> None:
        """What clients are told to connect to, per listener: its ``advertised.listeners`` entry (matched by
        name, as Kafka does) or else where it listens; a port of 0 or an empty host fall back to the bound ones.
        Called at start and when advertised.listeners changes dynamically (a cluster re-registers then)."""
        advertised = {name: (host, port) for name, host, port in self.config.advertised_listeners}
        endpoints = []
        for (name, host, port), (_, bound_port) in zip(self.config.listeners, self.bound):
            adv_host, adv_port = advertised.get(name, (host, port))
            endpoints.append((name, adv_host or host or "127.0.0.1", adv_port or bound_port))
        changed = self.endpoints and endpoints != self.endpoints
        self.endpoints = endpoints
        if changed and self.cluster is not None:
            self.cluster.spawn(self.cluster.update_registration())

    async def _start_metrics(self) -> None:
        if self.config["metrics.port"] < 0:
            return
        from kbroker.broker.metrics.http import MetricsServer

        self.metrics_server = MetricsServer(self)
        await self.metrics_server.start(self.config["metrics.host"], self.config["metrics.port"])

    def _start_periodic_tasks(self) -> None:
        self._tasks = [
            asyncio.create_task(self._every(self.config["log.retention.check.interval.ms"], functools.partial(
                self.log_manager.cleanup, self.replica_manager.log_start_moved))),
            asyncio.create_task(self._every(min(self.config.flush_ms, 1000), self.log_manager.flush_by_time)),
            asyncio.create_task(self._every(self.config["log.flush.offset.checkpoint.interval.ms"],
                                            self.log_manager.checkpoint)),
            asyncio.create_task(self._every(self.config["offsets.retention.check.interval.ms"],
                                            self.group_coordinator.expire_offsets)),
        ]
        self._tasks += [
            asyncio.create_task(self._every(
                self.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                self.txn_coordinator.abort_timed_out)),
            asyncio.create_task(self._every(
                self.config["transaction.remove.expired.transaction.cleanup.interval.ms"],
                self.txn_coordinator.expire_transactional_ids)),
        ]
        if self.tokens.enabled:
            self._tasks.append(asyncio.create_task(self._every(
                self.config["delegation.token.expiry.check.interval.ms"], self.admin.expire_tokens)))
        self._tasks.append(asyncio.create_task(self._every(
            self.config["producer.id.expiration.check.interval.ms"],
            lambda: self.log_manager.expire_producers(self.config["producer.id.expiration.ms"]))))
        idle_ms = self.connection_limits.idle_ms
        if idle_ms > 0:
            self._tasks.append(asyncio.create_task(self._every(max(100, min(idle_ms // 4, 30000)),
                                                               self._close_idle_connections)))
        if self.receive_budget is not None:
            self._tasks.append(asyncio.create_task(self._every(CHECK_MS, HeapTrimmer(self.receive_budget))))
        if self.config["log.cleaner.enable"]:
            self._tasks.append(asyncio.create_task(self._every(lambda: self.config["log.cleaner.backoff.ms"],
                                                               self.log_manager.clean_in_slices)))

    def _close_idle_connections(self) -> None:
        now, limit = time.monotonic(), self.connection_limits.idle_ms / 1000
        for conn in list(self.connections):
            idle = conn.idle_for(now)
            if idle > limit:
                conn.log.info("connection_idle_closed", idle_ms=int(idle * 1000))
                conn.stream.close()

    @property
    def port(self) -> int:
        """The port the first listener is bound to (not necessarily the advertised one)."""
        return self.bound[0][1]

    async def _every(self, interval_ms, action) -> None:
        """Run ``action`` every ``interval_ms`` (a number, or a callable read before each wait: a dynamic
        config), on the beats of the event loop's clock (``sleep_to_beat``: the broker's periodic tasks wake
        together where their periods meet)."""
        while True:
            await sleep_to_beat((interval_ms() if callable(interval_ms) else interval_ms) / 1000)
            try:
                if asyncio.iscoroutine(done := action()):
                    await done
            except Exception:
                log.exception("periodic_task_failed", task=getattr(action, "__name__", str(action)))

    async def stop(self) -> None:
        """Stop accepting, finish in-flight requests, flush logs and checkpoints."""
        if self._stopping:
            return await self.wait_stopped()
        self._stopping = True
        if self.cluster is not None:
            await self.cluster.controlled_shutdown()   # leaderships move while we still serve
        for server in self.servers:
            server.close()
        for task in self._tasks:
            task.cancel()
        self.coordination.shards.shutdown()
        await self.alter_log_dirs.close()
        self.replica_manager.shutdown()   # parked requests answer now
        self.group_coordinator.shutdown()  # parked joins and syncs answer NOT_COORDINATOR
        self.txn_coordinator.shutdown()    # unfinished marker writes resume from the log at the next start
        await self.inter_broker.close()
        tasks = [conn.task for conn in list(self.connections)]
        for conn in list(self.connections):
            conn.stop_reading()   # no new requests; the ones read are answered first
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        for conn in list(self.connections):
            conn.stream.abort()   # its answers did not leave within the wait; the servers close only after it
        self.connection_limits.close_held()
        for security in self.listener_security.values():
            security.close()   # (an OAUTHBEARER key set's refresh thread)
        for server in self.servers:
            # uvloop waits here for every transport the server made; one closed gracefully whose peer never
            # reads keeps flushing forever, so the wait is bounded (the process exits and the kernel closes it)
            try:
                await asyncio.wait_for(server.wait_closed(), 5)
            except asyncio.TimeoutError:
                log.warning("listener_close_timed_out", connections=len(self.connections))
        if self.cluster is not None:
            await self.cluster.stop()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        self.log_manager.shutdown()
        if self.cluster is None:
            try:
                self.metadata.close()   # (the journal folded into the snapshot: the next start replays nothing)
            except OSError as exc:      # (a full disk: the journal stays, and the next start replays it)
                log.warning("metadata_snapshot_failed", error=str(exc))
        log.info("broker_stopped", broker_id=self.broker_id)
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
