"""Produce: validate and append each partition's batch; acks 0, 1 and all (-1).

A transactional batch for a partition where its producer has no open
transaction yet (or one under another epoch) is first verified with the
transaction coordinator (AddPartitionsToTxn v4, verify only: KIP-890 part 1);
a partition that was not added to the transaction gets INVALID_TXN_STATE
(TRANSACTION_ABORTABLE from v11) and nothing is written. From v12
(transactions V2, KIP-890 part 2) the leader adds the partition to the
transaction itself instead, and appends once the coordinator has that on its
state partition's ISR.

A compressed batch for a compacted topic has its records read on a worker
thread before anything is appended (``_prepare_then_handle``): a batch of a
few kilobytes may decompress to its bound (``kbroker.compression.max.ratio``),
which must not hold the event loop. So is a batch whose topic's
``compression.type`` names another codec than the batch's: it is recompressed
to that codec, at the topic's ``compression.<codec>.level``, as Kafka's broker
recompresses, and appended in place of what was sent (the producer's quota
counts what it sent). Requests on one connection still take effect in order,
since the connection awaits each before it reads the next.

Produce v13 names topics by id (KIP-516, broker/partitions/topic_ids.py): an id no topic has is UNKNOWN_TOPIC_ID, and
the id is checked again at the append, after any wait, so a write never lands in a topic recreated under
the same name. From v10 a partition refused with NOT_LEADER_OR_FOLLOWER carries its current leader and the
answer that leader's endpoint (KIP-951).
"""

import asyncio

from kbroker.broker.network.context import CLOSE_CONNECTION, NO_RESPONSE
from kbroker.broker.handlers.common import LeaderDiscovery, last_of_each, partition_exists, resolve_topic_ids
from kbroker.broker.partitions.replica_manager import refused_append
from kbroker.broker.configuration.quotas import PRODUCE, throttle_for
from kbroker.protocol.acls import TOPIC, TRANSACTIONAL_ID, WRITE
from kbroker.protocol.error_messages import kafka_message
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.produce import PRODUCE as API  # noqa: F401  (the registry reads API)
from kbroker.protocol.record_check import NO_KEY, check_keyed_batch
from kbroker.protocol.records import (ATTRIBUTES_OFFSET, COMPRESSION_MASK, HEADER_SIZE, MAGIC_OFFSET, TRANSACTIONAL_BIT,
                                      BatchHeader, InvalidBatch, recompress, validate_produce_records)


_TRANSACTIONAL_BYTE = ATTRIBUTES_OFFSET + 1   # (the low byte of a batch's attributes, where its flags are)
ZSTD = 4   # (the codec id in those attributes)


def _flags(records) -> int:
    """The low byte of a v2 batch's attributes (codec and transactional flag), read without parsing the batch;
    0 for records too short to hold it or of an older magic (a v0/v1 message set has no such byte)."""
    if records is None or len(records) <= _TRANSACTIONAL_BYTE or records[MAGIC_OFFSET] != 2:
        return 0
    return records[_TRANSACTIONAL_BYTE]


def _start_verification(rm, topic: str, index: int, records, supports_epoch_bump: bool
                        ) -> tuple[int, int, BatchHeader] | None:
    """(producer id, epoch, validated header) of a transactional batch opening a transaction in this partition,
    else None; for such a batch the partition notes the verification (Kafka's verification state: a later
    batch cannot pass this one's sequence while it is verified). (The append takes the header as validated:
    the CRC pass over the batch is made once.)"""
    partition = rm.get(topic, index)
    if partition is None or records is None or len(records) < HEADER_SIZE:
        return None   # the append reports what is wrong
    # The header alone decides the common case (a transaction already open here) without a CRC pass;
    # the append validates the batch in full either way.
    header = BatchHeader.parse(records)
    state = partition.log.producer_state
    if not header.is_transactional:
        return None
    known = state.producers.get(header.producer_id)
    if header.producer_id in state.ongoing and known is not None and header.producer_epoch == known.epoch:
        return None   # (another epoch is a transaction after the open one, whose marker is not here yet)
    try:
        header = validate_produce_records(records, partition.log.config.max_message_bytes)
    except InvalidBatch:
        return None   # a bad batch gets its own error from the append, not a verification
    if known is not None and header.producer_epoch < known.epoch:
        return None   # a stale epoch: the append answers INVALID_PRODUCER_EPOCH, as Produce does
    state.start_verification(header.producer_id, header.base_sequence, header.producer_epoch, supports_epoch_bump,
                             rm.now_ms())
    return header.producer_id, header.producer_epoch, header


