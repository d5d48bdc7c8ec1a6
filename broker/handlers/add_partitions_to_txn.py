"""AddPartitionsToTxn: clients (v0-3) add partitions to their transaction; brokers (v4) verify membership."""

from kbroker.broker.handlers.common import topics_refused, transaction_error, txn_shard, when_replicated
from kbroker.broker.transactions.inter_broker import verify_here
from kbroker.protocol.acls import CLUSTER_ACTION, WRITE
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.add_partitions_to_txn import ADD_PARTITIONS_TO_TXN as API  # noqa: F401


def _results(topics, errors: dict) -> list[dict]:
    """Each topic and partition answered as the request named it, twice if it is named twice (as Kafka does)."""
    return [{"name": t.name, "results_by_partition": [
        {"partition_index": p, "partition_error_code": errors[(t.name, p)]} for p in t.partitions]}
        for t in topics]


def _verified(errors: dict) -> list[dict]:
    """A verification's answer: each partition once, however often it was named (Kafka keys them by partition)."""
    by_topic: dict[str, list] = {}
    for (name, p), error in errors.items():
        by_topic.setdefault(name, []).append({"partition_index": p, "partition_error_code": error})
    return [{"name": name, "results_by_partition": partitions} for name, partitions in by_topic.items()]


def _add(ctx, transactional_id: str, producer_id: int, epoch: int, topics, verify_only: bool) -> dict:
    broker = ctx.broker
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    if verify_only:   # a broker asking (v4, ClusterAction checked): the producer was checked at its Produce
        return verify_here(broker, transactional_id, producer_id, epoch, wanted)
    error = transaction_error(ctx, transactional_id)
    if error:
        return {tp: error for tp in wanted}
    refused = topics_refused(ctx, WRITE, {t.name for t in topics})
    if refused:
        return {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp[0] in refused else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in wanted}
    # The partitions may be led anywhere in the cluster: it is the metadata that knows them.
    topics = broker.metadata.topics
    unknown = [tp for tp in wanted if tp[0] not in topics or not 0 <= tp[1] < topics[tp[0]].partitions]
    if unknown:
        return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in wanted}
    error = broker.txn_coordinator.add_partitions(transactional_id, producer_id, epoch, wanted, ctx.api_version)
    return {tp: error for tp in wanted}


def handle(ctx, request):
    if ctx.api_version <= 3:
        errors = _add(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                      request.v3_and_below_producer_epoch, request.v3_and_below_topics, False)
        response = {"throttle_time_ms": 0,
                    "results_by_topic_v3_and_below": _results(request.v3_and_below_topics, errors)}
        return when_replicated(ctx, *txn_shard(ctx, request.v3_and_below_transactional_id), response)
    if not ctx.cluster_authorized(CLUSTER_ACTION):   # v4+ is the brokers' own request
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results_by_transaction": []}
    results, written = [], []
    for txn in request.transactions:
        if not txn.verify_only:
            written += txn_shard(ctx, txn.transactional_id)[1]
        errors = _add(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics, txn.verify_only)
        results.append({"transactional_id": txn.transactional_id, "topic_results":
                        _verified(errors) if txn.verify_only else _results(txn.topics, errors)})
    response = {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}
    return when_replicated(ctx, "__transaction_state", written, response)
