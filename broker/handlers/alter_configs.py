"""AlterConfigs (legacy): replace a topic's whole set of config overrides, a group's whole set of configs, or a
broker's (or the cluster-wide default's) whole set of dynamic configs.

Changes persist in the metadata store and apply at once: to the topic's logs, or to every running component
that reads a changed broker config (broker/configuration/dynamic_config.py).
"""

from kbroker.broker.configuration.dynamic_config import is_sensitive, validate
from kbroker.broker.configuration.group_configs import checked as checked_group_configs
from kbroker.broker.handlers.describe_configs import BROKER, GROUP, TOPIC, broker_id_refusal, refusal
from kbroker.broker.metadata import topic_name_invalid
from kbroker.protocol.acls import ALTER_CONFIGS
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.alter_configs import ALTER_CONFIGS as API  # noqa: F401  (the registry reads API)
from kbroker.storage.config_values import normalized, problem as problem_of_topic_configs


def topic_configs_problem(broker, configs: dict[str, str]) -> str | None:
    """Why Kafka refuses a topic's whole set of overrides (storage/config_values.py), the broker's compaction
    lags standing in for those the set does not name."""
    defaults = broker.default_log_config
    return problem_of_topic_configs(configs, {"min.compaction.lag.ms": defaults.min_compaction_lag_ms,
                                              "max.compaction.lag.ms": defaults.max_compaction_lag_ms})


def stored_topic_configs(configs: dict[str, str]) -> dict[str, str]:
    """A checked set as stored: each value as Kafka renders the parsed one, which DescribeConfigs shows."""
    return {key: normalized(key, value) for key, value in configs.items()}


def apply_topic_configs(ctx, name: str, configs: dict[str, str], validate_only: bool) -> tuple[ErrorCode, str | None]:
    """Validate and (unless validate_only) store a topic's complete new override set. In Kafka's order: the
    name, the configs, and only then whether the topic is there."""
    broker = ctx.broker
    if not name:
        return ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed."
    invalid = topic_name_invalid(name)
    if invalid:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, invalid
    problem = topic_configs_problem(broker, configs)
    if problem:
        return ErrorCode.INVALID_CONFIG, problem
    if name not in broker.metadata.topics:   # (Kafka's controller's words)
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
    if not validate_only:
        configs = stored_topic_configs(configs)
        broker.admin.set_topic_configs(name, configs)
        ctx.log.info("topic_configs_altered", topic=name, configs=configs)
    return ErrorCode.NONE, None


def broker_target(ctx, name: str) -> tuple[bool, tuple[ErrorCode, str] | None]:
    """(per_broker, refusal): an empty name is the cluster-wide default, else it must be this broker's id
    (clients send a broker's configs to that broker)."""
    if name == "":
        return False, None
    return True, broker_id_refusal(ctx, name)


async def apply_broker_configs(ctx, name: str, per_broker: bool, texts: dict[str, str],
                               validate_only: bool) -> tuple[ErrorCode, str | None]:
    """Validate and (unless validate_only) store and apply a broker's (or the default's) whole dynamic set."""
    problem = validate(texts, per_broker, ctx.broker.config)
    if problem:   # (INVALID_REQUEST, as Kafka 4 answers a broker config it will not take: tests/reference)
        return ErrorCode.INVALID_REQUEST, problem
    if not validate_only:
        await ctx.broker.admin.set_broker_configs(per_broker, texts)
        ctx.log.info("broker_configs_altered", broker=name or "<default>",
                     configs={k: "(sensitive)" if is_sensitive(k) else v for k, v in texts.items()})
    return ErrorCode.NONE, None


async def set_group_configs(ctx, group: str, configs: dict[str, str], validate_only: bool
                            ) -> tuple[ErrorCode, str | None]:
    """A group's whole new set of configs, checked and (unless validate_only) stored; Kafka checks the name
    first."""
    if not group:
        return ErrorCode.INVALID_REQUEST, "Default group resources are not allowed."
    stored, message = checked_group_configs(configs, ctx.broker.config)
    if message:
        return ErrorCode.INVALID_CONFIG, message
    if not validate_only:
        await ctx.broker.admin.set_group_configs(group, stored)
    return ErrorCode.NONE, None


def resource_error(resource) -> tuple[ErrorCode, str] | None:
    if resource.resource_type not in (TOPIC, BROKER, GROUP):
        return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource.resource_type}"
    return None


def duplicate_keys(configs) -> tuple[ErrorCode, str] | None:
    """Kafka's first check of a resource: a config named twice in it is INVALID_REQUEST, nothing changes."""
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        return ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
    return None


def null_value(configs, deleting=lambda c: False) -> tuple[ErrorCode, str] | None:
    """Kafka's refusal of a config given a null value (other than by an incremental DELETE), whatever the
    resource: INVALID_REQUEST, and nothing of the resource changes."""
    nulls = [c.name for c in configs if c.value is None and not deleting(c)]
    if nulls:   # (every one named, as Kafka does)
        return ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}"
    return None


async def handle(ctx, request):
    responses = []
    for resource in request.resources:
        name = resource.resource_name
        problem = duplicate_keys(resource.configs) or refusal(ctx, resource.resource_type, name, ALTER_CONFIGS) \
            or resource_error(resource) or null_value(resource.configs)
        if problem is None:
            configs = {c.name: c.value for c in resource.configs}
            if resource.resource_type == TOPIC:
                problem = apply_topic_configs(ctx, name, configs, request.validate_only)
            elif resource.resource_type == GROUP:
                problem = await set_group_configs(ctx, name, configs, request.validate_only)
            else:
                per_broker, problem = broker_target(ctx, name)
                if problem is None:
                    problem = await apply_broker_configs(ctx, name, per_broker, configs, request.validate_only)
        responses.append({"error_code": problem[0], "error_message": problem[1],
                          "resource_type": resource.resource_type, "resource_name": name})
    return {"throttle_time_ms": 0, "responses": responses}