def _unauthorized(ctx, request) -> dict[tuple[str, int], ErrorCode]:
    """The partitions this principal may not write (Write on the transactional id, then on each topic). A
    request naming no transactional id may carry no transactional batch, whatever the authorizer: Kafka
    refuses every partition of it TRANSACTIONAL_ID_AUTHORIZATION_FAILED (no coordinator could end the
    transaction such a batch opens, which would hold its partition's last stable offset for ever)."""
    if request.transactional_id is None and any(_flags(p.records) & TRANSACTIONAL_BIT
                                                for t in request.topic_data for p in t.partition_data):
        return {(t.name, p.index): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                for t in request.topic_data for p in t.partition_data}
    if ctx.broker.authorizer is None:
        return {}
    txn_denied = request.transactional_id is not None and \
        not ctx.authorized(WRITE, TRANSACTIONAL_ID, request.transactional_id)
    refused = {}
    for topic in request.topic_data:
        if txn_denied or not ctx.authorized(WRITE, TOPIC, topic.name):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if txn_denied \
                else ErrorCode.TOPIC_AUTHORIZATION_FAILED
            refused.update({(topic.name, p.index): error for p in topic.partition_data})
    return refused


def _off_the_loop(rm, request, refused) -> dict:
    """(topic, partition) -> (records, config, codec) of each batch whose records must be read before the append,
    which can take long: a compressed batch bound for a compacted topic (its keys), and a batch whose topic's
    compression.type names another codec than the batch's (recompressed to it; ``codec``, else None)."""
    found = {}
    for topic in request.topic_data:
        for pdata in topic.partition_data:
            tp = (topic.name, pdata.index)
            records = pdata.records
            if tp in refused or records is None or len(records) < HEADER_SIZE:
                continue
            partition = rm.get(*tp)
            if partition is None:
                continue
            config = partition.log.config
            target = config.target_codec
            if not config.compact and target is None:
                continue
            header = BatchHeader.parse(records)
            if header.is_control:
                continue
            codec = target if target is not None and target != header.compression else None
            if codec is not None or (config.compact and header.compression):
                found[tp] = (records, config, codec)
    return found


def _prepare(records, config, codec: int | None) -> tuple[bytes | None, InvalidBatch | None]:
    """On a worker thread: (the batch recompressed to ``codec``, or None to keep it; why it cannot go to its
    topic, or None). A compacted topic's batch has its keys read first. A batch whose framing or CRC is wrong
    is left to the append, which answers it as for any topic."""
    try:
        header = validate_produce_records(records, config.max_message_bytes)
    except InvalidBatch:
        return None, None
    try:
        if config.compact:
            check_keyed_batch(records, 0, header, config.max_inflated_bytes)
        if codec is None:
            return None, None
        return recompress(records, header, codec, config.compression_level(codec), config.max_inflated_bytes), None
    except InvalidBatch as exc:
        return None, exc


async def _prepare_then_handle(ctx, request, refused, batches: dict):
    """Read the records of the batches that need it on worker threads (a batch may take up to its decompression
    bound: the event loop serves everyone else meanwhile), then produce as usual, the recompressed batches in
    place of what was sent."""
    loop = asyncio.get_running_loop()
    work = {tp: loop.run_in_executor(None, _prepare, records, config, codec)
            for tp, (records, config, codec) in batches.items()}
    checked = {}
    recompressed = {}
    for tp, done in work.items():
        records, refusal = await done
        if records is not None:
            recompressed[tp] = records
        if batches[tp][1].compact or refusal is not None:
            checked[tp] = refusal
    for topic in request.topic_data:
        for pdata in topic.partition_data:
            records = recompressed.get((topic.name, pdata.index))
            if records is not None:
                pdata["sent_bytes"] = len(pdata.records)   # (what the client's quota counts)
                pdata.records = records
    result = _handle(ctx, request, refused, checked)
    return await result if asyncio.iscoroutine(result) else result


def _resolve_ids(ctx, request) -> None:
    """Produce v13: each topic gets the name its id has now; topics whose id no topic has are set aside in
    ``request["unknown_topics"]``, and ``request["asked_ids"]`` maps each name to the id it was asked by."""
    known, unknown = resolve_topic_ids(ctx, request.topic_data)
    request["topic_data"], request["unknown_topics"] = known, unknown
    request["asked_ids"] = {t.name: bytes(t.topic_id) for t in known}


def _unknown_ids(request) -> list[dict]:
    return [{"topic_id": bytes(t.topic_id), "partition_responses": [{
        "index": p.index, "error_code": ErrorCode.UNKNOWN_TOPIC_ID, "base_offset": -1, "log_append_time_ms": -1,
        "log_start_offset": -1, "error_message": kafka_message(ErrorCode.UNKNOWN_TOPIC_ID)}
        for p in t.partition_data]} for t in request.get("unknown_topics", ())]


