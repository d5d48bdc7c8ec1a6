"""DescribeTransactions: state, producer and partitions of transactional ids."""

from protocol.messages.describe_transactions import DESCRIBE_TRANSACTIONS as API  # noqa: F401


def handle(ctx, request):
    broker = ctx.broker
    states = []
    for transactional_id in request.transactional_ids:
        error = broker.transaction_coordinator_error(transactional_id)
        if error:
            states.append({"error_code": error, "transactional_id": transactional_id, "transaction_state": "",
                           "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                           "producer_epoch": -1, "topics": []})
        else:
            states.append(broker.txn_coordinator.describe(transactional_id))
    return {"throttle_time_ms": 0, "transaction_states": states}
