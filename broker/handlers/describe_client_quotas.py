"""DescribeClientQuotas: the quota configs of the (user, client id, IP) entities a filter matches."""

from kbroker.broker.configuration.quotas import DEFAULT, IP, SLOTS, entity_components
from kbroker.protocol.acls import DESCRIBE_CONFIGS
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_client_quotas import DESCRIBE_CLIENT_QUOTAS as API  # noqa: F401

EXACT, DEFAULT_MATCH, ANY_MATCH = 0, 1, 2


def _error(error: ErrorCode, message: str | None) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "error_message": message, "entries": None}


def handle(ctx, request):
    if not ctx.cluster_authorized(DESCRIBE_CONFIGS):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)   # (Kafka's: the error's own, so none)
    wanted: dict[int, tuple[int, str | None]] = {}
    for c in request.components:   # (checked in Kafka's order, with its words)
        if not c.entity_type:
            return _error(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if SLOTS.get(c.entity_type) in wanted:
            return _error(ErrorCode.INVALID_REQUEST,
                          f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        if c.entity_type not in SLOTS:
            return _error(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        problem = _match_problem(c.match_type, c.match)
        if problem:
            return _error(ErrorCode.INVALID_REQUEST, problem)
        wanted[SLOTS[c.entity_type]] = (c.match_type, c.match)
    if SLOTS[IP] in wanted and len(wanted) > 1:
        return _error(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP filter component "
                                                 "should not be used with user or clientId filter component.")
    entries = []
    for entity, values in sorted(ctx.broker.quotas.configs.items(), key=lambda kv: str(kv[0])):
        if _matches(entity, wanted, request.strict):
            entries.append({"entity": entity_components(entity),
                            "values": [{"key": k, "value": v} for k, v in sorted(values.items())]})
    # (an empty message, not none: the default of the field in Kafka's generated answer)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": "", "entries": entries}


def _match_problem(match_type: int, match: str | None) -> str | None:
    if match_type == EXACT:
        return None if match is not None else "Request specified MATCH_TYPE_EXACT, but set match string to null."
    if match_type == DEFAULT_MATCH:
        return None if match is None else "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
    if match_type == ANY_MATCH:
        return None if match is None else "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
    return f"Unknown match type {match_type}"


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
