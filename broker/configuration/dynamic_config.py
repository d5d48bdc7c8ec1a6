"""Dynamic broker configs (Kafka's DynamicBrokerConfig): which keys change at runtime, how the layers stack,
and applying a change to the running broker.

Layers, the most specific first, as DescribeConfigs reports them:

- DYNAMIC_BROKER_CONFIG: this broker's own (ZooKeeper ``/config/brokers/<id>``, the local store otherwise);
- DYNAMIC_DEFAULT_BROKER_CONFIG: every broker's (``/config/brokers/<default>``);
- STATIC_BROKER_CONFIG: ``server.properties``, ``KBROKER_*`` and ``--override``;
- DEFAULT_CONFIG: the definitions in broker/configuration/config.py.

Invariant: after ``replace`` returns, ``broker.config.values`` is the static values with both dynamic layers
laid over them, and every running component that depends on a changed key has been told (log configs of
every partition, replica fetchers, connection limits, advertised endpoints). A key outside ``DYNAMIC_KEYS``
never changes while the broker runs.

A name kbroker does not define at all is a custom config, as Kafka allows on brokers (``customPropsAllowed``:
plugins read their own keys, and Kafka keeps dynamic keys it has no use for): it is stored and described
(as sensitive: no value) and has no effect. A name kbroker defines but cannot change at runtime is refused.
"""

from __future__ import annotations

import structlog

from kbroker.broker.configuration.config import DEFINITIONS, ConfigError, parse_listener, parse_value
from kbroker.broker.network.connection_limits import parse_overrides
from kbroker.storage.config_values import (INT, LIST, LONG, STRING, TYPES, Refused, java_int, java_split, java_trim,
                                           parse_as)
from kbroker.storage.log_config import BROKER_SYNONYMS

log = structlog.get_logger("broker.dynamic_config")

DEFAULT_ENTITY = "<default>"   # ZooKeeper's name for the cluster-wide default (/config/brokers/<default>)
# DescribeConfigs' ConfigSource values
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5

TOPIC_KEY_OF = {broker_key: topic_key for topic_key, broker_key in BROKER_SYNONYMS.items()}
# The broker defaults of topic configs (Kafka's DynamicLogConfig; message.format.version stays static there).
LOG_KEYS = frozenset(k for k in TOPIC_KEY_OF if k != "log.message.format.version")
# Kafka's DynamicThreadPool: a count changed at most to double or half at once
THREAD_KEYS = frozenset({"num.replica.fetchers", "num.io.threads", "background.threads",
                         "num.recovery.threads.per.data.dir", "num.network.threads"})
CONNECTION_KEYS = frozenset({"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
                             "max.connection.creation.rate"})
LISTENER_KEYS = frozenset({"advertised.listeners"})
# Kafka's AllDynamicConfigs, as far as kbroker has the keys and applies them without a restart.
# Kafka's broker quota configs: outside its KafkaConfig, so DescribeConfigs shows them only where a dynamic layer
# sets them, as read-only and with that layer's value alone
QUOTA_KEYS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                        "replica.alter.log.dirs.io.max.bytes.per.second"})
DYNAMIC_KEYS = LOG_KEYS | THREAD_KEYS | CONNECTION_KEYS | LISTENER_KEYS | QUOTA_KEYS | {
    "log.cleaner.backoff.ms", "producer.id.expiration.ms", "log.cleaner.threads"}
DEDUPE_BUFFER_BYTES = 134217728   # (Kafka's log.cleaner.dedupe.buffer.size, which its cleaner threads share)
PER_BROKER_KEYS = LISTENER_KEYS   # Kafka refuses these at the cluster-wide default
# Kafka's LIST-typed broker configs kbroker has: APPEND and SUBTRACT apply to these only
LIST_KEYS = frozenset({"log.cleanup.policy", "advertised.listeners", "listeners", "log.dirs", "log.dir",
                       "group.consumer.assignors", "group.coordinator.rebalance.protocols", "sasl.enabled.mechanisms",
                       "ssl.cipher.suites", "ssl.enabled.protocols"})
# (Kafka's PASSWORD-typed configs: their values are never described)
SENSITIVE_SUFFIXES = ("password", "sasl.jaas.config", "delegation.token.secret.key", "ssl.keystore.key",
                      "ssl.keystore.certificate.chain", "ssl.truststore.certificates")


def is_custom(key: str) -> bool:
    """A broker config name kbroker does not define (see the module's docstring)."""
    return key not in DEFINITIONS


def is_sensitive(key: str) -> bool:
    """A broker config never described nor logged by value: passwords and keys, and custom configs, whose
    meaning the broker cannot know (Kafka treats a config of unknown type as sensitive)."""
    return key.endswith(SENSITIVE_SUFFIXES) or is_custom(key)


def is_sensitive_topic_config(key: str) -> bool:
    return key.endswith(SENSITIVE_SUFFIXES)


