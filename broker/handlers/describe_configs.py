"""DescribeConfigs: topic configs (with their sources and synonyms) and this broker's static configs."""

from broker.config import DEFINITIONS
from protocol import acls
from protocol.errors import ErrorCode
from protocol.messages.describe_configs import DESCRIBE_CONFIGS as API  # noqa: F401  (the registry reads API)
from storage.log_config import BROKER_SYNONYMS, TOPIC_CONFIGS

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
# ConfigSource values of DescribeConfigs
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# ConfigType values (v3+)
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
_LONG_CONFIGS = {"segment.ms", "retention.ms", "retention.bytes", "flush.messages", "flush.ms",
                 "delete.retention.ms", "file.delete.delay.ms"}


def _type_of(name: str, parser) -> int:
    if name in _LONG_CONFIGS:
        return LONG
    if parser is int:
        return INT
    if parser is float:
        return DOUBLE
    if name in ("cleanup.policy",):
        return LIST
    if getattr(parser, "__name__", "") == "<lambda>":
        return BOOLEAN
    return STRING


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def _entry(name: str, value: str | None, read_only: bool, synonyms: list[dict], parser) -> dict:
    """A DescribeConfigs entry; its source is that of its first (most specific) synonym."""
    source = synonyms[0]["source"]
    return {"name": name, "value": value, "read_only": read_only, "is_default": source == DEFAULT_CONFIG,
            "config_source": source, "is_sensitive": False, "synonyms": synonyms,
            "config_type": _type_of(name, parser), "documentation": None}


def topic_config_entries(broker, config, overrides: dict[str, str]) -> list[dict]:
    """One entry per topic config: its effective value, where it comes from, and its synonyms."""
    entries = []
    for name, (_, parser) in TOPIC_CONFIGS.items():
        broker_key = BROKER_SYNONYMS[name]
        synonyms = []
        if name in overrides:
            synonyms.append({"name": name, "value": overrides[name], "source": DYNAMIC_TOPIC_CONFIG})
        if broker.config.is_set(broker_key):
            synonyms.append({"name": broker_key, "value": _text(broker.config.broker_value(broker_key)),
                             "source": STATIC_BROKER_CONFIG})
        synonyms.append({"name": broker_key, "value": _text(DEFINITIONS.get(broker_key, (None, None))[1]),
                         "source": DEFAULT_CONFIG})
        entries.append(_entry(name, config.value_of(name), False, synonyms, parser))
    return entries


def broker_config_entries(broker) -> list[dict]:
    entries = []
    for name, (parser, _) in DEFINITIONS.items():
        value = _text(broker.config.broker_value(name))
        source = STATIC_BROKER_CONFIG if broker.config.is_set(name) else DEFAULT_CONFIG
        entries.append(_entry(name, value, True, [{"name": name, "value": value, "source": source}], parser))
    return entries


def refusal(ctx, resource_type: int, name: str, operation: int) -> tuple[ErrorCode, str] | None:
    """Kafka's check for a config resource: ``operation`` (DescribeConfigs, AlterConfigs) on the topic,
    or on the cluster for a broker's configs."""
    if resource_type == TOPIC and not ctx.authorized(operation, acls.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
    if resource_type in (BROKER, BROKER_LOGGER) and not ctx.cluster_authorized(operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed."
    return None


def handle(ctx, request):
    broker = ctx.broker
    results = []
    for resource in request.resources:
        result = {"error_code": 0, "error_message": None, "resource_type": resource.resource_type,
                  "resource_name": resource.resource_name, "configs": []}
        refused = refusal(ctx, resource.resource_type, resource.resource_name, acls.DESCRIBE_CONFIGS)
        if refused:
            result.update(error_code=refused[0], error_message=refused[1])
        elif resource.resource_type == TOPIC:
            meta = broker.metadata.topics.get(resource.resource_name)
            if meta is None:
                result.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              error_message=f"Topic {resource.resource_name} does not exist")
            else:
                result["configs"] = topic_config_entries(broker, broker.topic_config(meta.name), meta.configs)
        elif resource.resource_type == BROKER:
            if resource.resource_name not in ("", str(broker.broker_id)):
                result.update(error_code=ErrorCode.INVALID_REQUEST,
                              error_message=f"Unexpected broker id {resource.resource_name}")
            else:
                result["configs"] = broker_config_entries(broker)
        elif resource.resource_type == BROKER_LOGGER:
            result["configs"] = []
        else:
            result.update(error_code=ErrorCode.INVALID_REQUEST,
                          error_message=f"Unsupported resource type {resource.resource_type}")
        keys = resource.configuration_keys
        if keys is not None:
            result["configs"] = [c for c in result["configs"] if c["name"] in keys]
        if not request.include_synonyms:
            for c in result["configs"]:
                c["synonyms"] = []
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}
