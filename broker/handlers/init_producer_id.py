"""InitProducerId: a fresh producer id for idempotent producers; for a transactional id, the coordinator's
(epoch bumped, older instances fenced, an open transaction aborted first)."""

from kbroker.broker.handlers.common import txn_shard, when_replicated
from kbroker.protocol.acls import IDEMPOTENT_WRITE, TOPIC, TRANSACTIONAL_ID, WRITE
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
    error = _refusal(ctx, request)
    producer_id = epoch = -1
    if not error:
        error, producer_id, epoch = broker.txn_coordinator.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms, request.producer_id, request.producer_epoch,
            ctx.api_version)
    response = {"throttle_time_ms": 0, "error_code": error, "producer_id": producer_id, "producer_epoch": epoch}
    return response if error else when_replicated(ctx, *txn_shard(ctx, request.transactional_id), response)


def _refusal(ctx, request) -> ErrorCode:
    """Kafka's checks of a transactional producer's request, in its order: Write on the transactional id, the
    producer id and epoch given together or not at all, the id not empty, the timeout within the broker's
    bound; only then whether this broker coordinates the id."""
    if not ctx.authorized(WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if _half_given(request) or not request.transactional_id:
        return ErrorCode.INVALID_REQUEST
    if not 0 < request.transaction_timeout_ms <= ctx.broker.txn_coordinator.config.max_timeout_ms:
        return ErrorCode.INVALID_TRANSACTION_TIMEOUT
    return ctx.broker.coordination.transaction_coordinator_error(request.transactional_id)


def _half_given(request) -> bool:
    """A producer id without its epoch or an epoch without its id (v3+, KIP-360): Kafka refuses either."""
    return (request.producer_id == -1) != (request.producer_epoch == -1)
