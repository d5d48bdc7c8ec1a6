"""DescribeClientQuotas: the quota configs of the (user, client id, IP) entities a filter matches."""

from kbroker.broker.configuration.quotas import DEFAULT, IP, SLOTS, entity_components
from kbroker.protocol.acls import DESCRIBE_CONFIGS
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_client_quotas import DESCRIBE_CLIENT_QUOTAS as API  # noqa: F401

EXACT, DEFAULT_MATCH, ANY_MATCH = 0, 1, 2


def _error(error: ErrorCode, message: str) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "error_message": message, "entries": None}


def handle(ctx, request):
    if not ctx.cluster_authorized(DESCRIBE_CONFIGS):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed.")
    wanted: dict[int, tuple[int, str | None]] = {}
    for c in request.components:   # (checked in Kafka's order, with its errors)
        if not c.entity_type:
            return _error(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if SLOTS.get(c.entity_type) in wanted:
            return _error(ErrorCode.INVALID_REQUEST, f"Entity type {c.entity_type} appears more than once")
        if c.entity_type not in SLOTS:
            return _error(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        if c.match_type not in (EXACT, DEFAULT_MATCH, ANY_MATCH) or (c.match_type == EXACT) != (c.match is not None):
            return _error(ErrorCode.INVALID_REQUEST, f"Invalid match for entity type {c.entity_type}")
        wanted[SLOTS[c.entity_type]] = (c.match_type, c.match)
    if SLOTS[IP] in wanted and len(wanted) > 1:
        return _error(ErrorCode.INVALID_REQUEST, "An IP filter component is not combined with a user or client id")
    entries = []
    for entity, values in sorted(ctx.broker.quotas.configs.items(), key=lambda kv: str(kv[0])):
        if _matches(entity, wanted, request.strict):
            entries.append({"entity": entity_components(entity),
                            "values": [{"key": k, "value": v} for k, v in sorted(values.items())]})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": entries}


def _matches(entity: tuple, wanted: dict, strict: bool) -> bool:
    for slot, (match_type, match) in wanted.items():
        name = entity[slot]
        if name is None:
            return False
        if match_type == EXACT and name != match:
            return False
        if match_type == DEFAULT_MATCH and name != DEFAULT:
            return False
    if strict:
        return all(entity[slot] is None for slot in SLOTS.values() if slot not in wanted)
    return True
