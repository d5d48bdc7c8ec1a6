"""Cluster metadata of a single broker: topics, their ids, partition counts and config overrides.

``LocalMetadataStore`` persists it in the first log dir: a JSON snapshot (written atomically) and a journal
of the changes since (storage/journal.py); the cluster id it holds is the one ``meta.properties`` names
(storage/meta_properties.py). A ZooKeeper-backed store for clusters sits
behind the same interface (broker/cluster/zk_store.py). ``MetadataCache``
answers Metadata, DescribeCluster and the admin handlers from it.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass, field

from kbroker.protocol.acls import AclBinding, binding_from_json, binding_to_json
from kbroker.protocol.types import uuid_to_str
from kbroker.storage.checkpoint import write_atomically
from kbroker.storage.journal import Journal
from kbroker.storage.logs import WatchedDict

MAX_TOPIC_NAME = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
STORE_FILE = "kbroker-metadata.json"
JOURNAL_FILE = "kbroker-metadata.journal"
# A snapshot folds the journal in once it holds this many changes, or as many as the last snapshot held topics:
# a change costs a line, and a snapshot's cost, which grows with the topics, is shared among as many changes.
SNAPSHOT_AFTER = 1000
# The keyed sections a change replaces one entry of (the journal names them)
_SECTIONS = ("users", "quotas", "broker_configs", "group_configs", "client_metrics", "tokens")


def _topic_name_fault(name: str | None) -> str | None:
    """What makes ``name`` no legal topic name (Kafka's Topic.validate), in its order of checks, or None."""
    if not name:
        return "empty"
    if name in (".", ".."):
        return "dots"
    if len(name) > MAX_TOPIC_NAME:
        return "long"
    return None if _LEGAL_TOPIC.fullmatch(name) else "chars"


# fault -> Kafka's words (its Topic.validate's reasons)
_TOPIC_NAME_INVALID = {
    "empty": "the empty string is not allowed", "dots": "'{name}' is not allowed",
    "long": "the length of '{name}' is longer than the max allowed length {max}",
    "chars": "'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"}


def topic_name_invalid(name: str | None) -> str | None:
    """Why ``name`` is no topic's, in the words of Kafka's Topic.validate (what CreateTopics, the config APIs
    and DescribeProducers answer), or None."""
    fault = _topic_name_fault(name)
    if fault is None:
        return None
    return "Topic name is invalid: " + _TOPIC_NAME_INVALID[fault].format(name=name, max=MAX_TOPIC_NAME)


@dataclass
class TopicMetadata:
    name: str
    topic_id: bytes
    partitions: int
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def to_json(self) -> dict:
        return {"id": self.topic_id.hex(), "partitions": self.partitions,
                "replication_factor": self.replication_factor, "configs": self.configs}

    @classmethod
    def from_json(cls, name: str, data: dict) -> "TopicMetadata":
        return cls(name, bytes.fromhex(data["id"]), data["partitions"], data.get("replication_factor", 1),
                   dict(data.get("configs", {})))


class Topics(WatchedDict):
    """Topic name -> TopicMetadata, with the names Kafka's collision rule compares indexed ('.' read as '_'), so
    that checking a new topic's name needs no walk of every topic."""

    def __init__(self, topics=()) -> None:
        super().__init__()
        self._normalized: dict[str, dict[str, None]] = {}   # (names in the order they came, as the dict's)
        self.update(topics)

    def colliding(self, name: str) -> str | None:
        """The first topic whose name differs from ``name`` only in '.' versus '_' (Kafka forbids them: metric
        names would clash), ``name`` itself if it is there, or None."""
        if "." not in name and "_" not in name:
            return None
        return next(iter(self._normalized.get(name.replace(".", "_"), ())), None)

    def _added(self, key, value) -> None:
        if "." in key or "_" in key:
            self._normalized.setdefault(key.replace(".", "_"), {})[key] = None

    def _removed(self, key) -> None:
        names = self._normalized.get(key.replace(".", "_"))
        if names is not None:
            names.pop(key, None)
            if not names:
                del self._normalized[key.replace(".", "_")]


class LocalMetadataStore:
    """Topics, SCRAM credentials, ACLs, quotas and dynamic broker configs: a JSON snapshot and a journal of the
    changes since. Every change is on disk before it returns, as one journal line; loading replays the journal
    over the snapshot (each entry sets one thing whole, so replaying one the snapshot already holds changes
    nothing). A clean stop folds the journal into the snapshot (``close``)."""

    def __init__(self, directory: str, broker_id: int, cluster_id: str | None = None) -> None:
        self.directory = directory
        self.path = os.path.join(directory, STORE_FILE)
        self.topics: dict[str, TopicMetadata] = Topics()
        self.users: dict[str, dict[str, str]] = {}   # SCRAM credentials: user -> mechanism -> Kafka's text
        self._acls: dict[tuple[int, int, str], list[AclBinding]] = {}   # resource pattern -> its ACLs
        self.quotas: dict[tuple, dict[str, float]] = {}   # (user, client id, IP) -> quota key -> bound
        self.broker_configs: dict[str, dict[str, str]] = {}   # "<default>" or broker id -> dynamic configs
        self.group_configs: dict[str, dict[str, str]] = {}    # group id -> its configs (GROUP resource)
        self.client_metrics: dict[str, dict[str, str]] = {}   # subscription -> its configs (CLIENT_METRICS)
        self.features: dict[str, int] = {}                      # feature -> the level UpdateFeatures set
        self.features_epoch = 0                                 # (how many updates it made)
        self.tokens: dict[str, str] = {}                        # delegation token id -> its JSON (no HMAC)
        self.cluster_id = cluster_id or ""
        self.broker_id = broker_id
        os.makedirs(directory, exist_ok=True)
        self._journal = Journal(os.path.join(directory, JOURNAL_FILE))
        self._load()

    def _load(self) -> None:
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            self.topics = Topics((name, TopicMetadata.from_json(name, t))
                                 for name, t in data.get("topics", {}).items())
            self.users = data.get("users", {})
            self._set_all_acls(binding_from_json(a) for a in data.get("acls", []))
            self.quotas = {(q["user"], q["client_id"], q.get("ip")): q["quotas"] for q in data.get("quotas", [])}
            self.broker_configs = data.get("broker_configs", {})
            self.group_configs = data.get("group_configs", {})
            self.client_metrics = data.get("client_metrics", {})
            self.features = data.get("features", {})
            self.features_epoch = data.get("features_epoch", 0)
            self.tokens = data.get("delegation_tokens", {})
        for entry in self._journal.read():
            self._apply(entry)
        self._folded = len(self.topics)   # (the topics a snapshot would hold: what the next one waits for)

    def _apply(self, entry: dict) -> None:
        """One journal entry's change (as ``_record`` wrote it)."""
        if "topic" in entry:
            name, value = entry["topic"], entry["value"]
            if value is None:
                self.topics.pop(name, None)
            else:
                self.topics[name] = TopicMetadata.from_json(name, value)
        elif entry.get("section") in _SECTIONS:
            mapping = getattr(self, entry["section"])
            key = tuple(entry["key"]) if entry["section"] == "quotas" else entry["key"]
            if entry["value"] is None:
                mapping.pop(key, None)
            else:
                mapping[key] = entry["value"]
        elif "acls" in entry:
            self._set_all_acls(binding_from_json(a) for a in entry["acls"])
        elif "resource" in entry:
            self._set_resource_acls(tuple(entry["resource"]), [binding_from_json(a) for a in entry["bindings"]])
        elif "features" in entry:
            self.features, self.features_epoch = entry["features"], entry["epoch"]

    def _record(self, entry: dict) -> None:
        """Persist a change already made in memory: a journal line, or a snapshot when the journal is due one."""
        journal = self._journal
        if journal.broken or journal.entries >= max(SNAPSHOT_AFTER, self._folded):
            self.snapshot()
        else:
            journal.append(entry)

    def snapshot(self) -> None:
        """The whole state written as the snapshot, then the journal emptied (a crash between the two replays
        entries the snapshot holds already, which changes nothing)."""
        self.save()
        self._journal.reset()
        self._folded = len(self.topics)

    def close(self) -> None:
        if self._journal.entries or self._journal.broken:
            self.snapshot()

    def save(self) -> None:
        data = {"topics": {name: t.to_json() for name, t in sorted(self.topics.items())}, "users": self.users,
                "acls": [binding_to_json(a) for a in self.acls],
                "quotas": [{"user": u, "client_id": c, "ip": ip, "quotas": q}
                           for (u, c, ip), q in self.quotas.items()],
                "broker_configs": self.broker_configs, "group_configs": self.group_configs,
                "client_metrics": self.client_metrics, "features": self.features,
                "features_epoch": self.features_epoch, "delegation_tokens": self.tokens}
        write_atomically(self.path, json.dumps(data, indent=1).encode())

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> TopicMetadata:
        topic = TopicMetadata(name, uuid.uuid4().bytes, partitions, replication_factor, dict(configs))
        self.topics[name] = topic
        self._record_topic(name)
        return topic

    def delete_topic(self, name: str) -> None:
        self.topics.pop(name, None)
        self._record_topic(name)

    def set_partitions(self, name: str, count: int) -> None:
        self.topics[name].partitions = count
        self._record_topic(name)

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self._record_topic(name)

    def _record_topic(self, name: str) -> None:
        topic = self.topics.get(name)
        self._record({"topic": name, "value": topic.to_json() if topic is not None else None})

    def _replace(self, section: str, key, value) -> None:
        """The section's entry ``key`` becomes ``value``; an empty one removes the key. Persisted before
        returning."""
        mapping = getattr(self, section)
        if value:
            mapping[key] = dict(value) if isinstance(value, dict) else value
        else:
            mapping.pop(key, None)
        self._record({"section": section, "key": list(key) if isinstance(key, tuple) else key,
                      "value": mapping.get(key)})

    def set_user_credentials(self, user: str, credentials: dict[str, str]) -> None:
        self._replace("users", user, credentials)

    def set_token(self, token_id: str, text: str | None) -> None:
        """A delegation token's JSON (None: the token is gone). Persisted before returning."""
        self._replace("tokens", token_id, text)

    def set_quotas(self, entity: tuple, values: dict[str, float]) -> None:
        self._replace("quotas", entity, values)

    def set_broker_configs(self, entity: str, texts: dict[str, str]) -> None:
        self._replace("broker_configs", entity, texts)

    def set_group_configs(self, group: str, texts: dict[str, str]) -> None:
        self._replace("group_configs", group, texts)

    def set_client_metrics(self, name: str, texts: dict[str, str]) -> None:
        self._replace("client_metrics", name, texts)

    def set_features(self, levels: dict[str, int]) -> None:
        self.features, self.features_epoch = dict(levels), self.features_epoch + 1
        self._record({"features": self.features, "epoch": self.features_epoch})

    @property
    def acls(self) -> list[AclBinding]:
        """Every ACL, in one order (as the snapshot holds them)."""
        return sorted((a for bindings in self._acls.values() for a in bindings), key=_acl_order)

    def set_acls(self, acls) -> None:
        """Every ACL at once. Persisted before returning."""
        self._set_all_acls(acls)
        self._record({"acls": [binding_to_json(a) for a in self.acls]})

    def set_resource_acls(self, resource: tuple[int, int, str], acls) -> None:
        """The ACLs of one resource pattern (type, pattern type, name), the others left as they are. Persisted
        before returning, as a journal line of that pattern's ACLs alone: a line of every ACL made a change
        cost as much as the ACLs there were. (A broker of before this entry skips it; a clean stop folds it
        into the snapshot, which it reads.)"""
        acls = self._set_resource_acls(resource, acls)
        self._record({"resource": list(resource), "bindings": [binding_to_json(a) for a in acls]})

    def _set_all_acls(self, acls) -> None:
        self._acls = {}
        for acl in acls:
            self._acls.setdefault(acl.resource, []).append(acl)

    def _set_resource_acls(self, resource: tuple, acls) -> list[AclBinding]:
        acls = sorted(acls, key=_acl_order)
        if acls:
            self._acls[resource] = acls
        else:
            self._acls.pop(resource, None)
        return acls


def _acl_order(acl: AclBinding) -> tuple:
    return acl.resource_type, acl.pattern_type, acl.name, acl.principal, acl.host, acl.operation, acl.permission


def new_cluster_id() -> str:
    """A cluster id as Kafka makes one: a random Uuid, printed as Kafka prints it."""
    return uuid_to_str(uuid.uuid4().bytes)


class TopicNotCreated(Exception):
    """A single broker could not make a new topic's logs; nothing of the topic is left."""
