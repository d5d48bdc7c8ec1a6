"""Topic ids on the wire (KIP-516): Fetch v13+ and Produce v13 name topics by id, and an id always means
the topic it was given to. A topic deleted and recreated under the same name has a new id, so a client
still holding the old one is answered UNKNOWN_TOPIC_ID and never reads or writes the new topic through it.

``TopicIds`` resolves ids against the broker's metadata (one broker's store, or the cluster's cache fed by
ZooKeeper and the controller). Its index is rebuilt only when a lookup misses or finds an entry the
metadata no longer confirms, so the hot path costs one dict lookup and one check.
"""

from __future__ import annotations


class TopicIds:
    def __init__(self, broker) -> None:
        self.broker = broker       # broker.metadata.topics: name -> TopicMetadata (.topic_id); it may be replaced
        self._names: dict[bytes, str] = {}

    def id_of(self, name: str) -> bytes | None:
        meta = self.broker.metadata.topics.get(name)
        return meta.topic_id if meta is not None else None

    def name_of(self, topic_id: bytes) -> str | None:
        """The topic ``topic_id`` names now, or None if no topic has it (deleted, recreated, never known)."""
        topic_id = bytes(topic_id)
        name = self._names.get(topic_id)
        if name is not None and self.id_of(name) == topic_id:
            return name
        self._names = {meta.topic_id: n for n, meta in self.broker.metadata.topics.items()}
        return self._names.get(topic_id)
