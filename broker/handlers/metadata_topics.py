"""Each topic's entry of a Metadata answer, kept encoded from one request to the next while what it says holds.

A Metadata request for every topic is answered with every partition the cluster has: built and encoded at each
request, that held the event loop for 150 ms at 50,000 partitions. What a topic's entry says changes far less
often than clients ask, so an entry is kept encoded per answer version (``protocol.types.Encoded``, which the
answer's encoder writes as it is), beside what it was made from, and made again once any of that differs:
* the topic's metadata (``TopicMetadata``): the same object, with the same partition count and id;
* where its partitions' states are read: in a cluster, the metadata cache's dict of the topic's partitions,
  which every UpdateMetadata naming the topic replaces (``MetadataCache.update``); on one broker, the replica
  manager's count of changes to the topic (``generations``), moved by each of its partitions made, led,
  stopped, deleted or lost with its log dir.

Invariant: a kept entry's bytes are those of what ``describe_topic`` would build now, at that version. Entries
with an error are not kept, nor those with authorized operations (asked per principal).
"""

from __future__ import annotations

from kbroker.protocol.schema import element_encoder

METADATA = 3


class TopicAnswers:
    def __init__(self) -> None:
        self._kept: dict[tuple[int, str], tuple] = {}
        self._prune_at = 64   # (twice what the last pruning kept: pruning stays O(1) per entry made)

    def entry(self, ctx, name: str, describe):
        """The topic's entry: kept bytes, or ``describe(ctx, name, rows=True)`` encoded at the request's version
        and kept when it has no error."""
        broker = ctx.broker
        meta = broker.metadata.topics.get(name)
        if meta is None:
            return describe(ctx, name, rows=True)
        cluster = broker.cluster
        source = cluster.cache.partitions.get(name) if cluster is not None else \
            broker.replica_manager.generations.get(name, 0)
        key = (ctx.api_version, name)
        kept = self._kept.get(key)
        if kept is not None and kept[0] is meta and kept[1] == meta.partitions and kept[2] == meta.topic_id and \
                (kept[3] is source if cluster is not None else kept[3] == source):
            return kept[4]
        topic = describe(ctx, name, rows=True)
        if topic["error_code"]:
            return topic
        encoded = element_encoder(METADATA, ctx.api_version, "topics")(topic)
        if len(self._kept) >= self._prune_at:
            self._prune(broker)
        self._kept[key] = (meta, meta.partitions, meta.topic_id, source, encoded)
        return encoded

    def _prune(self, broker) -> None:
        """Drop the entries of topics that went (or were made again), so that churn keeps nothing."""
        topics = broker.metadata.topics
        self._kept = {key: kept for key, kept in self._kept.items() if topics.get(key[1]) is kept[0]}
        self._prune_at = max(64, 2 * len(self._kept))
