"""Broker configuration with Kafka's key names and defaults.

Sources, later ones winning: a ``server.properties``-style file, then
``KBROKER_*`` environment variables (``KBROKER_LOG_DIRS`` -> ``log.dirs``),
then ``--override key=value`` flags. Unknown keys warn; invalid values fail
start-up with a message naming the key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import structlog

from kbroker.client.properties import read_properties
from kbroker.storage.log_config import BROKER_SYNONYMS, LogConfig

log = structlog.get_logger("broker.config")
LONG_MAX = (1 << 63) - 1


def _bool(v: str) -> bool:
    if str(v).lower() not in ("true", "false"):
        raise ValueError(f"expected true or false, got {v!r}")
    return str(v).lower() == "true"


def _list(v: str) -> list[str]:
    return [x.strip() for x in str(v).split(",") if x.strip()]


def _codec(v: str) -> int:
    """A compression codec's id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (Kafka's CompressionType ids)."""
    codec = int(v)
    if not 0 <= codec <= 4:
        raise ValueError(f"Unknown compression type id: {codec}")
    return codec


def _delivery_count_limit(v: str) -> int:
    """Kafka's range for ``group.share.delivery.count.limit``: 2 to 10."""
    limit = int(v)
    if not 2 <= limit <= 10:
        raise ValueError(f"Invalid value {limit} for configuration group.share.delivery.count.limit: Value must be "
                         f"{'no less than 2' if limit < 2 else 'no more than 10'}")
    return limit


def _migration_policy(v: str) -> str:
    """disabled, upgrade, downgrade or bidirectional, in any case (Kafka's enum)."""
    policy = str(v).strip().lower()
    if policy not in ("disabled", "upgrade", "downgrade", "bidirectional"):
        raise ValueError(f"{v!r} is not one of disabled, upgrade, downgrade, bidirectional")
    return policy


def _opt_int(v):
    return None if v in (None, "", "null") else int(v)


