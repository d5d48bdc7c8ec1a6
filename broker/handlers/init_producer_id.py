"""InitProducerId without a transactional id: a fresh producer id at epoch 0 (idempotent producers)."""

from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import INIT_PRODUCER_ID as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    if request.transactional_id is not None:
        # The transaction coordinator is not built yet: say so with Kafka's retriable code.
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "producer_id": -1, "producer_epoch": -1}
    producer_id = ctx.broker.producer_ids.generate()
    ctx.log.info("producer_id_allocated", producer_id=producer_id)
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": producer_id, "producer_epoch": 0}
