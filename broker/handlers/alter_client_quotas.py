"""AlterClientQuotas: set or remove quota keys of (user, client id) entities, persisted and applied at once."""

from kbroker.broker.configuration.quotas import CLIENT_ID, QUOTA_KEYS, USER, entity_from_components
from kbroker.protocol.acls import ALTER_CONFIGS
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.alter_client_quotas import ALTER_CLIENT_QUOTAS as API  # noqa: F401


def _problem(entry) -> str | None:
    kinds = [e.entity_type for e in entry.entity]
    if not kinds:
        return "An entity needs at least one component"
    if len(set(kinds)) != len(kinds):
        return f"Duplicate entity type in {kinds}"
    if any(k not in (USER, CLIENT_ID) for k in kinds):
        return f"Unsupported quota entity type in {kinds}"
    for op in entry.ops:
        if op.key not in QUOTA_KEYS:
            return f"Invalid configuration key {op.key}"
        if not op.remove and not op.value > 0:
            return f"Quota {op.key} must be positive, not {op.value}"
        if not op.remove and op.key != "request_percentage" and not float(op.value).is_integer():
            return f"Quota {op.key} must be a whole number of bytes per second, not {op.value}"
    return None


async def handle(ctx, request):
    allowed = ctx.cluster_authorized(ALTER_CONFIGS)
    results = []
    for entry in request.entries:
        echo = [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]
        problem = None if allowed else "Authorization failed."
        error = ErrorCode.NONE if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if allowed:
            problem = _problem(entry)
            error = ErrorCode.INVALID_REQUEST if problem else ErrorCode.NONE
        if not problem and not request.validate_only:
            entity = entity_from_components([(e.entity_type, e.entity_name) for e in entry.entity])
            values = dict(ctx.broker.quotas.configs.get(entity, {}))
            for op in entry.ops:
                if op.remove:
                    values.pop(op.key, None)
                else:
                    values[op.key] = op.value
            await ctx.broker.admin.set_quotas(entity, values)
            ctx.log.info("client_quotas_altered", entity=entity, quotas=values)
        results.append({"error_code": error, "error_message": problem, "entity": echo})
    return {"throttle_time_ms": 0, "entries": results}
