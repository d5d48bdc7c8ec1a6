"""AlterClientQuotas: set or remove quota keys of (user, client id) and IP entities, persisted and applied at once.

Checked as Kafka's controller checks them, in its order: an entity has at least one component, each type
once, each a user, client id or IP; an IP is never combined with the other two and names an address or a
host that resolves; a key is set once per entry, to a positive value, of its entity's kind (a user's or
client id's byte rates and request percentage; an IP's connection_creation_rate), whole where Kafka's type
is integral. Removing a key is never refused."""

from kbroker.broker.configuration.quotas import (CLIENT_KEYS, CONNECTION_RATE, FETCH, IP, IP_KEYS, PRODUCE, SLOTS,
                                                 entity_from_components)
from kbroker.broker.network.connection_limits import resolve
from kbroker.protocol.acls import ALTER_CONFIGS
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.alter_client_quotas import ALTER_CLIENT_QUOTAS as API  # noqa: F401

INTEGRAL = {PRODUCE: 2**63 - 1, FETCH: 2**63 - 1, CONNECTION_RATE: 2**31 - 1}   # key -> its type's largest value


async def _problem(entry) -> str | None:
    kinds = [e.entity_type for e in entry.entity]
    if not kinds:
        return "Invalid empty client quota entity"
    if len(set(kinds)) != len(kinds):
        return f"Duplicate entity type in {kinds}"
    if any(k not in SLOTS for k in kinds):
        return f"Unsupported quota entity type in {kinds}"
    keys = CLIENT_KEYS
    if IP in kinds:
        if len(kinds) > 1:
            return "Invalid quota entity combination, an IP entity is not combined with a user or client id"
        name = entry.entity[0].entity_name
        if name is not None and not await resolve(name):
            return f"{name} is not a valid IP or resolvable host."
        keys = IP_KEYS
    ops = [op.key for op in entry.ops]
    if len(set(ops)) != len(ops):
        return f"Duplicate quota key in {ops}"
    for op in entry.ops:
        if op.remove:
            continue
        if op.key not in keys:
            return f"Invalid configuration key {op.key}"
        if not op.value > 0:
            return f"Quota {op.key} must be greater than 0, not {op.value}"
        if op.key in INTEGRAL and not float(op.value).is_integer():
            return f"{op.key} cannot be a fractional value."
        if op.value > INTEGRAL.get(op.key, float("inf")):
            return f"Proposed value for {op.key} is too large"
    return None


async def handle(ctx, request):
    allowed = ctx.cluster_authorized(ALTER_CONFIGS)
    results = []
    for entry in request.entries:
        echo = [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]
        problem = None if allowed else "Authorization failed."
        error = ErrorCode.NONE if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if allowed:
            problem = await _problem(entry)
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
