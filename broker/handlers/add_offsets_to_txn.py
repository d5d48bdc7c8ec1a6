"""AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction (sendOffsetsToTransaction)."""

from broker.handlers.common import txn_shard, when_replicated
from protocol.messages.add_offsets_to_txn import ADD_OFFSETS_TO_TXN as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    broker = ctx.broker
    error = broker.transaction_coordinator_error(request.transactional_id) or broker.ensure_offsets_topic()
    if not error:
        partition = ("__consumer_offsets", broker.group_coordinator.partition_for(request.group_id))
        error = broker.txn_coordinator.add_partitions(request.transactional_id, request.producer_id,
                                                      request.producer_epoch, [partition], ctx.api_version)
    response = {"throttle_time_ms": 0, "error_code": error}
    return response if error else when_replicated(ctx, *txn_shard(ctx, request.transactional_id), response)
