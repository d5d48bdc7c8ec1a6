"""DescribeConfigs: topic and broker configs with their sources and synonyms (broker/configuration/dynamic_config.py)."""

from kbroker.broker.configuration.config import DEFINITIONS
from kbroker.broker.configuration.log_levels import LEVELS
from kbroker.broker.metadata import topic_name_invalid
from kbroker.broker.configuration.dynamic_config import (DEFAULT_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DYNAMIC_KEYS, DYNAMIC_TOPIC_CONFIG,
                                   QUOTA_KEYS, is_custom, is_sensitive, is_sensitive_topic_config, text_of)
from kbroker.protocol import acls
from kbroker.protocol.error_messages import kafka_message
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_configs import DESCRIBE_CONFIGS as API  # noqa: F401  (the registry reads API)
from kbroker.storage.config_values import java_int
from kbroker.storage.java_order import hash_order
from kbroker.storage.log_config import BROKER_SYNONYMS, DEFINED_ORDER, TOPIC_CONFIGS

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
RESOURCE_TYPES = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)
DYNAMIC_BROKER_LOGGER_CONFIG = 6
# ConfigType values (v3+)
UNKNOWN, BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, PASSWORD = 0, 1, 2, 3, 4, 5, 6, 7, 9
# Kafka's type where the parser alone does not tell it (an int parser reads INT, SHORT and LONG alike;
# a list or a password is a string here): as Kafka 4.2 describes them, checked by tests/reference.
_TYPES = {
    LONG: {"segment.ms", "segment.jitter.ms", "retention.ms", "retention.bytes", "flush.messages", "flush.ms", "delete.retention.ms",
           "file.delete.delay.ms", "min.compaction.lag.ms", "max.compaction.lag.ms", "connections.max.idle.ms",
           "connections.max.reauth.ms", "leader.imbalance.check.interval.seconds", "log.cleaner.backoff.ms",
           "log.cleaner.delete.retention.ms", "log.cleaner.max.compaction.lag.ms",
           "log.cleaner.min.compaction.lag.ms", "log.flush.interval.messages", "log.flush.interval.ms",
           "log.flush.scheduler.interval.ms", "log.retention.bytes", "log.retention.check.interval.ms",
           "log.retention.ms", "log.roll.ms", "log.roll.jitter.ms", "log.segment.delete.delay.ms",
           "offsets.retention.check.interval.ms",
           "queued.max.request.bytes", "replica.high.watermark.checkpoint.interval.ms", "replica.lag.time.max.ms",
           "follower.replication.throttled.rate", "leader.replication.throttled.rate",
           "replica.alter.log.dirs.io.max.bytes.per.second", "message.timestamp.before.max.ms",
           "message.timestamp.after.max.ms", "log.message.timestamp.before.max.ms",
           "log.message.timestamp.after.max.ms", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
           "delegation.token.max.lifetime.ms", "delegation.token.expiry.time.ms",
           "delegation.token.expiry.check.interval.ms"},
    LIST: {"cleanup.policy", "log.cleanup.policy", "leader.replication.throttled.replicas",
           "follower.replication.throttled.replicas", "advertised.listeners", "listeners", "log.dir", "log.dirs",
           "sasl.enabled.mechanisms", "ssl.cipher.suites", "ssl.enabled.protocols", "super.users",
           "group.consumer.assignors", "group.coordinator.rebalance.protocols", "sasl.oauthbearer.expected.audience"},
    SHORT: {"offsets.topic.replication.factor", "transaction.state.log.replication.factor",
            "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr"},
    PASSWORD: {"delegation.token.secret.key", "sasl.jaas.config", "ssl.key.password",
               "ssl.keystore.certificate.chain", "ssl.keystore.key",
               "ssl.truststore.certificates", "ssl.keystore.password", "ssl.truststore.password"},
    INT: {"log.retention.minutes", "log.retention.hours", "node.id", "offsets.topic.compression.codec",
          "group.share.delivery.count.limit"},
}
_TYPE_OF = {name: kind for kind, names in _TYPES.items() for name in names}
# Broker configs whose Kafka default is no value (the effective one derives from another: log.retention.ms
# from log.retention.hours): described without a value until set, as Kafka does.
_UNSET_BY_DEFAULT = {"log.retention.ms", "log.roll.ms", "log.roll.jitter.ms", "log.flush.interval.ms"}


def _type_of(name: str, parser) -> int:
    if name in _TYPE_OF:
        return _TYPE_OF[name]
    if parser is None:   # a custom config (broker/configuration/dynamic_config.py): Kafka has no type for it either
        return UNKNOWN
    if parser is int:
        return INT
    if parser is float:
        return DOUBLE
    if getattr(parser, "__name__", "") in ("<lambda>", "_bool"):
        return BOOLEAN
    return STRING