# Kafka's type and floor for the dynamic broker configs that are no topic config's broker default
_TYPES = {
    **{key: (INT, ("at least", 1)) for key in (*THREAD_KEYS, "producer.id.expiration.ms")},
    **{key: (INT, ("at least", 0)) for key in ("max.connections", "max.connections.per.ip",
                                               "max.connection.creation.rate")},
    **{key: (LONG, ("at least", 0)) for key in ("log.cleaner.backoff.ms", *QUOTA_KEYS)},
    "log.cleaner.threads": (INT, ("at least", 0)),
    "max.connections.per.ip.overrides": (STRING, None), "advertised.listeners": (LIST, None)}
# Broker defaults of topic configs whose broker key Kafka defines with no floor (its topic key has one)
_UNBOUNDED = frozenset({"log.retention.ms", "log.roll.ms", "log.roll.jitter.ms", "log.flush.interval.ms"})


def _type_problem(key: str, text: str) -> str | None:
    """Kafka's parse of a dynamic broker config's value (its DynamicConfig.Broker ConfigDef), in its words."""
    if key in LOG_KEYS and TOPIC_KEY_OF[key] in TYPES:   # (as its topic config, but for the floors it lacks)
        kind, rule = TYPES[TOPIC_KEY_OF[key]]
        rule = None if key in _UNBOUNDED else rule
    elif key in _TYPES:
        kind, rule = _TYPES[key]
    else:
        return None
    try:
        parse_as(key, text, kind, rule)
    except Refused as exc:
        return str(exc)
    return None


def _reconfiguration_refused(why: str) -> str:
    """Kafka's words for a value its reconfiguration refuses (a ConfigException wrapped in another whose name
    is "Invalid dynamic configuration")."""
    return f"Invalid value org.apache.kafka.common.config.ConfigException: {why} for configuration Invalid " \
           "dynamic configuration"


def validate(texts: dict[str, str], per_broker: bool, config) -> str | None:
    """Why a dynamic layer of ``texts`` cannot be stored (Kafka's messages), or None. ``config``: the
    BrokerConfig now, for the rules that compare (thread counts, listener names). Custom names pass as text.
    Kafka's order: configs that are not dynamic, then every value's type, then what applying them would
    refuse."""
    texts = {k: v for k, v in texts.items() if k in DEFINITIONS}
    static = sorted(k for k in texts if k not in DYNAMIC_KEYS)
    if static:
        return f"Cannot update these configs dynamically: Set({', '.join(static)})"
    for key, text in texts.items():
        problem = _type_problem(key, text)
        if problem:
            return problem
    if not per_broker and texts.keys() & PER_BROKER_KEYS:
        return ("Cannot update these configs at default cluster level, broker id must be specified: "
                f"Set({', '.join(sorted(texts.keys() & PER_BROKER_KEYS))})")
    for key, least in (("log.roll.ms", 1), ("log.roll.jitter.ms", 0)):   # (KafkaConfig's requirements)
        if key in texts and int(texts[key]) < least:
            return f"requirement failed: {key} must be greater than or equal to {least}"
    if "log.retention.ms" in texts and int(texts["log.retention.ms"]) == 0:   # (any negative is unlimited)
        return "requirement failed: log.retention.ms must be unlimited (-1) or, greater than or equal to 1"
    if "log.cleaner.threads" in texts:   # (the dedupe buffer divided between the threads: Kafka's words, zero's too)
        threads = int(texts["log.cleaner.threads"])
        if threads == 0:
            return "/ by zero"
        if DEDUPE_BUFFER_BYTES // threads <= 1024 * 1024:
            return "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread."
    per_ip = texts.get("max.connections.per.ip", config["max.connections.per.ip"])
    overrides = texts.get("max.connections.per.ip.overrides", config["max.connections.per.ip.overrides"])
    if str(per_ip).strip() == "0" and not str(overrides).strip():
        return ("requirement failed: max.connections.per.ip can be set to zero only if "
                "max.connections.per.ip.overrides property is set.")
    for key, text in texts.items():
        try:
            value = parse_value(key, text)
        except ConfigError as exc:
            return str(exc)
        problem = _value_problem(key, text, value, config)
        if problem:
            return problem
    return None


def _overrides_problem(text: str) -> str | None:
    """Kafka's refusal of ``host:count,...`` as its KafkaConfig reads the list while it is built (Csv.parseCsvMap,
    then each count as an int), in the words of the Java exceptions it passes on."""
    text = java_trim(text)   # (a STRING config is trimmed)
    if not text:
        return None
    entries = java_split(text, r"\s*,\s*")
    for entry in entries:
        if ":" not in entry:
            return f"Error parsing configuration property 'max.connections.per.ip.overrides': begin 0, end -1, " \
                   f"length {len(entry)}"
    for entry in entries:
        count = entry[entry.rfind(":") + 1:].strip()
        if java_int(count) is None:
            return f'For input string: "{count}"'
    return None


