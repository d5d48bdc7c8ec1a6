"""IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on single topic or broker configs; SET and DELETE
on loggers' levels (BROKER_LOGGER), on a group's configs (GROUP, KIP-848/932) and on client metrics
subscriptions (CLIENT_METRICS, KIP-714: a subscription whose configs all go is removed)."""

from kbroker.broker.configuration.config import DEFINITIONS
from kbroker.broker.configuration.dynamic_config import LIST_KEYS, text_of
from kbroker.broker.handlers.alter_configs import (apply_broker_configs, apply_topic_configs, broker_target,
                                                   duplicate_keys, null_value, resource_error,
                                                   set_group_configs)
from kbroker.broker.configuration.group_configs import CONFIGS as GROUP_CONFIGS
from kbroker.broker.configuration import client_metrics
from kbroker.broker.handlers.describe_configs import (BROKER_LOGGER, CLIENT_METRICS, GROUP, TOPIC, broker_id_refusal,
                                                      refusal)
from kbroker.broker.configuration.log_levels import KAFKA_LEVELS, LEVELS, NAMES, ROOT
from kbroker.protocol.acls import ALTER_CONFIGS
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS as API  # noqa: F401  (the registry reads API)
from kbroker.storage.config_values import java_split
from kbroker.storage.java_order import hash_order
from kbroker.storage.log_config import LogConfig

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# The topic configs Kafka types LIST, which APPEND and SUBTRACT apply to
TOPIC_LIST_KEYS = frozenset({"cleanup.policy", "leader.replication.throttled.replicas",
                             "follower.replication.throttled.replicas"})


def _apply(current: dict[str, str], ops, known, list_keys, default_of, kind: str) -> tuple[dict[str, str], str | None]:
    """``current`` (the stored set) after ``ops``; APPEND and SUBTRACT start from the stored value or else the
    config's default, as Kafka's prepareIncrementalConfigs does. ``known`` None: any name (custom broker
    configs). Kafka's controller takes the ops in its hash map's order and checks names after every op (a
    DELETE of a name no config has is no change), so where several fail, the one named is Kafka's."""
    updated = dict(current)
    by_name = {op.name: op for op in ops}
    if len(by_name) < len(ops):
        return current, f"Duplicate config {next(n for n in by_name if [op.name for op in ops].count(n) > 1)}"
    for op in (by_name[name] for name in hash_order(by_name)):
        if op.config_operation == SET:
            updated[op.name] = op.value
        elif op.config_operation == DELETE:
            updated.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            if op.name not in list_keys:
                verb = "APPEND" if op.config_operation == APPEND else "SUBTRACT"
                return current, f"Can't {verb} to key {op.name} because its type is not LIST."
            stored = updated[op.name] if op.name in updated else default_of(op.name)
            items = [x for x in (stored or "").split(",") if x]
            change = java_split(op.value or "")
            if op.config_operation == APPEND:
                items += [x for x in change if x not in items]
            else:
                items = [x for x in items if x not in change]
            updated[op.name] = ",".join(items)
        else:
            return current, f"Unknown config operation {op.config_operation}"
    unknown = [name for name in hash_order(by_name) if known is not None and name not in known and name in updated]
    if unknown:
        return current, f"Unknown {kind} config name: {unknown[0]}"
    return updated, None


def _prepare_broker_ops(current: dict[str, str], ops) -> tuple[dict[str, str], tuple[ErrorCode, str] | None]:
    """A broker's (or the default's) dynamic layer after ``ops``, taken in request order as Kafka's broker takes
    them before it forwards the change: APPEND and SUBTRACT on a LIST config only (INVALID_CONFIG otherwise),
    from the layer's value or else the config's own default, parts split as Java splits them. (On a name its
    KafkaConfig does not define, Kafka's broker fails with UNKNOWN_SERVER_ERROR; kbroker names the config.)"""
    updated = dict(current)
    for op in ops:
        if op.config_operation == SET:
            updated[op.name] = op.value
        elif op.config_operation == DELETE:
            updated.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            verb = "append" if op.config_operation == APPEND else "subtract"
            if op.name not in DEFINITIONS:
                return current, (ErrorCode.INVALID_CONFIG, f"Unknown config name: {op.name}")
            if op.name not in LIST_KEYS:
                return current, (ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: "
                                                           f"{op.name}")
            old = updated.get(op.name)
            old = old if old is not None else text_of(DEFINITIONS[op.name][1]) or ""
            parts = java_split(old) if old else []
            if op.config_operation == APPEND:
                parts += [x for x in java_split(op.value or "") if x not in parts]
            else:
                for x in java_split(op.value or ""):   # (Scala's diff: one occurrence for each)
                    if x in parts:
                        parts.remove(x)
            updated[op.name] = ",".join(parts)
        else:
            return current, (ErrorCode.INVALID_REQUEST, f"Unknown operations type {op.config_operation}")
    return updated, None


