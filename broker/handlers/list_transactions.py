"""ListTransactions: transactional ids this broker coordinates, filtered by state, producer id and age (v1)."""

from coordinators.transaction.state import TransactionState
from protocol.messages.list_transactions import LIST_TRANSACTIONS as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    known = {s.label for s in TransactionState}
    states = set(request.state_filters)
    found = ctx.broker.txn_coordinator.list(states & known, set(request.producer_id_filters))
    if ctx.api_version >= 1 and request.duration_filter >= 0:
        now = ctx.broker.txn_coordinator.now_ms()
        coordinator = ctx.broker.txn_coordinator
        found = [f for f in found
                 if (meta := coordinator.transactions.get(f["transactional_id"])) is not None
                 and meta.start_ms >= 0 and now - meta.start_ms >= request.duration_filter]
    if states - known:
        found = [] if not states & known else found
    return {"throttle_time_ms": 0, "error_code": 0, "unknown_state_filters": sorted(states - known),
            "transaction_states": found}
