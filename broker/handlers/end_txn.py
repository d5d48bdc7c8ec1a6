"""EndTxn: commit or abort.

The outcome is decided once the Prepare state is written; the response then
waits (up to ``MARKER_WAIT_S``) for the markers and the Complete state, so the
producer's next transaction does not start by bouncing off
CONCURRENT_TRANSACTIONS and its client's retry backoff. If markers are slow
(a partition leader is away), the answer goes anyway and they complete later.
"""

import asyncio

from kbroker.broker.handlers.common import transaction_error, txn_shard, when_replicated
from kbroker.protocol.messages.end_txn import END_TXN as API  # noqa: F401  (the registry reads API)

MARKER_WAIT_S = 5.0


def handle(ctx, request):
    broker = ctx.broker
    error = transaction_error(ctx, request.transactional_id) or broker.txn_coordinator.end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed, ctx.api_version)
    response = {"throttle_time_ms": 0, "error_code": error}
    completion = None if error else broker.txn_coordinator.completion(request.transactional_id)
    if completion is None:
        return response if error else when_replicated(ctx, *txn_shard(ctx, request.transactional_id), response)

    async def after_markers():
        try:
            await asyncio.wait_for(asyncio.shield(completion), MARKER_WAIT_S)
        except Exception:   # a timeout or a failed write: decided already, the markers finish in the background
            pass
        return response

    return when_replicated(ctx, *txn_shard(ctx, request.transactional_id), asyncio.ensure_future(after_markers()))
