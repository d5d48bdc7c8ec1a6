"""IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on single topic configs."""

from broker.handlers.alter_configs import apply_topic_configs, resource_error
from broker.handlers.describe_configs import refusal
from protocol.acls import ALTER_CONFIGS
from protocol.errors import ErrorCode
from protocol.messages.incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS as API  # noqa: F401  (the registry reads API)
from storage.log_config import TOPIC_CONFIGS

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_CONFIGS = {"cleanup.policy"}


def _apply(current: dict[str, str], ops, default_of) -> tuple[dict[str, str], str | None]:
    updated = dict(current)
    names = [op.name for op in ops]
    for op in ops:
        if names.count(op.name) > 1:
            return current, f"Duplicate config {op.name}"
        if op.name not in TOPIC_CONFIGS:
            return current, f"Unknown topic config name: {op.name}"
        if op.config_operation == SET:
            updated[op.name] = op.value
        elif op.config_operation == DELETE:
            updated.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if op.name not in LIST_CONFIGS:
                return current, f"Config {op.name} is not a list: APPEND and SUBTRACT apply to lists only"
            items = [x for x in updated.get(op.name, default_of(op.name)).split(",") if x]
            change = [x for x in (op.value or "").split(",") if x]
            if op.config_operation == APPEND:
                items += [x for x in change if x not in items]
            else:
                items = [x for x in items if x not in change]
            updated[op.name] = ",".join(items)
        else:
            return current, f"Unknown config operation {op.config_operation}"
    return updated, None


def handle(ctx, request):
    broker = ctx.broker
    responses = []
    for resource in request.resources:
        problem = refusal(ctx, resource.resource_type, resource.resource_name, ALTER_CONFIGS) or resource_error(resource)
        if problem is None:
            meta = broker.metadata.topics.get(resource.resource_name)
            if meta is None:
                problem = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource.resource_name} does not exist")
            else:
                defaults = broker.default_log_config
                updated, message = _apply(meta.configs, resource.configs, defaults.value_of)
                problem = ((ErrorCode.INVALID_CONFIG, message) if message else
                           apply_topic_configs(ctx, meta.name, updated, request.validate_only))
        responses.append({"error_code": problem[0], "error_message": problem[1],
                          "resource_type": resource.resource_type, "resource_name": resource.resource_name})
    return {"throttle_time_ms": 0, "responses": responses}