def _value_problem(key: str, text: str, value, config) -> str | None:
    if key in THREAD_KEYS:   # Kafka's DynamicThreadPool rule: at least 1, at most doubled or halved at once
        old = config[key]
        if value != old:
            refused = f"Dynamic thread count update validation failed for {key}={value}"
            if value <= 0:
                return _reconfiguration_refused(f"{refused}, value should be at least 1")
            if value < old / 2:
                return _reconfiguration_refused(f"{refused}, value should be at least half the current value {old}")
            if value > old * 2:
                return _reconfiguration_refused(f"{refused}, value should not be greater than double the current "
                                                f"value {old}")
        return None
    if key == "log.cleaner.threads":   # (Kafka's LogCleaner rule: at most doubled or halved at once)
        old = config[key]
        if value < old // 2:
            return _reconfiguration_refused(f"Log cleaner threads cannot be reduced to less than half the current "
                                            f"value {old}")
        if value > old * 2:
            return _reconfiguration_refused(f"Log cleaner threads cannot be increased to more than double the "
                                            f"current value {old}")
        return None
    if key in ("max.connections", "max.connection.creation.rate") and value <= 0:   # (ConnectionQuotas' rule)
        return _reconfiguration_refused(f"Invalid {key} {value}")
    if key == "max.connections.per.ip.overrides":
        try:
            return _overrides_problem(value) or (parse_overrides(value) and None)
        except ConfigError as exc:
            return _reconfiguration_refused(str(exc))
    if key == "advertised.listeners":
        names = {name for name, _, _ in config.listeners}
        try:
            advertised = [parse_listener(x) for x in value]
        except ConfigError as exc:
            return _reconfiguration_refused(str(exc))
        strays = sorted({name for name, _, _ in advertised} - names)
        if strays:
            return _reconfiguration_refused(f"advertised.listeners names listeners this broker does not have: "
                                            f"{strays}")
        return None
    return None


class DynamicBrokerConfig:
    """This broker's two dynamic layers (as stored text) and their application to the running broker."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.default: dict[str, str] = {}      # /config/brokers/<default>
        self.own: dict[str, str] = {}          # /config/brokers/<id>

    def entity(self, per_broker: bool) -> str:
        return str(self.broker.broker_id) if per_broker else DEFAULT_ENTITY

    def layer(self, per_broker: bool) -> dict[str, str]:
        return self.own if per_broker else self.default

    def load(self, default: dict[str, str], own: dict[str, str]) -> None:
        """The stored layers at start, before the components that read the config exist (nothing to tell)."""
        self.default, self.own = dict(default), dict(own)
        self.broker.config.layer(self._parsed(self.default), self._parsed(self.own))

    def replace(self, default: dict[str, str] | None = None, own: dict[str, str] | None = None) -> set[str]:
        """Make ``default`` and/or ``own`` the dynamic layers and apply what changed; returns the changed keys.
        Keys that do not parse (stored by another version, or by hand) are left out with a warning."""
        if default is not None:
            self.default = dict(default)
        if own is not None:
            self.own = dict(own)
        changed = self.broker.config.layer(self._parsed(self.default), self._parsed(self.own))
        if changed:
            self._apply(changed)
            log.info("broker_configs_changed", keys=sorted(changed))
        return changed

    @staticmethod
    def _parsed(texts: dict[str, str]) -> dict:
        out = {}
        for key, text in texts.items():
            if key not in DEFINITIONS:
                continue   # a custom config: stored and described, read by nothing here
            if key not in DYNAMIC_KEYS:
                log.warning("dynamic_config_ignored", key=key, reason="not a dynamic broker config")
                continue
            try:
                out[key] = parse_value(key, text)
            except ConfigError as exc:
                log.warning("dynamic_config_ignored", key=key, reason=str(exc))
        return out

    def _apply(self, changed: set[str]) -> None:
        broker = self.broker
        if changed & LOG_KEYS:
            broker.admin.reconfigure_logs(unclean_enabled="unclean.leader.election.enable" in changed
                                    and broker.config["unclean.leader.election.enable"])
        if changed & CONNECTION_KEYS:
            broker.connection_limits.reconfigure(broker.config)
        if changed & THREAD_KEYS and broker.cluster is not None:
            broker.cluster.fetchers.resize()
        if changed & LISTENER_KEYS:
            broker.advertise()

    # ------------------------------------------------------------------ DescribeConfigs
    def synonyms(self, key: str) -> list[dict]:
        """Where ``key``'s value comes from, the most specific layer first (Kafka's synonyms for one name)."""
        config = self.broker.config
        out = []
        if key in self.own:
            out.append({"name": key, "value": self.own[key], "source": DYNAMIC_BROKER_CONFIG})
        if key in self.default:
            out.append({"name": key, "value": self.default[key], "source": DYNAMIC_DEFAULT_BROKER_CONFIG})
        if config.static.get(key) is not None:
            out.append({"name": key, "value": text_of(config.static[key]), "source": STATIC_BROKER_CONFIG})
        if key in DEFINITIONS and DEFINITIONS[key][1] is not None:   # (Kafka lists no default that is null)
            out.append({"name": key, "value": text_of(DEFINITIONS[key][1]), "source": DEFAULT_CONFIG})
        if is_sensitive(key):
            for s in out:
                s["value"] = None
        return out


def text_of(value) -> str | None:
    """A config value as Kafka's DescribeConfigs writes it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(value)
    return str(value)
