"""DescribeTransactions: state, producer and partitions of transactional ids."""

from kbroker.coordinators.transaction.coordinator import undescribed
from kbroker.protocol.acls import DESCRIBE, TOPIC, TRANSACTIONAL_ID
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_transactions import DESCRIBE_TRANSACTIONS as API  # noqa: F401


def handle(ctx, request):
    broker = ctx.broker
    states = []
    for transactional_id in request.transactional_ids:
        if not ctx.authorized(DESCRIBE, TRANSACTIONAL_ID, transactional_id):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not transactional_id:
            error = ErrorCode.INVALID_REQUEST
        else:
            error = broker.coordination.transaction_coordinator_error(transactional_id)
        if error:
            states.append(undescribed(transactional_id, error))
        else:
            state = broker.txn_coordinator.describe(transactional_id)
            # (the partitions of topics it may not describe are left out, as Kafka does)
            state["topics"] = [t for t in state.get("topics", []) if ctx.authorized(DESCRIBE, TOPIC, t["topic"],
                                                                                  log_denied=False)]
            states.append(state)
    return {"throttle_time_ms": 0, "transaction_states": states}