def handle(ctx, request):
    if ctx.api_version >= 13:
        _resolve_ids(ctx, request)
    request["topic_data"] = last_of_each(request.topic_data, "partition_data", "index")
    refused = _unauthorized(ctx, request)
    if ctx.api_version < 7:
        refused.update(_zstd_too_early(ctx, request, refused))
    batches = _off_the_loop(ctx.broker.replica_manager, request, refused)
    if batches:
        return _prepare_then_handle(ctx, request, refused, batches)
    return _handle(ctx, request, refused, None)


def _zstd_too_early(ctx, request, refused) -> dict[tuple[str, int], ErrorCode]:
    """Produce before v7 may not carry zstd (KIP-110): Kafka refuses such a batch of a partition it has
    UNSUPPORTED_COMPRESSION_TYPE (one it does not have is answered as such first)."""
    rm = ctx.broker.replica_manager
    return {(t.name, p.index): ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
            for t in request.topic_data for p in t.partition_data
            if (t.name, p.index) not in refused and _flags(p.records) & COMPRESSION_MASK == ZSTD
            and rm.get(t.name, p.index) is not None}


def _handle(ctx, request, refused, checked: dict | None):
    """``checked``: (topic, partition) -> None where the records were read and pass, or why they do not."""
    if request.transactional_id is None:
        return _append_all(ctx, request, refused, checked=checked)
    rm = ctx.broker.replica_manager
    to_verify: dict[tuple[str, int], tuple[int, int]] = {}
    validated: dict[tuple[str, int], BatchHeader] = {}
    for topic in request.topic_data:
        for pdata in topic.partition_data:
            if (topic.name, pdata.index) in refused:
                continue
            found = _start_verification(rm, topic.name, pdata.index, pdata.records, ctx.api_version >= 12)
            if found is not None:
                to_verify[(topic.name, pdata.index)] = found[:2]
                validated[(topic.name, pdata.index)] = found[2]
    if not to_verify:
        return _append_all(ctx, request, refused, checked=checked)
    return _verify_then_append(ctx, request, to_verify, refused, validated, checked)


def _record_errors(record_errors, topic: str, index: int) -> tuple:
    """Each refused record's words as Kafka's validator gives them (a keyless record names its partition)."""
    return tuple((n, f"{why} in topic partition {topic}-{index}" if why == NO_KEY else why)
                 for n, why in record_errors)


def _told(error: int, record_errors, reason: str | None) -> str | None:
    """A refused partition's message as Kafka's answers it: words only where records were refused one by one
    (its RecordValidationException); none otherwise, the error's own code saying it (kbroker's fuller reason
    goes to the log). An unknown topic id keeps the error's words, as Kafka's."""
    if error == ErrorCode.UNKNOWN_TOPIC_ID:
        return reason
    if not record_errors:
        return None
    if error == ErrorCode.INVALID_TIMESTAMP:
        return "One or more records have been rejected due to invalid timestamp"
    shown = ", ".join(f"RecordError(batchIndex={n}, message='{why}')" for n, why in record_errors[:3])
    return (f"One or more records have been rejected due to {len(record_errors)} record errors in total, and "
            f"only showing the first three errors at most: [{shown}]")


_REFUSALS = {ErrorCode.TOPIC_AUTHORIZATION_FAILED: "not authorized to write to the topic",
             ErrorCode.UNSUPPORTED_COMPRESSION_TYPE: "zstd needs Produce v7 or later",
             ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "not authorized to use the transactional id"}


# A failed verification in Produce's words, as Kafka's partition leader answers: a fenced producer is
# INVALID_PRODUCER_EPOCH, and the coordinator's retriable errors NOT_ENOUGH_REPLICAS, which every producer
# retries without a metadata refresh.
_VERIFICATION_ERRORS = {ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
                        **{e: ErrorCode.NOT_ENOUGH_REPLICAS for e in (
                            ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION,
                            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                            ErrorCode.NOT_COORDINATOR)}}


async def _verify_then_append(ctx, request, to_verify, refused, validated, checked):
    errors: dict[tuple[str, int], ErrorCode] = dict(refused)
    by_producer: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for tp, producer in to_verify.items():
        by_producer.setdefault(producer, []).append(tp)
    for (producer_id, epoch), partitions in by_producer.items():
        found = await ctx.broker.inter_broker.verify_partitions(request.transactional_id, producer_id, epoch,
                                                                partitions, add=ctx.api_version >= 12)
        for tp in partitions:
            answered = found.get(tp, ErrorCode.INVALID_TXN_STATE)
            error = _VERIFICATION_ERRORS.get(answered, answered)
            if error == ErrorCode.TRANSACTION_ABORTABLE and ctx.api_version < 11:
                error = ErrorCode.INVALID_TXN_STATE   # (the client predates KIP-890's abortable error)
            if error:
                errors[tp] = error
                ctx.log.info("transactional_produce_unverified", topic=tp[0], partition=tp[1], error=error.name)
    return _append_all(ctx, request, errors, validated, checked)