# name -> (parser, default); None defaults mean "derived" or "unset"
DEFINITIONS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "broker.id": (int, 0),
    "node.id": (_opt_int, None),
    "listeners": (_list, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (_list, None),
    "log.dirs": (_list, None),
    "log.dir": (_list, "/tmp/kafka-logs"),
    "num.partitions": (int, 1),
    "default.replication.factor": (int, 1),
    "auto.create.topics.enable": (_bool, True),
    "delete.topic.enable": (_bool, True),
    "log.segment.bytes": (int, 1073741824),
    "log.roll.ms": (_opt_int, None),
    "log.roll.hours": (int, 168),
    "log.roll.jitter.ms": (_opt_int, None),
    "log.roll.jitter.hours": (int, 0),
    "log.preallocate": (_bool, False),
    "log.retention.ms": (_opt_int, None),
    "log.retention.minutes": (_opt_int, None),
    "log.retention.hours": (int, 168),
    "log.retention.bytes": (int, -1),
    "log.retention.check.interval.ms": (int, 300000),
    "log.flush.interval.messages": (int, LONG_MAX),
    "log.flush.interval.ms": (_opt_int, None),
    "log.flush.scheduler.interval.ms": (int, LONG_MAX),
    "log.flush.offset.checkpoint.interval.ms": (int, 60000),
    "log.index.interval.bytes": (int, 4096),
    "log.index.size.max.bytes": (int, 10485760),
    "log.cleanup.policy": (str, "delete"),
    "log.message.timestamp.type": (str, "CreateTime"),
    "log.message.timestamp.before.max.ms": (int, LONG_MAX),
    "log.message.timestamp.after.max.ms": (int, 3600000),
    "log.message.format.version": (str, "3.0-IV1"),           # deprecated in Kafka 3.x; accepted, no effect
    "log.message.downconversion.enable": (_bool, True),       # likewise
    "log.cleaner.delete.retention.ms": (int, 86400000),
    "log.cleaner.min.cleanable.ratio": (float, 0.5),
    "log.segment.delete.delay.ms": (int, 60000),
    "message.max.bytes": (int, 1048588),
    "min.insync.replicas": (int, 1),
    "compression.type": (str, "producer"),
    "compression.gzip.level": (int, -1),   # (KIP-390: the levels a batch is recompressed at)
    "compression.lz4.level": (int, 9),
    "compression.zstd.level": (int, 3),
    "unclean.leader.election.enable": (_bool, False),
    "socket.request.max.bytes": (int, 104857600),
    "socket.listen.backlog.size": (int, 50),   # (KIP-764: connections the kernel holds before the broker accepts)
    "queued.max.requests": (int, 500),
    # Kafka's default is -1 (unbounded); bounded here so that no set of clients can make the broker allocate
    # more than this for requests it has not handled yet (protocol.framing.ReceiveBudget).
    "queued.max.request.bytes": (int, 209715200),
    "max.connection.creation.rate": (int, 2147483647),
    "connections.max.idle.ms": (int, 600000),
    "max.connections": (int, 2147483647),
    "max.connections.per.ip": (int, 2147483647),
    "max.connections.per.ip.overrides": (str, ""),
    "cluster.id": (str, None),
    "zookeeper.connect": (str, None),
    "zookeeper.session.timeout.ms": (int, 18000),
    "zookeeper.connection.timeout.ms": (_opt_int, None),
    "broker.rack": (str, None),
    "listener.security.protocol.map": (_list, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                              "SASL_SSL:SASL_SSL"),
    "inter.broker.listener.name": (str, None),
    # TLS (broker/security/tls.py); each may also be set per listener as listener.name.<name>.<key>
    "ssl.keystore.type": (str, "PEM"),
    "ssl.keystore.location": (str, None),
    "ssl.keystore.key": (str, None),
    "ssl.keystore.certificate.chain": (str, None),
    "ssl.key.password": (str, None),
    "ssl.truststore.type": (str, "PEM"),
    "ssl.truststore.location": (str, None),
    "ssl.truststore.certificates": (str, None),
    "ssl.client.auth": (str, "none"),
    "ssl.enabled.protocols": (_list, "TLSv1.2,TLSv1.3"),
    "ssl.cipher.suites": (_list, ""),
    "ssl.endpoint.identification.algorithm": (str, "https"),
    "ssl.principal.mapping.rules": (str, "DEFAULT"),
    # SASL (broker/security/sasl.py); the JAAS entries are listener.name.<name>.<mechanism>.sasl.jaas.config
    "sasl.enabled.mechanisms": (_list, "GSSAPI"),   # Kafka's default, which kbroker refuses with the ones it has
    "sasl.mechanism.inter.broker.protocol": (str, "GSSAPI"),
    "sasl.jaas.config": (str, None),
    "sasl.server.max.receive.size": (int, 524288),
    "connections.max.reauth.ms": (int, 0),
    # delegation tokens (KIP-48, broker/security/delegation_tokens.py): off without the secret key, which every
    # broker of a cluster shares
    "delegation.token.secret.key": (str, None),
    "delegation.token.max.lifetime.ms": (int, 604800000),
    "delegation.token.expiry.time.ms": (int, 86400000),
    "delegation.token.expiry.check.interval.ms": (int, 3600000),
    # OAUTHBEARER's JWKS validator (broker/security/jwks.py); each may be set per listener (and mechanism)
    "sasl.oauthbearer.jwks.endpoint.url": (str, None),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": (int, 3600000),
    "sasl.oauthbearer.expected.audience": (_list, ""),
    "sasl.oauthbearer.expected.issuer": (str, None),
    "sasl.oauthbearer.sub.claim.name": (str, "sub"),
    "sasl.oauthbearer.scope.claim.name": (str, "scope"),
    "sasl.oauthbearer.clock.skew.seconds": (int, 30),
    # Prometheus metrics (broker/metrics/): GET /metrics on this port; -1 (the default) serves none
    "metrics.port": (int, -1),
    "metrics.host": (str, "127.0.0.1"),
    # client telemetry (KIP-714, broker/metrics/client_telemetry.py): served while metrics.port is; the largest
    # push accepted, and the data points held for all clients together
    "telemetry.max.bytes": (int, 1048576),
    "kbroker.telemetry.max.points": (int, 200000),
    # client quotas (broker/configuration/quotas.py): usage is a rate over quota.window.num samples of this many seconds
    "leader.replication.throttled.rate": (int, LONG_MAX),
    "follower.replication.throttled.rate": (int, LONG_MAX),
    "replica.alter.log.dirs.io.max.bytes.per.second": (int, LONG_MAX),   # copying between log.dirs
    "replication.quota.window.num": (int, 11),
    "replication.quota.window.size.seconds": (int, 1),
    "quota.window.num": (int, 11),
    "quota.window.size.seconds": (int, 1),
    "controller.quota.window.num": (int, 11),            # controller_mutation_rate's bucket holds this many
    "controller.quota.window.size.seconds": (int, 1),    # windows of this many seconds (KIP-599)
    # ACLs (broker/security/authorizer.py): any authorizer.class.name turns kbroker's one authorizer on
    "authorizer.class.name": (str, ""),
    "super.users": (str, ""),
    "allow.everyone.if.no.acl.found": (_bool, False),
    "num.replica.fetchers": (int, 1),
    # Kafka's thread pools: accepted, described and changed at runtime under Kafka's rules, without effect here
    # (kbroker's request work runs on one event loop; docs/COMPATIBILITY.md)
    "num.io.threads": (int, 8),
    "num.network.threads": (int, 3),
    "background.threads": (int, 10),
    "num.recovery.threads.per.data.dir": (int, 2),
    # Kafka's log cleaner threads: likewise (kbroker's cleaner is one task on its own thread)
    "log.cleaner.threads": (int, 1),
    "max.incremental.fetch.session.cache.slots": (int, 1000),
    "max.request.partition.size.limit": (int, 2000),   # DescribeTopicPartitions' partitions per answer
    "replica.fetch.max.bytes": (int, 1048576),
    "fetch.max.bytes": (int, 57671680),   # KIP-541: a consumer's fetch answer at most, whatever it asks
    "replica.fetch.min.bytes": (int, 1),
    "replica.fetch.wait.max.ms": (int, 500),
    "replica.fetch.backoff.ms": (int, 1000),
    "replica.fetch.response.max.bytes": (int, 10485760),
    "replica.socket.timeout.ms": (int, 30000),
    "replica.high.watermark.checkpoint.interval.ms": (int, 5000),
    "controlled.shutdown.enable": (_bool, True),
    "controlled.shutdown.max.retries": (int, 3),
    "controlled.shutdown.retry.backoff.ms": (int, 5000),
    "auto.leader.rebalance.enable": (_bool, True),
    "leader.imbalance.check.interval.seconds": (int, 300),
    "offsets.topic.num.partitions": (int, 50),
    "offsets.topic.replication.factor": (int, 3),
    "transaction.state.log.num.partitions": (int, 50),
    "transaction.state.log.replication.factor": (int, 3),
    "transaction.state.log.min.isr": (int, 2),
    "transaction.max.timeout.ms": (int, 900000),
    "transactional.id.expiration.ms": (int, 604800000),
    "transaction.state.log.segment.bytes": (int, 104857600),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (int, 10000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (int, 3600000),
    "producer.id.expiration.ms": (int, 86400000),
    "producer.id.expiration.check.interval.ms": (int, 600000),
    "group.initial.rebalance.delay.ms": (int, 3000),
    "group.min.session.timeout.ms": (int, 6000),
    "group.max.session.timeout.ms": (int, 1800000),
    "group.max.size": (int, 2147483647),
    # KIP-848 consumer groups (ConsumerGroupHeartbeat): Kafka 4's names and defaults.
    "group.consumer.session.timeout.ms": (int, 45000),
    "group.consumer.min.session.timeout.ms": (int, 45000),
    "group.consumer.max.session.timeout.ms": (int, 60000),
    "group.consumer.heartbeat.interval.ms": (int, 5000),
    "group.consumer.min.heartbeat.interval.ms": (int, 5000),
    "group.consumer.max.heartbeat.interval.ms": (int, 15000),
    "group.consumer.max.size": (int, 2147483647),
    "group.consumer.assignors": (_list, "uniform,range"),
    "group.consumer.migration.policy": (_migration_policy, "bidirectional"),
    "group.coordinator.rebalance.protocols": (_list, "classic,consumer,streams"),
    # KIP-932 share groups: Kafka 4.2's names and defaults.
    "group.share.enable": (_bool, True),
    "group.share.session.timeout.ms": (int, 45000),
    "group.share.min.session.timeout.ms": (int, 45000),
    "group.share.max.session.timeout.ms": (int, 60000),
    "group.share.heartbeat.interval.ms": (int, 5000),
    "group.share.min.heartbeat.interval.ms": (int, 5000),
    "group.share.max.heartbeat.interval.ms": (int, 15000),
    "group.share.record.lock.duration.ms": (int, 30000),
    "group.share.min.record.lock.duration.ms": (int, 15000),
    "group.share.max.record.lock.duration.ms": (int, 60000),
    "group.share.delivery.count.limit": (_delivery_count_limit, 5),   # (Kafka 4.2 has no min and max for it)
    "group.share.partition.max.record.locks": (int, 2000),
    "group.share.max.size": (int, 200),
    "group.share.initialize.retry.interval.ms": (int, 30000),   # (Kafka's, internal)
    "group.share.max.share.sessions": (int, 2000),   # per broker: a new one past it is SHARE_SESSION_LIMIT_REACHED
    # KIP-1071 streams groups: Kafka 4.2's names and defaults.
    "group.streams.session.timeout.ms": (int, 45000),
    "group.streams.heartbeat.interval.ms": (int, 5000),
    "group.streams.max.size": (int, 2147483647),
    "group.streams.num.standby.replicas": (int, 0),
    "group.streams.initial.rebalance.delay.ms": (int, 3000),
    "group.streams.min.session.timeout.ms": (int, 45000),
    "group.streams.max.session.timeout.ms": (int, 60000),
    "group.streams.min.heartbeat.interval.ms": (int, 5000),
    "group.streams.max.heartbeat.interval.ms": (int, 15000),
    "group.streams.max.standby.replicas": (int, 2),
    "share.coordinator.state.topic.num.partitions": (int, 50),
    "share.coordinator.state.topic.replication.factor": (int, 3),
    "share.coordinator.state.topic.min.isr": (int, 2),
    "share.coordinator.state.topic.segment.bytes": (int, 104857600),
    "offset.metadata.max.bytes": (int, 4096),
    "offsets.retention.minutes": (int, 10080),
    "offsets.retention.check.interval.ms": (int, 600000),
    "offsets.commit.timeout.ms": (int, 5000),
    "offsets.topic.segment.bytes": (int, 104857600),
    "offsets.topic.compression.codec": (_codec, 0),   # the group coordinator's batches
    "log.cleaner.enable": (_bool, True),
    "log.cleaner.backoff.ms": (int, 15000),
    "log.cleaner.min.compaction.lag.ms": (int, 0),
    "log.cleaner.max.compaction.lag.ms": (int, 9223372036854775807),
    "replica.lag.time.max.ms": (int, 30000),
    "request.timeout.ms": (int, 30000),
    # Large log regions of a fetch answer go out by sendfile on plaintext listeners (broker/network/log_regions.py);
    # false: read and written in chunks, as under TLS. Measured (docs/BENCHMARKS.md, issue 36): sendfile
    # 1,565 MB/s at 12 % broker CPU against 1,360 MB/s at 20 % (median of 12 runs each, rdkafka fetch).
    "kbroker.fetch.sendfile": (_bool, True),
    # Followers fetch in incremental fetch sessions (KIP-227), as Kafka's do; false: a full fetch every round
    # (measured against each other by bench/idle_cluster.py).
    "kbroker.replica.fetch.sessions": (_bool, True),
    # What the broker holds in memory, all connections together, of log read for answers being written.
    "kbroker.fetch.send.memory.bytes": (int, 67108864),
    # A batch may decompress to at most this many times max.message.bytes (100 MiB by default): honest data
    # stays far below (compressible logs reach 10-20x), a compressed bomb is refused while it is read.
    "kbroker.compression.max.ratio": (int, 100),
    # Segment and index files held open at once (storage/open_files.py); -1: half the descriptor limit.
    "kbroker.log.open.files.max": (int, -1),
}


class ConfigError(ValueError):
    pass


def parse_value(key: str, value: Any) -> Any:
    """``value`` (text) parsed as ``key`` defines it; unknown keys keep their text. Raises ConfigError."""
    defined = _listener_key(key) or key   # listener.name.<l>.<key> is parsed as <key> is
    if defined not in DEFINITIONS or value is None:
        return value
    try:
        return DEFINITIONS[defined][0](value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid value {value!r} for configuration {key}: {exc}") from None


@dataclass
class BrokerConfig:
    """``values`` are the effective settings: ``static`` (file, environment, flags) with the dynamic layers
    (broker/configuration/dynamic_config.py) laid over them; everything reads ``values``."""
    values: dict[str, Any] = field(default_factory=dict)
    static: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.static is None:
            self.static = dict(self.values)

    @classmethod
    def load(cls, properties_path: str | None = None, overrides: list[str] | None = None,
             environ: dict[str, str] | None = None) -> "BrokerConfig":
        raw: dict[str, str] = {}
        if properties_path:
            raw.update(read_properties(properties_path))
        for key, value in (os.environ if environ is None else environ).items():
            if key.startswith("KBROKER_"):
                raw[key[len("KBROKER_"):].lower().replace("_", ".")] = value
        for item in overrides or []:
            if "=" not in item:
                raise ConfigError(f"--override expects key=value, got {item!r}")
            key, value = item.split("=", 1)
            raw[key.strip()] = value.strip()
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "BrokerConfig":
        values = {}
        for key, value in raw.items():
            if (_listener_key(key) or key) not in DEFINITIONS:
                log.warning("unknown_config", key=key)
            values[key] = parse_value(key, value)
        return cls(values)

    def layer(self, default: dict[str, Any], per_broker: dict[str, Any]) -> set[str]:
        """Lay the parsed dynamic layers (cluster-wide default, then this broker's) over the static values;
        returns the keys whose effective value changed."""
        new = {**self.static, **default, **per_broker}
        changed = {k for k in new.keys() | self.values.keys() if new.get(k) != self.values.get(k)}
        self.values = new
        return changed

    def get(self, key: str) -> Any:
        if key in self.values:
            return self.values[key]
        if key not in DEFINITIONS:
            return None
        parser, default = DEFINITIONS[key]
        # List defaults are written as a properties file would have them.
        return _list(default) if parser is _list and isinstance(default, str) else default

    __getitem__ = get   # (not a method calling get: a lookup is on every request's path, one call each)

    def is_set(self, key: str) -> bool:
        return self.values.get(key) is not None

    # --------------------------------------------------------------- derived
    @property
    def broker_id(self) -> int:
        node = self.get("node.id")
        return node if node is not None else self.get("broker.id")

    @property
    def log_dirs(self) -> list[str]:
        return self.get("log.dirs") or self.get("log.dir")

    @property
    def retention_ms(self) -> int:
        if self.is_set("log.retention.ms"):
            return self.get("log.retention.ms")
        if self.is_set("log.retention.minutes"):
            return self.get("log.retention.minutes") * 60000
        return self.get("log.retention.hours") * 3600000

    @property
    def roll_ms(self) -> int:
        if self.is_set("log.roll.ms"):
            return self.get("log.roll.ms")
        return self.get("log.roll.hours") * 3600000

    @property
    def roll_jitter_ms(self) -> int:
        if self.is_set("log.roll.jitter.ms"):
            return self.get("log.roll.jitter.ms")
        return self.get("log.roll.jitter.hours") * 3600000

    @property
    def flush_ms(self) -> int:
        if self.is_set("log.flush.interval.ms"):
            return self.get("log.flush.interval.ms")
        return self.get("log.flush.scheduler.interval.ms")

    def broker_value(self, broker_key: str) -> Any:
        """A broker-level value as a topic config would see it (derived keys resolved)."""
        if broker_key == "log.retention.ms":
            return self.retention_ms
        if broker_key == "log.roll.ms":
            return self.roll_ms
        if broker_key == "log.roll.jitter.ms":
            return self.roll_jitter_ms
        if broker_key == "log.flush.interval.ms":
            return self.flush_ms
        return self.get(broker_key)

    def log_config(self) -> LogConfig:
        """The broker-wide defaults of every topic config."""
        overrides = {topic_key: str(self.broker_value(broker_key)).lower()
                     if isinstance(self.broker_value(broker_key), bool) else str(self.broker_value(broker_key))
                     for topic_key, broker_key in BROKER_SYNONYMS.items()}
        return replace(LogConfig().with_overrides(overrides), compression_max_ratio=self["kbroker.compression.max.ratio"])

    @property
    def listeners(self) -> list[tuple[str, str, int]]:
        return [parse_listener(x) for x in self.get("listeners")]

    def for_listener(self, listener: str):
        """A getter preferring ``listener.name.<listener>.<key>`` (Kafka's per-listener override) to ``<key>``."""
        prefix = f"listener.name.{listener.lower()}."

        def get(key: str) -> Any:
            return self.values[prefix + key] if self.values.get(prefix + key) is not None else self.get(key)
        return get

    @property
    def security_protocol_map(self) -> dict[str, str]:
        """``listener.security.protocol.map`` as listener name -> PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
        pairs = (item.partition(":") for item in self.get("listener.security.protocol.map"))
        return {name.strip(): protocol.strip().upper() for name, _, protocol in pairs}

    def security_protocol(self, listener: str) -> str:
        protocol = self.security_protocol_map.get(listener)
        if protocol is None:
            raise ConfigError(f"listener {listener} has no entry in listener.security.protocol.map")
        return protocol

    @property
    def inter_broker_listener(self) -> str:
        """The listener brokers use to reach each other: ``inter.broker.listener.name`` or the first one."""
        return self.get("inter.broker.listener.name") or self.listeners[0][0]

    @property
    def advertised_listeners(self) -> list[tuple[str, str, int]]:
        configured = self.get("advertised.listeners")
        return [parse_listener(x) for x in configured] if configured else self.listeners


def _listener_key(key: str) -> str | None:
    """``listener.name.<name>.<key>`` -> ``<key>`` (None for any other key)."""
    if not key.startswith("listener.name."):
        return None
    parts = key[len("listener.name."):].split(".", 1)
    if len(parts) != 2:
        return None
    if parts[1].partition(".")[2] == "sasl.jaas.config":   # listener.name.<l>.<mechanism>.sasl.jaas.config
        return "sasl.jaas.config"
    return parts[1]


def parse_listener(spec: str) -> tuple[str, str, int]:
    """``NAME://host:port`` -> (name, host, port); an empty host means all interfaces."""
    if "://" not in spec:
        raise ConfigError(f"listener {spec!r} is not NAME://host:port")
    name, rest = spec.split("://", 1)
    host, _, port = rest.rpartition(":")
    try:
        return name, host.strip("[]"), int(port)
    except ValueError:
        raise ConfigError(f"listener {spec!r} has no valid port") from None
