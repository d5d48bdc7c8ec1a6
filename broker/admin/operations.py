"""AdminOperations: the changes admin requests make to topics, configs, credentials, quotas and ACLs.

Each change is persisted in the metadata store (the local store, or ZooKeeper in a cluster) before it
returns and is applied to the running broker at once; in a cluster every other broker applies it from
ZooKeeper's notification, and the controller makes the replicas of new topics and partitions.
"""

from __future__ import annotations

import asyncio

import structlog

from kbroker.broker.metadata import TopicMetadata, TopicNotCreated
from kbroker.storage.log_config import LogConfig

log = structlog.get_logger("broker.admin")


async def _persisted(write) -> None:
    """A metadata store's write: the ZooKeeper store's is a coroutine to await, the local store's is done (and
    on disk) when the call returns."""
    if asyncio.iscoroutine(write):
        await write


class AdminOperations:
    def __init__(self, broker) -> None:
        self.broker = broker

    # ------------------------------------------------------------------ topics
    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str],
                     assignment: list[list[int]] | None = None) -> TopicMetadata:
        """``assignment``: replicas per partition as the client asked; only a cluster has a choice of them."""
        if self.broker.cluster is not None:
            # The controller makes the leaders and tells every replica.
            return self.broker.metadata.create_topic(name, partitions, replication_factor, configs, assignment)
        try:
            topic = self.broker.metadata.create_topic(name, partitions, replication_factor, configs)
        except OSError as exc:   # its metadata could not be saved (out of descriptors, a full disk)
            self.broker.metadata.topics.pop(name, None)
            raise TopicNotCreated(f"{name} could not be created: {exc}") from None
        config = self.broker.topic_config(name)
        made = [self.broker.replica_manager.make_leader(name, index, config) for index in range(partitions)]
        if any(p is None for p in made):
            # A log could not be made (a failed dir, or no descriptor to be had even after the cache of open
            # files gave its own back): the topic is not created, and the client is told.
            self.broker.replica_manager.remove_topic(name)
            self.broker.metadata.delete_topic(name)
            raise TopicNotCreated(f"the logs of {name} could not be created (see the broker's log)")
        log.info("topic_created", topic=name, partitions=partitions, configs=configs)
        return topic

    def delete_topic(self, name: str) -> None:
        meta = self.broker.metadata.topics.get(name)
        self.broker.metadata.delete_topic(name)
        if self.broker.cluster is not None:
            return   # StopReplica from the controller removes the replicas everywhere
        self.broker.replica_manager.remove_topic(name)
        self.broker.coordination.topic_deleted(name, meta.topic_id if meta is not None else None)
        log.info("topic_deleted", topic=name)

    def add_partitions(self, name: str, count: int, assignment: list[list[int]] | None = None) -> None:
        if self.broker.cluster is not None:
            self.broker.metadata.set_partitions(name, count, assignment)
            return
        config = self.broker.topic_config(name)
        for index in range(self.broker.metadata.topics[name].partitions, count):
            self.broker.replica_manager.make_leader(name, index, config)
        self.broker.metadata.set_partitions(name, count)

    def reconfigure_logs(self, unclean_enabled: bool = False) -> None:
        """The broker defaults of topic configs changed (dynamic broker configs): every log takes its topic's
        config anew; turning unclean election on lets the controller elect where no ISR member is left."""
        self.broker.default_log_config = self.broker.config.log_config()
        configs: dict[str, LogConfig] = {}   # one per topic, shared by its partitions as at creation
        for (topic, _), lg in list(self.broker.log_manager.logs.items()):
            if topic not in configs:
                configs[topic] = self.broker.topic_config(topic)
            lg.config = configs[topic]
        controller = self.broker.cluster.controller if self.broker.cluster is not None else None
        if unclean_enabled and controller is not None and controller.active:
            for name in list(self.broker.metadata.topics):
                controller.enqueue("unclean_enabled", name)

    async def set_broker_configs(self, per_broker: bool, texts: dict[str, str]) -> None:
        """This broker's (``per_broker``) or the cluster-wide dynamic configs are now ``texts``, persisted before
        this returns and applied here at once; in a cluster every broker applies them from ZooKeeper's
        notification."""
        entity = self.broker.dynamic.entity(per_broker)
        await _persisted(self.broker.metadata.set_broker_configs(entity, texts))
        self.broker.dynamic.replace(**{"own" if per_broker else "default": texts})

    async def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        """A group's configs (GROUP resource) are now ``configs``, persisted before this returns; in a cluster
        every broker reads them from ZooKeeper's notification."""
        await _persisted(self.broker.metadata.set_group_configs(group, configs))
        self.broker.metadata.group_configs[group] = dict(configs)

    async def set_client_metrics(self, name: str, configs: dict[str, str]) -> None:
        """Client metrics subscription ``name`` (CLIENT_METRICS resource) is now ``configs`` (none: removed),
        persisted before this returns; clients see it at their next telemetry request."""
        await _persisted(self.broker.metadata.set_client_metrics(name, configs))
        if configs:
            self.broker.metadata.client_metrics[name] = dict(configs)
        else:
            self.broker.metadata.client_metrics.pop(name, None)

    async def set_features(self, levels: dict[str, int]) -> None:
        """The finalized feature levels UpdateFeatures set are now ``levels``, persisted before this returns; in
        a cluster every broker reads them from ZooKeeper's notification."""
        await _persisted(self.broker.metadata.set_features(levels))

    def group_config(self, group: str, name: str) -> str:
        """The value of group config ``name`` for ``group``: its own, else the broker's default."""
        from kbroker.broker.configuration.group_configs import value_of
        return value_of(name, self.broker.metadata.group_configs.get(group, {}), self.broker.config)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.broker.metadata.set_configs(name, configs)
        self.broker.replica_manager.update_config(name, self.broker.topic_config(name))

    async def set_scram_credentials(self, user: str, texts: dict[str, str]) -> None:
        """The user's SCRAM credentials are now ``texts`` (mechanism -> Kafka's credential text), persisted
        before this returns; in a cluster every broker applies them from ZooKeeper's notification."""
        await _persisted(self.broker.metadata.set_user_credentials(user, texts))
        self.broker.credentials.replace(user, texts)

    async def set_token(self, token_id: str, info) -> None:
        """A delegation token is now ``info`` (a TokenInfo; None: gone), persisted before this returns; in a
        cluster every broker applies it from ZooKeeper's notification."""
        text = info.to_json().decode() if info is not None else None
        await _persisted(self.broker.metadata.set_token(token_id, text))
        self.broker.tokens.replace(token_id, info)

    async def expire_tokens(self) -> None:
        """Remove the tokens past their expiry or their maximum lifetime (every
        ``delegation.token.expiry.check.interval.ms``; in a cluster the controller does it for all)."""
        member = self.broker.cluster
        if member is not None and (member.controller is None or not member.controller.active):
            return
        now = self.broker.replica_manager.now_ms()
        for token_id, info in list(self.broker.tokens.tokens.items()):
            if info.expired(now):
                await self.set_token(token_id, None)

    async def set_quotas(self, entity: tuple, values: dict[str, float]) -> None:
        """The (user, client id) entity's quotas are now ``values``, persisted before this returns; in a cluster
        every broker applies them from ZooKeeper's notification."""
        await _persisted(self.broker.metadata.set_quotas(entity, values))
        self.broker.quotas.replace(entity, values)

    async def change_acls(self, resource: tuple[int, int, str], add: set, remove: set) -> None:
        """Add and remove ACLs of one resource pattern, persisted before this returns and applied here at once;
        in a cluster every other broker applies them from ZooKeeper's notification."""
        if self.broker.cluster is not None:
            await self.broker.cluster.acls.change(resource, add, remove)
            return
        metadata, authorizer = self.broker.metadata, self.broker.authorizer
        current = authorizer.of_resource(*resource)
        wanted = (current | add) - remove
        if wanted != current:
            metadata.set_resource_acls(resource, wanted)
            authorizer.replace(*resource, wanted)