def _entry(name: str, value: str | None, read_only: bool, synonyms: list[dict], parser,
           topic: bool = False) -> dict:
    """A DescribeConfigs entry; its source is that of its first (most specific) synonym (none: a config set
    nowhere whose default is null)."""
    source = synonyms[0]["source"] if synonyms else DEFAULT_CONFIG
    if source == DEFAULT_CONFIG and name in _UNSET_BY_DEFAULT:
        value = None
    sensitive = is_sensitive_topic_config(name) if topic else is_sensitive(name)
    if sensitive:
        synonyms = [{**s, "value": None} for s in synonyms]
    return {"name": name, "value": None if sensitive else value, "read_only": read_only,
            "is_default": source == DEFAULT_CONFIG, "config_source": source, "is_sensitive": sensitive,
            "synonyms": synonyms, "config_type": _type_of(name, parser), "documentation": None}


# (Kafka lists a topic's configs as the hash map of its parsed values iterates them)
_TOPIC_ORDER = hash_order(DEFINED_ORDER)


def topic_config_entries(broker, config, overrides: dict[str, str]) -> list[dict]:
    """One entry per topic config, in Kafka's order: its effective value, where it comes from, and its synonyms
    (the topic's override, then the broker key's dynamic, static and default values)."""
    entries = []
    for name in _TOPIC_ORDER:
        parser = TOPIC_CONFIGS[name][1]
        broker_key = BROKER_SYNONYMS.get(name)
        # (a topic config with no broker key, the throttled replicas', has no synonym but the topic's own value:
        # Kafka lists the broker's layers of its synonyms, and there are none)
        synonyms = broker.dynamic.synonyms(broker_key) if broker_key else []
        if name in overrides:
            synonyms.insert(0, {"name": name, "value": overrides[name], "source": DYNAMIC_TOPIC_CONFIG})
        entries.append(_entry(name, config.value_of(name), False, synonyms, parser, topic=True))
    return entries


def broker_config_entries(broker) -> list[dict]:
    """Every broker config with its effective value and layers; read-only unless it changes at runtime."""
    entries = [_entry(name, text_of(broker.config.broker_value(name)), name not in DYNAMIC_KEYS,
                      broker.dynamic.synonyms(name), parser)
               for name, (parser, _) in DEFINITIONS.items() if name not in QUOTA_KEYS]
    for name in sorted(QUOTA_KEYS):
        synonyms = [s for s in broker.dynamic.synonyms(name) if s["source"] != DEFAULT_CONFIG]
        if synonyms:
            entries.append(_entry(name, synonyms[0]["value"], True, synonyms, DEFINITIONS[name][0]))
    custom = sorted({k for k in (*broker.dynamic.own, *broker.dynamic.default) if is_custom(k)})
    for name in custom:
        synonyms = broker.dynamic.synonyms(name)
        entries.append(_entry(name, synonyms[0]["value"], False, synonyms, None))
    return entries


def default_broker_config_entries(broker) -> list[dict]:
    """The cluster-wide default resource (an empty broker name): the dynamic defaults that are set."""
    return [_entry(name, value, False, [{"name": name, "value": value, "source": DYNAMIC_DEFAULT_BROKER_CONFIG}],
                   DEFINITIONS.get(name, (None,))[0])
            for name, value in sorted(broker.dynamic.default.items())]


def logger_entries() -> list[dict]:
    """BROKER_LOGGER: every logger with its level, as Kafka lists its log4j loggers."""
    return [{"name": name, "value": level, "read_only": False, "is_default": False,
             "config_source": DYNAMIC_BROKER_LOGGER_CONFIG, "is_sensitive": False, "synonyms": [],
             "config_type": STRING, "documentation": None} for name, level in LEVELS.described()]


def broker_id_refusal(ctx, name: str, logger: bool = False) -> tuple[ErrorCode, str] | None:
    """The alter APIs' check that a BROKER or BROKER_LOGGER resource names this broker (clients send it to the
    broker it names), in Kafka's words for each."""
    node_id = java_int(name)
    if node_id is None:
        return ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
    if node_id != ctx.broker.broker_id:
        expected = ctx.broker.broker_id
        return ErrorCode.INVALID_REQUEST, (f"Unexpected node id. Expected {expected}, but received {node_id}" if logger
                                           else f"Unexpected broker id, expected {expected}, but received {name}")
    return None


