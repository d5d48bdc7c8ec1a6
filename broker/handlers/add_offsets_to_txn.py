"""AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction (sendOffsetsToTransaction)."""

from kbroker.broker.handlers.common import transaction_error, txn_shard, when_replicated
from kbroker.protocol.acls import GROUP, READ
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.add_offsets_to_txn import ADD_OFFSETS_TO_TXN as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    broker = ctx.broker
    error = transaction_error(ctx, request.transactional_id)
    if not error and not ctx.authorized(READ, GROUP, request.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    error = error or broker.coordination.ensure_offsets_topic()
    if not error:
        partition = ("__consumer_offsets", broker.group_coordinator.partition_for(request.group_id))
        error = broker.txn_coordinator.add_partitions(request.transactional_id, request.producer_id,
                                                      request.producer_epoch, [partition], ctx.api_version)
    response = {"throttle_time_ms": 0, "error_code": error}
    return response if error else when_replicated(ctx, *txn_shard(ctx, request.transactional_id), response)
