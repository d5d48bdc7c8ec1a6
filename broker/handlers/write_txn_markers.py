"""WriteTxnMarkers: the transaction coordinator asks partition leaders to append COMMIT/ABORT markers
(``broker.txn_markers``: appended as acks=all, answered once the ISR has them)."""

from kbroker.broker.transactions.txn_markers import append_markers
from kbroker.protocol.acls import ALTER, CLUSTER_ACTION
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.write_txn_markers import WRITE_TXN_MARKERS as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    if not ctx.cluster_authorized(ALTER, log_denied=False) and not ctx.cluster_authorized(CLUSTER_ACTION):
        return {"markers": [{"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [{"partition_index": i, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
                                            for i in t.partition_indexes]} for t in m.topics]}
            for m in request.markers]}
    return append_markers(ctx.broker, request.markers)
