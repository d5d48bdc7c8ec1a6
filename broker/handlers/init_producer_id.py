"""InitProducerId: a fresh producer id for idempotent producers; for a transactional id, the coordinator's
(epoch bumped, older instances fenced, an open transaction aborted first)."""

from kbroker.broker.handlers.common import transaction_error, txn_shard, when_replicated
from kbroker.protocol.acls import IDEMPOTENT_WRITE, TOPIC, WRITE
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.init_producer_id import INIT_PRODUCER_ID as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    broker = ctx.broker
    if request.transactional_id is None:
        # Idempotence needs IdempotentWrite on the cluster, or Write on some topic (KIP-679).
        if not ctx.cluster_authorized(IDEMPOTENT_WRITE, log_denied=False) and not ctx.authorized_any(WRITE, TOPIC):
            ctx.log.info("idempotent_producer_refused", principal=ctx.connection.principal)
            return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "producer_id": -1,
                    "producer_epoch": -1}
        if _half_given(request):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "producer_id": -1,
                    "producer_epoch": -1}
        producer_id = broker.producer_ids.generate()
        ctx.log.info("producer_id_allocated", producer_id=producer_id)
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": producer_id, "producer_epoch": 0}
    error = transaction_error(ctx, request.transactional_id)
    if error != ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED and _half_given(request):
        error = ErrorCode.INVALID_REQUEST
    producer_id = epoch = -1
    if not error:
        error, producer_id, epoch = broker.txn_coordinator.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms, request.producer_id, request.producer_epoch,
            ctx.api_version)
    response = {"throttle_time_ms": 0, "error_code": error, "producer_id": producer_id, "producer_epoch": epoch}
    return response if error else when_replicated(ctx, *txn_shard(ctx, request.transactional_id), response)


def _half_given(request) -> bool:
    """A producer id without its epoch or an epoch without its id (v3+, KIP-360): Kafka refuses either."""
    return (request.producer_id == -1) != (request.producer_epoch == -1)
