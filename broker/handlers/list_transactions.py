"""ListTransactions: transactional ids this broker coordinates, filtered by state, producer id, age (v1) and
a regular expression the whole id must match (v2, KIP-1152; empty or null: every id).

State names the coordinator does not know are reported back in ``unknown_state_filters``; a filter made
only of unknown states matches nothing.
"""

from kbroker.coordinators.transaction.state import TransactionState
from kbroker.protocol.acls import DESCRIBE, TRANSACTIONAL_ID
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.regex import InvalidRegex, compiled
from kbroker.protocol.messages.list_transactions import LIST_TRANSACTIONS as API  # noqa: F401  (the registry reads API)

KNOWN_STATES = {s.label for s in TransactionState}


def handle(ctx, request):
    coordinator = ctx.broker.txn_coordinator
    states = set(request.state_filters)
    unknown = states - KNOWN_STATES
    if states and not states - unknown:
        found = []
    else:
        found = coordinator.list(states - unknown, set(request.producer_id_filters))
    if ctx.api_version >= 1 and request.duration_filter >= 0:
        now = coordinator.now_ms()
        found = [f for f in found
                 if (meta := coordinator.transactions.get(f["transactional_id"])) is not None
                 and meta.start_ms >= 0 and now - meta.start_ms >= request.duration_filter]
    pattern = request.transactional_id_pattern if ctx.api_version >= 2 else None
    if pattern:
        try:   # (RE2's syntax, as Kafka reads the pattern: kbroker.protocol.regex)
            matcher = compiled(pattern)
        except InvalidRegex:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REGULAR_EXPRESSION,
                    "unknown_state_filters": [], "transaction_states": []}
        found = [f for f in found if matcher.fullmatch(f["transactional_id"])]
    found = [f for f in found if ctx.authorized(DESCRIBE, TRANSACTIONAL_ID, f["transactional_id"], log_denied=False)]
    return {"throttle_time_ms": 0, "error_code": 0, "unknown_state_filters": sorted(unknown),
            "transaction_states": found}
