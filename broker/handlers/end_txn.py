"""EndTxn: commit or abort; answered once the Prepare state is written (markers follow asynchronously)."""

from protocol.messages.end_txn import END_TXN as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    broker = ctx.broker
    error = broker.transaction_coordinator_error(request.transactional_id) or broker.txn_coordinator.end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed, ctx.api_version)
    return {"throttle_time_ms": 0, "error_code": error}
