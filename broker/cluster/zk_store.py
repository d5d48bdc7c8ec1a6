"""What a cluster broker keeps in ZooKeeper besides its membership: topics, their configs, SCRAM credentials,
producer ids.

``ZkTopicStore`` is the broker's ``metadata`` in a cluster. New topics and
new partitions are written to ``/brokers/topics/<topic>`` (the controller
watches it and makes the leaders); configs to ``/config/topics/<topic>`` with
a sequential ``/config/changes`` notification that every broker watches, so a
config change applies on every replica, as in Kafka.

``ZkProducerIdManager`` hands out producer ids from blocks claimed in
``/latest_producer_id_block`` by conditional update, so no two brokers ever
issue the same id. The next block is claimed in the background when the
current one is 90 % used: the event loop only waits on ZooKeeper if ids run
out faster than one round trip.
"""

from __future__ import annotations

import asyncio
import uuid

import structlog

from kbroker.broker.cluster.assignment import assign_replicas
from kbroker.broker.cluster.zk_client import KafkaZkClient, TopicAssignment
from kbroker.broker.configuration.dynamic_config import DEFAULT_ENTITY
from kbroker.broker.metadata import TopicMetadata, Topics
from kbroker.broker.configuration.quotas import QUOTA_KEYS
from kbroker.broker.security.delegation_tokens import TokenInfo

log = structlog.get_logger("broker.cluster.zk_store")