def _append_all(ctx, request, refused: dict, validated: dict | None = None, checked: dict | None = None):
    rm = ctx.broker.replica_manager
    acks = request.acks
    responses = []
    waiting = {}
    appended = []
    failed = False
    topics_counted = ctx.broker.metrics.topics
    asked = request.get("asked_ids")
    discovery = None   # made at the first partition refused for leadership (v10+), not for every request
    for topic in request.topic_data:
        partitions = []
        # (v13: the id may name another topic, or none, since it was resolved: a wait came in between)
        stale = asked is not None and ctx.broker.topic_ids.id_of(topic.name) != asked[topic.name]
        for pdata in topic.partition_data:
            record_errors, start = (), -1
            # (bad acks refuse the partitions that exist and are not refused already; one that does not
            # exist is answered so, as Kafka's handler answers it before its replica manager sees the acks)
            if acks not in (-1, 0, 1) and (topic.name, pdata.index) not in refused \
                    and partition_exists(ctx)(topic.name, pdata.index):
                result_error, info, message = ErrorCode.INVALID_REQUIRED_ACKS, None, f"acks={acks}"
            elif stale:
                result_error, info = ErrorCode.UNKNOWN_TOPIC_ID, None
                message = kafka_message(ErrorCode.UNKNOWN_TOPIC_ID)
            elif (topic.name, pdata.index) in refused:
                error = refused[(topic.name, pdata.index)]
                result_error, info = error, None
                message = _REFUSALS.get(error, "the partition is not in the producer's transaction")
            elif checked and checked.get((topic.name, pdata.index)) is not None:
                result = refused_append(rm.get(topic.name, pdata.index), checked[(topic.name, pdata.index)])
                result_error, info, message = result.error, None, result.message
                record_errors, start = result.record_errors, result.log_start_offset
            else:
                result = rm.append_records(topic.name, pdata.index, pdata.records, acks, wake_fetches=False,
                                           validated=validated.get((topic.name, pdata.index)) if validated else None,
                                           keys_checked=bool(checked) and (topic.name, pdata.index) in checked)
                result_error, info, message = result.error, result.info, result.message
                record_errors, start = result.record_errors, result.log_start_offset
            failed = failed or result_error != ErrorCode.NONE
            counted = topics_counted[topic.name]
            counted.produce_requests += 1
            if info is not None:
                counted.bytes_in += len(pdata.records)
                counted.messages_in += info.last_offset - info.first_offset + 1
                appended.append((topic.name, pdata.index))
                partitions.append({"index": pdata.index, "error_code": 0, "base_offset": info.first_offset,
                                   "log_append_time_ms": info.log_append_time,
                                   "log_start_offset": info.log_start_offset})
                if acks == -1:
                    waiting[(topic.name, pdata.index)] = (info.last_offset + 1, partitions[-1])
            else:
                counted.failed_produce += 1
                ctx.log.debug("produce_refused", topic=topic.name, partition=pdata.index,
                              error=ErrorCode(result_error).name, reason=message)
                record_errors = _record_errors(record_errors, topic.name, pdata.index)
                partitions.append({"index": pdata.index, "error_code": result_error, "base_offset": -1,
                                   "log_append_time_ms": -1, "log_start_offset": start,
                                   "error_message": _told(result_error, record_errors, message),
                                   "record_errors": [{"batch_index": n, "batch_index_error_message": why}
                                                     for n, why in record_errors]})
                if result_error == ErrorCode.NOT_LEADER_OR_FOLLOWER and ctx.api_version >= 10:
                    discovery = discovery or LeaderDiscovery(ctx)
                    partitions[-1]["current_leader"] = discovery.current_leader(topic.name, pdata.index)
        responses.append({"name": topic.name, "topic_id": asked[topic.name] if asked else None,
                          "partition_responses": partitions})
    unknown = _unknown_ids(request)
    responses.extend(unknown)
    failed = failed or bool(unknown)
    rm.wake_fetches(appended)   # parked fetches answer once, with every partition this request appended
    if acks == 0:
        # No response is expected; as Kafka does, a failure closes the connection so the client notices.
        return CLOSE_CONNECTION if failed else NO_RESPONSE
    throttle = throttle_for(ctx, PRODUCE, sum(p.get("sent_bytes") or len(p.records) for t in request.topic_data
                                              for p in t.partition_data if p.records is not None)) \
        if ctx.broker.quotas.enabled else 0
    response = {"responses": responses, "throttle_time_ms": throttle}
    if discovery is not None and discovery.leaders:
        response["node_endpoints"] = discovery.node_endpoints()
    # acks=all: answer once the ISR has every batch (at once on a single broker, whose append moves the HW).
    return rm.complete_when_replicated(waiting, response, max(request.timeout_ms, 0))


