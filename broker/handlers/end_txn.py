"""EndTxn: commit or abort.

The outcome is decided once the Prepare state is written (and on the state
partition's ISR). Where this broker writes every marker itself, the markers
and the Complete state follow right after the answer left and before the
connection reads on (``run_after_response``): the client's next request finds
the transaction complete, and the answer does not wait for two appends. Where
markers go to other brokers, the answer waits (up to ``MARKER_WAIT_S``) for
them and the Complete state, so the producer's next transaction does not start
by bouncing off CONCURRENT_TRANSACTIONS and its client's retry backoff; if
they are slow (a partition leader is away), it goes anyway and they complete
later.

From v5 (transactions V2, KIP-890 part 2) the answer carries the producer id
and epoch the producer's next transaction uses: the transaction ended under
the next epoch.
"""

import asyncio

from kbroker.broker.handlers.common import transaction_error, txn_shard, when_replicated
from kbroker.protocol.messages.end_txn import END_TXN as API  # noqa: F401  (the registry reads API)

MARKER_WAIT_S = 5.0


def handle(ctx, request):
    broker = ctx.broker
    error = transaction_error(ctx, request.transactional_id) or broker.txn_coordinator.end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed, ctx.api_version,
        ctx.run_after_response)
    response = {"throttle_time_ms": 0, "error_code": error}
    if ctx.api_version >= 5 and not error:   # (transactions V2: the producer goes on under the bumped epoch)
        response["producer_id"], response["producer_epoch"] = \
            broker.txn_coordinator.producer_after_end(request.transactional_id)
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