class ZkTopicStore:
    """Topics as the controller reported them; configs from ZooKeeper."""

    def __init__(self, member) -> None:
        self.member = member
        self.topics: dict[str, TopicMetadata] = Topics()
        self.group_configs: dict[str, dict[str, str]] = {}   # group id -> its configs, from /config/groups
        self.client_metrics: dict[str, dict[str, str]] = {}  # subscription -> configs, /config/client-metrics
        self.features: dict[str, int] = {}                     # feature -> level, from /feature
        self.features_epoch = 0
        self.cluster_id = ""
        self._changes_seen: set[str] = set()

    def _live_racks(self) -> dict[int, str | None]:
        return {b.broker_id: b.rack for b in self.member.cache.brokers.values()}

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                     assignment: list[list[int]] | None = None) -> TopicMetadata:
        """Write the assignment to ZooKeeper (in the background); the controller takes it from there.

        ``assignment``: replicas per partition as the client asked (CreateTopics' assignments), else spread.
        """
        replicas = dict(enumerate(assignment)) if assignment else \
            assign_replicas(self._live_racks(), partitions, replication_factor)
        topic = TopicAssignment(name, uuid.uuid4().bytes, replicas)
        self.member.spawn(self.member.write_topic(topic, configs))
        return TopicMetadata(name, topic.topic_id, partitions, replication_factor, dict(configs))

    def set_partitions(self, name: str, count: int, assignment: list[list[int]] | None = None) -> None:
        """CreatePartitions: extend the topic's assignment in ZooKeeper; the controller elects the new leaders."""
        self.member.spawn(self._add_partitions(name, count, assignment))

    async def _add_partitions(self, name: str, count: int, assignment: list[list[int]] | None) -> None:
        zk = self.member.zk
        current = await self.member.zk_call(zk.topic_assignment, name)
        if current is None:
            return
        first = len(current.partitions)
        if assignment:
            added = {first + i: list(r) for i, r in enumerate(assignment)}
        else:
            rf = len(current.partitions.get(0, [])) or 1
            spread = assign_replicas(self._live_racks(), count, rf)
            added = {p: spread[p] for p in range(first, count)}
        await self.member.zk_call(zk.set_topic_assignment,
                                  TopicAssignment(name, current.topic_id, {**current.partitions, **added}))
        log.info("partitions_added", topic=name, partitions=count)

    def delete_topic(self, name: str) -> None:
        self.member.spawn(self.member.zk_call(self.member.zk.mark_topic_for_deletion, name))

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self.member.spawn(self.member.zk_call(self.member.zk.set_topic_config, name, configs))

    async def load_users(self) -> None:
        """Every user's SCRAM credentials, before this broker registers (others authenticate to it at once)."""
        for user in await self.member.zk_call(self.member.zk.user_names):
            await self._reload_user(user)

    async def _reload_user(self, user: str) -> None:
        configs = await self.member.zk_call(self.member.zk.user_config, user)
        self.member.broker.credentials.replace(user, {k: v for k, v in configs.items() if k.startswith("SCRAM-")})

    async def set_user_credentials(self, user: str, texts: dict[str, str]) -> None:
        await self.member.zk_call(self.member.zk.set_user_scram_credentials, user, texts)

    async def load_tokens(self) -> None:
        """Every delegation token, before this broker registers (a client may present one to it at once)."""
        for token_id in await self.member.zk_call(self.member.zk.token_ids):
            await self._reload_token(token_id)

    async def _reload_token(self, token_id: str) -> None:
        data = await self.member.zk_call(self.member.zk.token, token_id)
        self.member.broker.tokens.replace(token_id, TokenInfo.from_json(data) if data is not None else None)

    async def set_token(self, token_id: str, text: str | None) -> None:
        await self.member.zk_call(self.member.zk.set_token, token_id, text.encode() if text is not None else None)

    async def load_quotas(self) -> None:
        for entity, configs in await self.member.zk_call(self.member.zk.quota_entities):
            self.member.broker.quotas.replace(entity, _quota_values(configs))

    async def _reload_quota(self, entity: tuple) -> None:
        configs = await self.member.zk_call(self.member.zk.quota_config, entity)
        self.member.broker.quotas.replace(entity, _quota_values(configs))
        log.info("quotas_changed", entity=entity, quotas=_quota_values(configs))

    async def set_quotas(self, entity: tuple, values: dict[str, float]) -> None:
        texts = {k: (str(int(v)) if float(v).is_integer() else repr(float(v))) for k, v in values.items()}
        await self.member.zk_call(self.member.zk.set_quota_config, entity, texts)

    async def load_broker_configs(self) -> None:
        zk, dynamic = self.member.zk, self.member.broker.dynamic
        dynamic.replace(default=await self.member.zk_call(zk.broker_config, DEFAULT_ENTITY),
                        own=await self.member.zk_call(zk.broker_config, str(self.member.broker_id)))

    async def set_broker_configs(self, entity: str, texts: dict[str, str]) -> None:
        await self.member.zk_call(self.member.zk.set_broker_config, entity, texts)

    async def load_group_configs(self) -> None:
        """The GROUP and CLIENT_METRICS config resources, both read whole at start."""
        self.group_configs = await self.member.zk_call(self.member.zk.group_configs)
        self.client_metrics = await self.member.zk_call(self.member.zk.entity_configs, "client-metrics")

    async def load_features(self) -> None:
        """The feature levels UpdateFeatures stored (``/feature``), and their epoch."""
        self.features, self.features_epoch = await self.member.zk_call(self.member.zk.features)

    async def set_group_configs(self, group: str, texts: dict[str, str]) -> None:
        await self.member.zk_call(self.member.zk.set_group_config, group, texts)

    async def set_client_metrics(self, name: str, texts: dict[str, str]) -> None:
        await self.member.zk_call(self.member.zk.set_client_metrics, name, texts)

    async def set_features(self, levels: dict[str, int]) -> None:
        await self.member.zk_call(self.member.zk.set_features, levels)
        await self.load_features()

    # ------------------------------------------------------------------ config change notifications
    async def watch_config_changes(self, resume: bool = False) -> None:
        """Watch ``/config/changes``. At start the notifications that exist were applied by the topic loads;
        after a new session (``resume``) the ones made meanwhile are applied now."""
        if resume:
            await self._apply_config_changes()
        else:
            self._changes_seen = set(await self.member.zk_call(self.member.zk.config_changes, self._fire))

    def _fire(self, _event) -> None:   # kazoo's thread
        self.member.loop.call_soon_threadsafe(lambda: self.member.spawn(self._apply_config_changes()))

    async def _apply_config_changes(self) -> None:
        zk = self.member.zk
        names = await self.member.zk_call(zk.config_changes, self._fire)
        for change in names:
            if change in self._changes_seen:
                continue
            self._changes_seen.add(change)
            entity = await self.member.zk_call(zk.config_change, change)
            if entity:
                await self._apply_config_change(entity)
        self._changes_seen -= await self.member.zk_call(zk.purge_notifications, "/config/changes",
                                                        sorted(self._changes_seen))

    async def _apply_config_change(self, entity: str) -> None:
        """Reload what ``entity`` (a notification's ``entity_path``) names: a user, a quota entity, a topic."""
        zk = self.member.zk
        if entity.startswith(("users/", "clients/", "ips/")):
            parts = entity.split("/")
            if parts[0] == "ips":
                await self._reload_quota((None, None, parts[1]))
            elif parts[0] == "clients":
                await self._reload_quota((None, parts[1], None))
            elif len(parts) == 4:   # users/<user>/clients/<client>
                await self._reload_quota((parts[1], parts[3], None))
            else:
                await self._reload_user(parts[1])
                await self._reload_quota((parts[1], None, None))
                log.info("user_credentials_changed", user=parts[1])
            return
        if entity.startswith("delegation_token/"):
            await self._reload_token(entity.split("/", 1)[1])
            return
        if entity.startswith("brokers/"):   # brokers/<default> or brokers/<id>: dynamic broker configs
            name = entity.split("/", 1)[1]
            if name in (DEFAULT_ENTITY, str(self.member.broker_id)):
                texts = await self.member.zk_call(zk.broker_config, name)
                self.member.broker.dynamic.replace(**{"default" if name == DEFAULT_ENTITY else "own": texts})
            return
        if entity.startswith("groups/"):
            group = entity.split("/", 1)[1]
            self.group_configs[group] = await self.member.zk_call(zk.group_config, group)
            return
        if entity == "feature":
            await self.load_features()
            return
        if entity.startswith("client-metrics/"):
            name = entity.split("/", 1)[1]
            self.client_metrics[name] = await self.member.zk_call(zk.client_metrics, name)
            return
        if entity.startswith("topics/"):
            topic = entity.split("/", 1)[1]
            meta = self.topics.get(topic)
            if meta is None:
                return
            meta.configs = await self.member.zk_call(zk.topic_config, topic)
            broker = self.member.broker
            config = broker.topic_config(topic)
            broker.replica_manager.update_config(topic, config)
            log.info("topic_config_changed", topic=topic, configs=meta.configs)
            controller = self.member.controller
            if config.unclean_leader_election_enable and controller is not None and controller.active:
                controller.enqueue("unclean_enabled", topic)


