"""CoordinatorHosting: where this broker's group and transaction coordinators meet the partitions they live in.

An internal topic (``__consumer_offsets``, ``__transaction_state``) is made on the first request that needs
it, as Kafka makes it on the first FindCoordinator of its kind. A coordinator's state is rebuilt by replaying
the partitions this broker leads: all of them at start on a single broker, shard by shard as leadership
comes and goes in a cluster (broker/coordination/shards.py). Until a shard is here, its requests hear the
error a client retries on.
"""

from __future__ import annotations

import time

import structlog

from kbroker.broker.coordination.shards import (
    OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC, CoordinatorShards, replay)
from kbroker.coordinators.internal_topic import InternalTopicStore
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("broker.coordination")


class CoordinatorHosting:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.shards = CoordinatorShards(broker)   # cluster mode: the internal partitions coordinated here
        self._internal_creating: set[str] = set()

    def _ensure_internal_topic(self, name: str, partitions: int, replication: int,
                               configs: dict[str, str]) -> ErrorCode:
        """Create an internal topic on first use, as Kafka does on the first FindCoordinator of its kind.

        With fewer live brokers than its replication factor (one here), Kafka
        answers COORDINATOR_NOT_AVAILABLE and creates nothing.
        """
        if name in self.broker.metadata.topics:
            return ErrorCode.NONE
        if self.broker.cluster is not None:
            live = len(self.broker.cluster.cache.brokers)
            if replication > live:
                log.warning("internal_topic_replication_unsatisfiable", topic=name, replication_factor=replication,
                            brokers=live)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            if name not in self._internal_creating:
                self._internal_creating.add(name)
                self.broker.admin.create_topic(name, partitions, replication, {"cleanup.policy": "compact", **configs})
            return ErrorCode.COORDINATOR_NOT_AVAILABLE   # until the controller has made its leaders
        if replication > 1:   # one live broker
            log.warning("internal_topic_replication_unsatisfiable", topic=name, replication_factor=replication,
                        brokers=1)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        self.broker.admin.create_topic(name, partitions, replication, {"cleanup.policy": "compact", **configs})
        return ErrorCode.NONE

    def ensure_offsets_topic(self) -> ErrorCode:
        """``__consumer_offsets``, from the ``offsets.topic.*`` settings."""
        config = self.broker.config
        return self._ensure_internal_topic(
            OFFSETS_TOPIC, config["offsets.topic.num.partitions"], config["offsets.topic.replication.factor"],
            {"segment.bytes": str(config["offsets.topic.segment.bytes"]), "compression.type": "producer"})

    def ensure_transaction_topic(self) -> ErrorCode:
        """``__transaction_state``, from the ``transaction.state.log.*`` settings."""
        config = self.broker.config
        return self._ensure_internal_topic(
            TXN_TOPIC, config["transaction.state.log.num.partitions"], config["transaction.state.log.replication.factor"],
            {"segment.bytes": str(config["transaction.state.log.segment.bytes"]),
             "min.insync.replicas": str(config["transaction.state.log.min.isr"])})

    def ensure_share_state_topic(self) -> ErrorCode:
        """``__share_group_state``, from the ``share.coordinator.state.topic.*`` settings."""
        config = self.broker.config
        return self._ensure_internal_topic(
            SHARE_STATE_TOPIC, config["share.coordinator.state.topic.num.partitions"],
            config["share.coordinator.state.topic.replication.factor"],
            {"segment.bytes": str(config["share.coordinator.state.topic.segment.bytes"]),
             "min.insync.replicas": str(config["share.coordinator.state.topic.min.isr"])})

    def share_coordinator_error(self, index: int) -> ErrorCode:
        """NONE if this broker holds shard ``index`` of the share coordinator."""
        return self._coordinator_error(SHARE_STATE_TOPIC, index)

    def load_share_coordinator(self) -> None:
        count = self._replay(SHARE_STATE_TOPIC, self.broker.share_state_store,
                             self.broker.share_coordinator.replay_stored)
        log.info("share_coordinator_loaded", records=count, share_partitions=len(self.broker.share_coordinator.states))

    def transaction_coordinator_error(self, transactional_id: str) -> ErrorCode:
        return self._coordinator_error(TXN_TOPIC, self.broker.txn_coordinator.partition_for(transactional_id))

    def load_transaction_coordinator(self) -> None:
        """Rebuild transactional ids from ``__transaction_state``; prepared transactions are then finished."""
        count = self._replay(TXN_TOPIC, self.broker.txn_store, self.broker.txn_coordinator.replay_stored)
        self.broker.txn_coordinator.loaded()
        log.info("transaction_coordinator_loaded", records=count,
                 transactional_ids=len(self.broker.txn_coordinator.transactions))

    def group_coordinator_error(self, group_id: str) -> ErrorCode:
        """NONE if this broker coordinates ``group_id``; else the error a client retries on."""
        return self._coordinator_error(OFFSETS_TOPIC, self.broker.group_coordinator.partition_for(group_id))

    def _coordinator_error(self, topic: str, index: int) -> ErrorCode:
        if topic not in self.broker.metadata.topics:   # (no shard of it is here: Kafka 4's answer, tests/reference)
            return ErrorCode.NOT_COORDINATOR
        if self.broker.cluster is not None:
            return self.shards.error(topic, index)
        partition = self.broker.replica_manager.get(topic, index)
        return ErrorCode.NONE if partition is not None and partition.is_leader else ErrorCode.NOT_COORDINATOR

    def _replay(self, topic: str, store: InternalTopicStore, apply) -> int:
        """Feed every record of a local internal topic to ``apply(partition, record)``; returns the count."""
        if topic not in self.broker.metadata.topics:
            return 0
        return sum(list(replay(topic, store, index, apply))[-1]
                   for index in range(self.broker.metadata.topics[topic].partitions))

    def load_group_coordinator(self) -> None:
        """Rebuild groups and committed offsets by replaying every local ``__consumer_offsets`` partition."""
        started = time.monotonic()
        count = self._replay(OFFSETS_TOPIC, self.broker.offsets_store, self.broker.group_coordinator.replay_stored)
        self.broker.group_coordinator.loaded()
        log.info("group_coordinator_loaded", records=count, groups=len(self.broker.group_coordinator.groups),
                 seconds=round(time.monotonic() - started, 3))

    def leadership_changed(self, topic: str, index: int, is_leader: bool) -> None:
        """Cluster mode: coordinator shards load and unload with leadership of their internal partition."""
        self.shards.leadership_changed(topic, index, is_leader)

    def topic_deleted(self, name: str, topic_id: bytes | None) -> None:
        """What the coordinators held of a deleted topic goes: its committed offsets, the share groups' record
        of its share partitions, its share partitions here and their state at the share coordinator's shards
        held here."""
        self.broker.shares.topic_deleted(name)
        if name != OFFSETS_TOPIC and OFFSETS_TOPIC in self.broker.metadata.topics:
            self.broker.group_coordinator.remove_topic_offsets(name)
            if topic_id:
                self.broker.group_coordinator.remove_share_topic(bytes(topic_id))
        if topic_id and name != SHARE_STATE_TOPIC and self.broker.share_coordinator.states:
            removed = self.broker.share_coordinator.remove_topic_states(bytes(topic_id))
            if removed:
                log.info("share_states_of_deleted_topic_removed", topic=name, share_partitions=removed)
