"""MetadataCache: what the controller last told this broker (UpdateMetadata), for answering clients.

Every broker answers Metadata, FindCoordinator and DescribeCluster for the
whole cluster from here. It changes only on UpdateMetadata from a controller
whose epoch is at least the newest one seen. A topic's dict of partitions is
replaced, not changed, by each UpdateMetadata that names it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

LEADER_DURING_DELETE = -2
# UpdateMetadata v8's Type (KIP-866), which a Kafka broker ignores unless a KRaft controller sends it: kbroker's
# controller marks INCREMENTAL the UpdateMetadata of live brokers alone that it sends ahead of a started broker's
# LeaderAndIsr (Kafka's order), so that the broker does not answer clients from it before its partitions come;
# the others carry partition states (every partition's to a broker that started and under a new controller, the
# changed ones otherwise, applied over what is held) and go as Kafka's ZooKeeper controller sends its own (0).
UPDATE_TYPE_STATES, UPDATE_TYPE_INCREMENTAL = 0, 1


@dataclass
class PartitionInfo:
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    offline: list[int]
    zk_version: int = 0


@dataclass
class LiveBroker:
    broker_id: int
    endpoints: dict[str, tuple[str, int]]     # listener name -> (host, port)
    rack: str | None = None


@dataclass
class MetadataCache:
    controller_id: int = -1
    controller_epoch: int = 0
    brokers: dict[int, LiveBroker] = field(default_factory=dict)
    partitions: dict[str, dict[int, PartitionInfo]] = field(default_factory=dict)
    topic_ids: dict[str, bytes] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    ready: asyncio.Event = field(default_factory=asyncio.Event)    # set by the first UpdateMetadata, for good

    def update(self, request) -> tuple[set[str], set[str]]:
        """Apply an UpdateMetadata; returns (topics added, topics deleted)."""
        self.controller_id = request.controller_id
        self.controller_epoch = request.controller_epoch
        self.brokers = {b.id: LiveBroker(b.id, {e.listener: (e.host, e.port) for e in b.endpoints}, b.rack)
                        for b in request.live_brokers}
        added, deleted = set(), set()
        for topic in request.topic_states:
            name = topic.topic_name
            if any(p.leader == LEADER_DURING_DELETE for p in topic.partition_states):
                if self.partitions.pop(name, None) is not None:
                    deleted.add(name)
                self.topic_ids.pop(name, None)
                continue
            if name not in self.partitions:
                added.add(name)
            # (a new dict for each topic named: what a client was answered of it is kept encoded while its dict
            # is the same one, broker/handlers/metadata_topics.py)
            parts = self.partitions[name] = dict(self.partitions.get(name, ()))
            self.topic_ids[name] = topic.topic_id
            for p in topic.partition_states:
                parts[p.partition_index] = PartitionInfo(p.leader, p.leader_epoch, list(p.isr), list(p.replicas),
                                                         list(p.offline_replicas), p.zk_version)
        # Wake whoever waits for a change (CreateTopics waiting for leaders), then re-arm.
        self.changed.set()
        self.changed = asyncio.Event()
        if request.type != UPDATE_TYPE_INCREMENTAL:   # (live brokers only, ahead of a started broker's
            self.ready.set()                           # LeaderAndIsr: its partitions come next)
        return added, deleted

    def partition(self, topic: str, index: int) -> PartitionInfo | None:
        return self.partitions.get(topic, {}).get(index)

    def endpoint(self, broker_id: int, listener: str | None = None) -> tuple[str, int] | None:
        broker = self.brokers.get(broker_id)
        if broker is None or not broker.endpoints:
            return None
        if listener is not None and listener in broker.endpoints:
            return broker.endpoints[listener]
        return next(iter(broker.endpoints.values()))

    def has_leaders(self, topic: str, count: int) -> bool:
        parts = self.partitions.get(topic, {})
        return len(parts) >= count and all(parts[i].leader >= 0 for i in range(count) if i in parts)
