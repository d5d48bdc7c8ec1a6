"""The broker process: components, listeners, periodic maintenance and graceful shutdown.

Start-up: load every partition log (recovering after an unclean stop), make
this broker the leader of every partition it hosts, then listen. SIGTERM:
stop accepting, let in-flight requests finish, flush logs and checkpoints.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from kbroker.broker.configuration.config import BrokerConfig
from kbroker.broker.network.connection import accept
from kbroker.broker.network.connection_limits import ConnectionLimits
from kbroker.broker.configuration.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from kbroker.broker.partitions.fetch_sessions import FetchSessionCache
from kbroker.broker.metrics.counters import BrokerCounters
from kbroker.broker.configuration.quotas import QuotaManager
from kbroker.broker.security.authorizer import Authorizer
from kbroker.broker.security.credentials import ScramCredentialCache
from kbroker.broker.security.listeners import inter_broker_sasl, inter_broker_tls, listener_security
from kbroker.broker.network.heap import CHECK_MS, HeapTrimmer
from kbroker.broker.network.log_regions import SendMemory
from kbroker.protocol.framing import FrameStream
from kbroker.storage.open_files import OPEN_FILES, capacity_for_limit
from kbroker.protocol.receive_budget import ReceiveBudget
from kbroker.broker.metadata import LocalMetadataStore, TopicMetadata, TopicNotCreated
from kbroker.broker.transactions.producer_ids import ProducerIdManager
from kbroker.broker.partitions.replica_manager import ReplicaManager
from kbroker.broker.partitions.log_dir_failure import handle_log_dir_failure
from kbroker.broker.replication.alter_log_dirs import ReplicaAlterLogDirs
from kbroker.broker.replication.quota import leader_quota
from kbroker.broker.coordinator_shards import CoordinatorShards, replay
from kbroker.broker.transactions.inter_broker import InterBrokerChannel
from kbroker.broker.partitions.topic_ids import TopicIds
from kbroker.coordinators.group.coordinator import GroupConfig, GroupCoordinator
from kbroker.coordinators.internal_topic import InternalTopicStore
from kbroker.coordinators.scheduler import LoopScheduler
from kbroker.coordinators.transaction.coordinator import TransactionConfig, TransactionCoordinator
from kbroker.protocol.errors import ErrorCode
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager

log = structlog.get_logger("broker.server")

OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"


async def _persisted(write) -> None:
    """A metadata store's write: the ZooKeeper store's is a coroutine to await, the local store's is done (and
    on disk) when the call returns."""
    if asyncio.iscoroutine(write):
        await write


class Broker:
    def __init__(self, config: BrokerConfig, clock=time.time) -> None:
        self.config = config
        self.listener_security = listener_security(config)   # (bad TLS settings stop the start here)
        # KafkaConnection.open's security arguments for reaching other brokers' inter-broker listener
        self.inter_broker_connect = {"ssl": inter_broker_tls(config), "sasl": inter_broker_sasl(config)}
        self.clock = clock
        self.broker_id = config.broker_id
        self.metadata = LocalMetadataStore(config.log_dirs[0], self.broker_id, config["cluster.id"])
        self.dynamic = DynamicBrokerConfig(self)
        if not config["zookeeper.connect"]:   # (a cluster's come from ZooKeeper: ClusterMember.start)
            self.dynamic.load(self.metadata.broker_configs.get(DEFAULT_ENTITY, {}),
                              self.metadata.broker_configs.get(str(self.broker_id), {}))
        self.default_log_config = config.log_config()
        self.credentials = ScramCredentialCache()
        if not config["zookeeper.connect"]:   # a cluster's come from ZooKeeper only (ClusterMember.start)
            for user, texts in self.metadata.users.items():
                self.credentials.replace(user, texts)
        # ACLs: None (everything allowed, as Kafka without authorizer.class.name) or the one authorizer
        self.authorizer = Authorizer(config["super.users"], config["allow.everyone.if.no.acl.found"]) \
            if config["authorizer.class.name"] else None
        if self.authorizer is not None and not config["zookeeper.connect"]:
            self.authorizer.load(self.metadata.acls)   # (a cluster's come from ZooKeeper: ClusterMember.start)
        self.metrics = BrokerCounters()
        self.topic_ids = TopicIds(self)
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        self.metrics_server = None   # a MetricsServer once started with metrics.port
        self.quotas = QuotaManager(config["quota.window.num"], config["quota.window.size.seconds"])
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
        self.shards = CoordinatorShards(self)   # cluster mode: the internal partitions coordinated here
        self.offsets_store = InternalTopicStore(self.replica_manager, OFFSETS_TOPIC, clock)
        self.group_coordinator = GroupCoordinator(GroupConfig.from_broker(config), LoopScheduler(clock),
                                                  self.offsets_store.append)
        self.inter_broker = InterBrokerChannel(self)
        self.txn_store = InternalTopicStore(self.replica_manager, TXN_TOPIC, clock)
        self.txn_coordinator = TransactionCoordinator(TransactionConfig.from_broker(config), LoopScheduler(clock),
                                                      self.txn_store.append, lambda: self.producer_ids.generate(),
                                                      self.inter_broker.write_markers,
                                                      self.inter_broker.write_markers_now,
                                                      lambda partition: self.replica_manager.replicated_or_wait(
                                                          TXN_TOPIC, partition, config["request.timeout.ms"]))
        self.connections: set = set()
        self.connection_limits = ConnectionLimits(config)
        self.receive_budget: ReceiveBudget | None = None   # queued.max.request.bytes, made with the listeners
        self.send_memory = SendMemory(config["kbroker.fetch.send.memory.bytes"])
        self.servers: list[asyncio.AbstractServer] = []
        self.endpoints: list[tuple[str, str, int]] = []   # advertised (listener, host, port)
        self.bound: list[tuple[str, int]] = []              # where the listeners actually listen
        self._tasks: list[asyncio.Task] = []
        self._stopped = asyncio.Event()
        self._internal_creating: set[str] = set()

    @property
    def cluster_id(self) -> str:
        return self.metadata.cluster_id

    def topic_config(self, topic: str) -> LogConfig:
        meta = self.metadata.topics.get(topic)
        return self.default_log_config.with_overrides(meta.configs if meta else {})

    # ------------------------------------------------------------------ topics
    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                     assignment: list[list[int]] | None = None) -> TopicMetadata:
        """``assignment``: replicas per partition as the client asked; only a cluster has a choice of them."""
        if self.cluster is not None:
            # The controller makes the leaders and tells every replica.
            return self.metadata.create_topic(name, partitions, replication_factor, configs, assignment)
        try:
            topic = self.metadata.create_topic(name, partitions, replication_factor, configs)
        except OSError as exc:   # its metadata could not be saved (out of descriptors, a full disk)
            self.metadata.topics.pop(name, None)
            raise TopicNotCreated(f"{name} could not be created: {exc}") from None
        config = self.topic_config(name)
        made = [self.replica_manager.make_leader(name, index, config) for index in range(partitions)]
        if any(p is None for p in made):
            # A log could not be made (a failed dir, or no descriptor to be had even after the cache of open
            # files gave its own back): the topic is not created, and the client is told.
            self.replica_manager.remove_topic(name)
            self.metadata.delete_topic(name)
            raise TopicNotCreated(f"the logs of {name} could not be created (see the broker's log)")
        log.info("topic_created", topic=name, partitions=partitions, configs=configs)
        return topic

    def delete_topic(self, name: str) -> None:
        self.metadata.delete_topic(name)
        if self.cluster is not None:
            return   # StopReplica from the controller removes the replicas everywhere
        self.replica_manager.remove_topic(name)
        if name != OFFSETS_TOPIC and OFFSETS_TOPIC in self.metadata.topics:
            self.group_coordinator.remove_topic_offsets(name)
        log.info("topic_deleted", topic=name)

    def add_partitions(self, name: str, count: int, assignment: list[list[int]] | None = None) -> None:
        if self.cluster is not None:
            self.metadata.set_partitions(name, count, assignment)
            return
        config = self.topic_config(name)
        for index in range(self.metadata.topics[name].partitions, count):
            self.replica_manager.make_leader(name, index, config)
        self.metadata.set_partitions(name, count)

    def reconfigure_logs(self, unclean_enabled: bool = False) -> None:
        """The broker defaults of topic configs changed (dynamic broker configs): every log takes its topic's
        config anew; turning unclean election on lets the controller elect where no ISR member is left."""
        self.default_log_config = self.config.log_config()
        configs: dict[str, LogConfig] = {}   # one per topic, shared by its partitions as at creation
        for (topic, _), lg in list(self.log_manager.logs.items()):
            if topic not in configs:
                configs[topic] = self.topic_config(topic)
            lg.config = configs[topic]
        controller = self.cluster.controller if self.cluster is not None else None
        if unclean_enabled and controller is not None and controller.active:
            for name in list(self.metadata.topics):
                controller.enqueue("unclean_enabled", name)

    async def set_broker_configs(self, per_broker: bool, texts: dict[str, str]) -> None:
        """This broker's (``per_broker``) or the cluster-wide dynamic configs are now ``texts``, persisted before
        this returns and applied here at once; in a cluster every broker applies them from ZooKeeper's
        notification."""
        entity = self.dynamic.entity(per_broker)
        await _persisted(self.metadata.set_broker_configs(entity, texts))
        self.dynamic.replace(**{"own" if per_broker else "default": texts})

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.metadata.set_configs(name, configs)
        self.replica_manager.update_config(name, self.topic_config(name))

    async def set_scram_credentials(self, user: str, texts: dict[str, str]) -> None:
        """The user's SCRAM credentials are now ``texts`` (mechanism -> Kafka's credential text), persisted
        before this returns; in a cluster every broker applies them from ZooKeeper's notification."""
        await _persisted(self.metadata.set_user_credentials(user, texts))
        self.credentials.replace(user, texts)

    async def set_quotas(self, entity: tuple, values: dict[str, float]) -> None:
        """The (user, client id) entity's quotas are now ``values``, persisted before this returns; in a cluster
        every broker applies them from ZooKeeper's notification."""
        await _persisted(self.metadata.set_quotas(entity, values))
        self.quotas.replace(entity, values)

    async def change_acls(self, resource: tuple[int, int, str], add: set, remove: set) -> None:
        """Add and remove ACLs of one resource pattern, persisted before this returns and applied here at once;
        in a cluster every other broker applies them from ZooKeeper's notification."""
        if self.cluster is not None:
            await self.cluster.acls.change(resource, add, remove)
            return
        current = self.authorizer.of_resource(*resource)
        wanted = (current | add) - remove
        if wanted != current:
            self.metadata.set_acls([a for a in self.metadata.acls if a.resource != resource] + list(wanted))
            self.authorizer.replace(*resource, wanted)

    # ------------------------------------------------------------------ internal topics
    def _ensure_internal_topic(self, name: str, partitions: int, replication: int,
                               configs: dict[str, str]) -> ErrorCode:
        """Create an internal topic on first use, as Kafka does on the first FindCoordinator of its kind.

        With fewer live brokers than its replication factor (one here), Kafka
        answers COORDINATOR_NOT_AVAILABLE and creates nothing.
        """
        if name in self.metadata.topics:
            return ErrorCode.NONE
        if self.cluster is not None:
            live = len(self.cluster.cache.brokers)
            if replication > live:
                log.warning("internal_topic_replication_unsatisfiable", topic=name, replication_factor=replication,
                            brokers=live)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            if name not in self._internal_creating:
                self._internal_creating.add(name)
                self.create_topic(name, partitions, replication, {"cleanup.policy": "compact", **configs})
            return ErrorCode.COORDINATOR_NOT_AVAILABLE   # until the controller has made its leaders
        if replication > 1:   # one live broker
            log.warning("internal_topic_replication_unsatisfiable", topic=name, replication_factor=replication,
                        brokers=1)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        self.create_topic(name, partitions, replication, {"cleanup.policy": "compact", **configs})
        return ErrorCode.NONE

    def ensure_offsets_topic(self) -> ErrorCode:
        """``__consumer_offsets``, from the ``offsets.topic.*`` settings."""
        return self._ensure_internal_topic(
            OFFSETS_TOPIC, self.config["offsets.topic.num.partitions"], self.config["offsets.topic.replication.factor"],
            {"segment.bytes": str(self.config["offsets.topic.segment.bytes"]), "compression.type": "producer"})

    def ensure_transaction_topic(self) -> ErrorCode:
        """``__transaction_state``, from the ``transaction.state.log.*`` settings."""
        return self._ensure_internal_topic(
            TXN_TOPIC, self.config["transaction.state.log.num.partitions"],
            self.config["transaction.state.log.replication.factor"],
            {"segment.bytes": str(self.config["transaction.state.log.segment.bytes"]),
             "min.insync.replicas": str(self.config["transaction.state.log.min.isr"])})

    def transaction_coordinator_error(self, transactional_id: str) -> ErrorCode:
        return self._coordinator_error(TXN_TOPIC, self.txn_coordinator.partition_for(transactional_id))

    def _load_transaction_coordinator(self) -> None:
        """Rebuild transactional ids from ``__transaction_state``; prepared transactions are then finished."""
        count = self._replay(TXN_TOPIC, self.txn_store, self.txn_coordinator.replay_stored)
        self.txn_coordinator.loaded()
        log.info("transaction_coordinator_loaded", records=count,
                 transactional_ids=len(self.txn_coordinator.transactions))

    def group_coordinator_error(self, group_id: str) -> ErrorCode:
        """NONE if this broker coordinates ``group_id``; else the error a client retries on."""
        return self._coordinator_error(OFFSETS_TOPIC, self.group_coordinator.partition_for(group_id))

    def _coordinator_error(self, topic: str, index: int) -> ErrorCode:
        if topic not in self.metadata.topics:   # (no shard of it is here: Kafka 4's answer, tests/reference)
            return ErrorCode.NOT_COORDINATOR
        if self.cluster is not None:
            return self.shards.error(topic, index)
        partition = self.replica_manager.get(topic, index)
        return ErrorCode.NONE if partition is not None and partition.is_leader else ErrorCode.NOT_COORDINATOR

    def _replay(self, topic: str, store: InternalTopicStore, apply) -> int:
        """Feed every record of a local internal topic to ``apply(partition, record)``; returns the count."""
        if topic not in self.metadata.topics:
            return 0
        return sum(list(replay(topic, store, index, apply))[-1]
                   for index in range(self.metadata.topics[topic].partitions))

    def _load_group_coordinator(self) -> None:
        """Rebuild groups and committed offsets by replaying every local ``__consumer_offsets`` partition."""
        started = time.monotonic()
        count = self._replay(OFFSETS_TOPIC, self.offsets_store, self.group_coordinator.replay_stored)
        self.group_coordinator.loaded()
        log.info("group_coordinator_loaded", records=count, groups=len(self.group_coordinator.groups),
                 seconds=round(time.monotonic() - started, 3))

    # ------------------------------------------------------------------ cluster callbacks
    def on_leadership_change(self, topic: str, index: int, is_leader: bool) -> None:
        """Cluster mode: coordinator shards load and unload with leadership of their internal partition."""
        self.shards.leadership_changed(topic, index, is_leader)

    def on_topic_deleted(self, name: str) -> None:
        if name != OFFSETS_TOPIC:
            self.group_coordinator.remove_topic_offsets(name)

    def on_controller_seen(self, controller_id: int) -> None:
        log.debug("controller_seen", controller_id=controller_id)

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
        self._load_group_coordinator()
        await self._start_listeners()
        await self._start_metrics()
        self._start_periodic_tasks()
        # After the listeners: finishing a prepared transaction sends its markers to this broker's listener.
        self._load_transaction_coordinator()
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
            asyncio.create_task(self._every(self.config["log.retention.check.interval.ms"],
                                            self.log_manager.cleanup)),
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
        config)."""
        while True:
            await asyncio.sleep((interval_ms() if callable(interval_ms) else interval_ms) / 1000)
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
        self.shards.shutdown()
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
        log.info("broker_stopped", broker_id=self.broker_id)
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
