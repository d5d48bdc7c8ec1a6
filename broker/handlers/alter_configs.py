"""AlterConfigs (legacy): replace a topic's whole set of config overrides.

Changes persist in the metadata store and apply to the topic's logs at once.
"""

from broker.handlers.describe_configs import BROKER, TOPIC, refusal
from protocol.acls import ALTER_CONFIGS
from protocol.errors import ErrorCode
from protocol.messages.alter_configs import ALTER_CONFIGS as API  # noqa: F401  (the registry reads API)
from storage.log_config import validate_topic_config


def apply_topic_configs(ctx, name: str, configs: dict[str, str], validate_only: bool) -> tuple[ErrorCode, str | None]:
    """Validate and (unless validate_only) store a topic's complete new override set."""
    broker = ctx.broker
    if name not in broker.metadata.topics:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist"
    for key, value in configs.items():
        problem = validate_topic_config(key, value)
        if problem:
            return ErrorCode.INVALID_CONFIG, problem
    if not validate_only:
        broker.set_topic_configs(name, configs)
        ctx.log.info("topic_configs_altered", topic=name, configs=configs)
    return ErrorCode.NONE, None


def resource_error(resource) -> tuple[ErrorCode, str] | None:
    if resource.resource_type == BROKER:
        return ErrorCode.INVALID_REQUEST, "Dynamic broker configs are not supported; set them in server.properties"
    if resource.resource_type != TOPIC:
        return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource.resource_type}"
    return None


def handle(ctx, request):
    responses = []
    for resource in request.resources:
        problem = refusal(ctx, resource.resource_type, resource.resource_name, ALTER_CONFIGS) or resource_error(resource)
        if problem is None:
            configs = {c.name: c.value for c in resource.configs if c.value is not None}
            problem = apply_topic_configs(ctx, resource.resource_name, configs, request.validate_only)
        responses.append({"error_code": problem[0], "error_message": problem[1],
                          "resource_type": resource.resource_type, "resource_name": resource.resource_name})
    return {"throttle_time_ms": 0, "responses": responses}