def _quota_values(configs: dict[str, str]) -> dict[str, float]:
    values = {}
    for key in QUOTA_KEYS:
        try:
            values[key] = float(configs[key])
        except (KeyError, ValueError):
            continue
    return values


class ZkProducerIdManager:
    """Producer ids in blocks from ``/latest_producer_id_block`` (see the module docstring)."""

    def __init__(self, zk: KafkaZkClient, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.next_id = 0
        self.block_start = 0
        self.block_end = -1
        self._prefetch: asyncio.Task | None = None
        self._next_block: tuple[int, int] | None = None

    async def start(self) -> None:
        """Claim the first block before the broker serves, so no request waits for it."""
        await self._fetch_next_block()

    def generate(self) -> int:
        if self.next_id > self.block_end:
            self._take_next_block()
        producer_id = self.next_id
        self.next_id += 1
        used = (self.next_id - self.block_start) / max(1, self.block_end - self.block_start + 1)
        if used >= 0.9 and self._next_block is None and self._prefetch is None:
            self._prefetch = asyncio.get_running_loop().create_task(self._fetch_next_block())
        return producer_id

    def _take_next_block(self) -> None:
        block = self._next_block
        if block is None:
            # Ids ran out before the background claim finished (or at the first id): claim here.
            block = self.zk.allocate_producer_id_block(self.broker_id)
        self._next_block = None
        self.block_start, self.block_end = block
        self.next_id = self.block_start
        log.info("producer_id_block", start=self.block_start, end=self.block_end)

    async def _fetch_next_block(self) -> None:
        try:
            self._next_block = await asyncio.to_thread(self.zk.allocate_producer_id_block, self.broker_id)
        except Exception as exc:   # ZooKeeper away: the next block is claimed when it is needed
            log.warning("producer_id_block_prefetch_failed", error=str(exc))
        finally:
            self._prefetch = None