def refusal(ctx, resource_type: int, name: str, operation: int) -> tuple[ErrorCode, str] | None:
    """Kafka's check for a config resource: ``operation`` (DescribeConfigs, AlterConfigs) on the topic or the
    group, or on the cluster for a broker's configs; answered with the error's own words, as Kafka does."""
    if resource_type == TOPIC and not ctx.authorized(operation, acls.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, kafka_message(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if resource_type in (BROKER, BROKER_LOGGER, CLIENT_METRICS) and not ctx.cluster_authorized(operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, kafka_message(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if resource_type == GROUP and not ctx.authorized(operation, acls.GROUP, name):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, kafka_message(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return None


def group_config_entries(broker, group: str) -> list[dict]:
    """Every group config: the group's own (DYNAMIC_GROUP_CONFIG, source 8) or the broker's default."""
    from kbroker.broker.configuration.group_configs import CONFIGS, default_of
    own = broker.metadata.group_configs.get(group, {})
    return [{"name": name, "value": own.get(name, default_of(name, broker.config)), "read_only": False,
             "config_source": 8 if name in own else 5, "is_sensitive": False, "synonyms": [],
             "config_type": STRING if kind == "STRING" else INT, "documentation": None}
            for name, (kind, *_) in sorted(CONFIGS.items())]


def client_metrics_entries(broker, name: str) -> list[dict]:
    """A client metrics subscription's three configs: its own (CLIENT_METRICS_CONFIG, source 7) or the default."""
    from kbroker.broker.configuration.client_metrics import INTERVAL, described
    return [{"name": key, "value": value, "read_only": False, "config_source": 5 if default else 7,
             "is_sensitive": False, "synonyms": [], "config_type": INT if key == INTERVAL else LIST,
             "documentation": None}
            for key, value, default in described(broker.metadata.client_metrics.get(name, {}))]


def _describe_id_refusal(ctx, resource_type: int, name: str) -> tuple[ErrorCode, str] | None:
    """DescribeConfigs' check that a BROKER or BROKER_LOGGER resource names this broker, in its words (which
    differ from the alter APIs')."""
    if resource_type == BROKER_LOGGER and not name:
        return ErrorCode.INVALID_REQUEST, "Broker id must not be empty"
    node_id = java_int(name)
    if node_id is None:
        return ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
    if node_id != ctx.broker.broker_id:
        either = " or empty string," if resource_type == BROKER else ""
        return (ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {ctx.broker.broker_id}{either} but received {name}")
    return None


def _unknown_type(request) -> dict | None:
    """Kafka's answer to a request naming a resource type it does not know: the whole request is refused,
    INVALID_REQUEST for every resource, the known ones too."""
    unknown = next((r for r in request.resources if r.resource_type not in RESOURCE_TYPES), None)
    if unknown is None:
        return None
    message = kafka_message(ErrorCode.INVALID_REQUEST)   # (Kafka's error answer carries the error's own words)
    return {"throttle_time_ms": 0, "results": [
        {"error_code": ErrorCode.INVALID_REQUEST, "error_message": message, "resource_type": r.resource_type,
         "resource_name": r.resource_name, "configs": []} for r in request.resources]}


def handle(ctx, request):
    broker = ctx.broker
    refused = _unknown_type(request)
    if refused is not None:
        return refused
    results, refusals = [], []   # (Kafka answers the resources it may describe first, then those refused)
    for resource in request.resources:
        # (Kafka's answer carries "" as the message of a resource described without error)
        result = {"error_code": 0, "error_message": "", "resource_type": resource.resource_type,
                  "resource_name": resource.resource_name, "configs": []}
        refused = refusal(ctx, resource.resource_type, resource.resource_name, acls.DESCRIBE_CONFIGS)
        if refused:
            result.update(error_code=refused[0], error_message=refused[1])
            refusals.append(result)
            continue
        if resource.resource_type == TOPIC:
            meta = broker.metadata.topics.get(resource.resource_name)
            invalid = topic_name_invalid(resource.resource_name) if meta is None else None
            if invalid is not None:
                result.update(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, error_message=invalid)
            elif meta is None:
                result.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)   # (no words: Kafka gives none)
            else:
                result["configs"] = topic_config_entries(broker, broker.topic_config(meta.name), meta.configs)
        elif resource.resource_type == GROUP and not resource.resource_name:
            result.update(error_code=ErrorCode.INVALID_REQUEST, error_message="Group name must not be empty")
        elif resource.resource_type == GROUP:
            result["configs"] = group_config_entries(broker, resource.resource_name)
        elif resource.resource_type == CLIENT_METRICS:
            result["configs"] = client_metrics_entries(broker, resource.resource_name)
        elif resource.resource_type == BROKER and resource.resource_name == "":
            result["configs"] = default_broker_config_entries(broker)
        elif resource.resource_type in (BROKER, BROKER_LOGGER):
            wrong_id = _describe_id_refusal(ctx, resource.resource_type, resource.resource_name)
            if wrong_id:
                result.update(error_code=wrong_id[0], error_message=wrong_id[1])
            elif resource.resource_type == BROKER:
                result["configs"] = broker_config_entries(broker)
            else:
                result["configs"] = logger_entries()
        keys = resource.configuration_keys
        if keys:   # (none named, or an empty list: every config, as Kafka reads both)
            result["configs"] = [c for c in result["configs"] if c["name"] in keys]
        if not request.include_synonyms:
            for c in result["configs"]:
                c["synonyms"] = []
        results.append(result)
    return {"throttle_time_ms": 0, "results": results + refusals}