def _alter_loggers(ctx, name: str, ops, validate_only: bool) -> tuple[ErrorCode, str | None]:
    """BROKER_LOGGER: SET a logger's level or DELETE it (back to the level above); not persisted, as in Kafka."""
    wrong_id = broker_id_refusal(ctx, name, logger=True)
    if wrong_id:
        return wrong_id
    changes = []
    for op in ops:
        if op.config_operation not in (SET, DELETE):
            return ErrorCode.INVALID_REQUEST, "APPEND and SUBTRACT are not allowed for the broker logger resource"
        if not LEVELS.is_logger(op.name):
            return ErrorCode.INVALID_CONFIG, f"Logger {op.name} does not exist!"
        if op.config_operation == DELETE:
            if op.name == ROOT:
                return ErrorCode.INVALID_CONFIG, "Removing the log level of the root logger is not allowed"
            changes.append((op.name, None))
            continue
        level = KAFKA_LEVELS.get((op.value or "").upper())
        if level is None:
            return ErrorCode.INVALID_CONFIG, (f"Cannot set the log level of {op.name} to {op.value} as it is not a "
                                              f"supported log level. Valid levels are {', '.join(KAFKA_LEVELS)}")
        changes.append((op.name, level))
    if not validate_only:
        for logger, level in changes:
            LEVELS.set(logger, level)
        ctx.log.warning("log_levels_altered", levels={n: NAMES.get(v, v) if v is not None else None
                                                     for n, v in changes})
    return ErrorCode.NONE, None


async def _alter_group(ctx, group: str, ops, validate_only: bool) -> tuple[ErrorCode, str | None]:
    """GROUP (KIP-848/932): SET and DELETE of a group's configs (none is a list), the whole resulting set
    checked as Kafka's controller checks it (broker/configuration/group_configs.py)."""
    broker = ctx.broker
    stored = {k: v for k, v in broker.metadata.group_configs.get(group, {}).items() if k in GROUP_CONFIGS}
    updated, message = _apply(stored, ops, None, set(), lambda key: None, "group")
    if message:
        return ErrorCode.INVALID_CONFIG, message
    return await set_group_configs(ctx, group, updated, validate_only)



async def _alter_client_metrics(ctx, name: str, ops, validate_only: bool) -> tuple[ErrorCode, str | None]:
    """CLIENT_METRICS (KIP-714): SET and DELETE of a subscription's ``metrics``, ``interval.ms`` and ``match``,
    as Kafka checks them (it refuses APPEND and SUBTRACT there, its lists notwithstanding)."""
    broker = ctx.broker
    for op in ops:
        if op.config_operation in (APPEND, SUBTRACT):
            verb = "append" if op.config_operation == APPEND else "subtract"
            return ErrorCode.INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {op.name}"
    updated, message = _apply(broker.metadata.client_metrics.get(name, {}), ops, None, set(), lambda key: "",
                              "client metrics")
    if message:
        return ErrorCode.INVALID_REQUEST, message
    problem = client_metrics.error(name, updated)
    if problem:
        return problem
    if not validate_only:
        await broker.admin.set_client_metrics(name, updated)
    return ErrorCode.NONE, None


def _duplicated(request, resource) -> str | None:
    """Kafka's first check, before any other: a resource named twice in the request, or a config twice in a
    resource, is INVALID_REQUEST and changes nothing."""
    key = (resource.resource_type, resource.resource_name)
    if sum((r.resource_type, r.resource_name) == key for r in request.resources) > 1:
        return "Error due to duplicate resources"
    duplicated = duplicate_keys(resource.configs)
    return duplicated[1] if duplicated else None


async def handle(ctx, request):
    broker = ctx.broker
    responses = []
    for resource in request.resources:
        name = resource.resource_name
        duplicated = _duplicated(request, resource)
        if duplicated:
            responses.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": duplicated,
                              "resource_type": resource.resource_type, "resource_name": name})
            continue
        unset = null_value(resource.configs, lambda op: op.config_operation == DELETE)
        if unset and not refusal(ctx, resource.resource_type, name, ALTER_CONFIGS):
            responses.append({"error_code": unset[0], "error_message": unset[1],
                              "resource_type": resource.resource_type, "resource_name": name})
            continue
        if resource.resource_type == BROKER_LOGGER:
            # (a logger's refusal without words: Kafka's broker answers it before its config checks, bare)
            refused = refusal(ctx, BROKER_LOGGER, name, ALTER_CONFIGS)
            problem = ((ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None) if refused
                       else _alter_loggers(ctx, name, resource.configs, request.validate_only))
        elif resource.resource_type == GROUP:
            problem = refusal(ctx, GROUP, name, ALTER_CONFIGS) or \
                await _alter_group(ctx, name, resource.configs, request.validate_only)
        elif resource.resource_type == CLIENT_METRICS:
            problem = refusal(ctx, CLIENT_METRICS, name, ALTER_CONFIGS) or \
                await _alter_client_metrics(ctx, name, resource.configs, request.validate_only)
        else:
            problem = refusal(ctx, resource.resource_type, name, ALTER_CONFIGS) or resource_error(resource)
        if problem is None and resource.resource_type == TOPIC:
            meta = broker.metadata.topics.get(name)
            # (APPEND and SUBTRACT start from Kafka's own default, not the broker's, as its controller does;
            # the name, the resulting set and the topic's existence are checked after them, in that order)
            updated, message = _apply(meta.configs if meta else {}, resource.configs, None, TOPIC_LIST_KEYS,
                                      LogConfig().value_of, "topic")
            problem = ((ErrorCode.INVALID_CONFIG, message) if message else
                       apply_topic_configs(ctx, name, updated, request.validate_only))
        elif problem is None and resource.resource_type not in (GROUP, CLIENT_METRICS):   # BROKER
            per_broker, problem = broker_target(ctx, name)
            if problem is None:
                updated, problem = _prepare_broker_ops(broker.dynamic.layer(per_broker), resource.configs)
                problem = problem or await apply_broker_configs(ctx, name, per_broker, updated, request.validate_only)
        responses.append({"error_code": problem[0], "error_message": problem[1],
                          "resource_type": resource.resource_type, "resource_name": name})
    return {"throttle_time_ms": 0, "responses": responses}
