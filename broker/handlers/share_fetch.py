"""ShareFetch (KIP-932): a share group member's fetch. It opens, continues or closes the member's share session,
applies the acknowledgements it carries, then acquires available records of the session's partitions for
the member under the group's lock duration and answers them with their acquired offset ranges and delivery
counts. With less than MinBytes to acquire it waits up to MaxWaitMs for an append, a release or a share
partition's state to load (the fetch purgatory), then acquires what there is. A partition whose state is still
loading at the answer is left out of it and keeps loading for the member's next fetch, as Kafka's: a slow load
(its share coordinator moving) does not hold up the other partitions' records, nor the member's connection,
past the fetch's wait.

Records go out as the log holds them (whole batches), from the batch that holds the first acquired record to
the one that holds the last (not the batches read past them); the acquired ranges say which of their records
are the member's. A final fetch (epoch -1) acquires nothing: it acknowledges, releases what the member still holds
and closes the session. A new session past the broker's ``group.share.max.share.sessions`` is refused
SHARE_SESSION_LIMIT_REACHED once the fetch's MaxWaitMs has passed, as Kafka answers it."""

from __future__ import annotations

import asyncio

from kbroker.broker.handlers.share_common import SharePartitions, answer, named_partitions, request_refusal
from kbroker.broker.partitions.purgatory import DelayedOperation
from kbroker.broker.shares.partition import BATCH_OPTIMIZED, RECORD_LIMIT
from kbroker.broker.shares.sessions import FINAL_EPOCH
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.share_fetch import SHARE_FETCH as API  # noqa: F401  (the registry reads API)


class DelayedShareFetch(DelayedOperation):
    """Parked until an append or a release lets the member acquire MinBytes, or MaxWaitMs passes (then it
    acquires what there is)."""

    def __init__(self, timeout_ms: int, attempt) -> None:
        super().__init__(timeout_ms)
        self.attempt = attempt

    def try_complete(self) -> bool:
        return self.attempt() and self.force_complete()

    def on_expiration(self) -> None:
        self.attempt(final=True)

    def on_complete(self):
        return None


async def handle(ctx, request):
    refused = request_refusal(ctx, request)
    if refused:
        return answer(*refused)
    manager = ctx.broker.shares
    group, member, epoch = request.group_id, request.member_id, request.share_session_epoch
    named = named_partitions(request)
    if epoch == 0 and any(batches for _, _, batches in named):   # (nothing can be held before a session)
        return answer(ErrorCode.INVALID_REQUEST, "Acknowledge data present in initial fetch request.")
    error, session = manager.begin_session(ctx, group, member, epoch)
    if error == ErrorCode.SHARE_SESSION_LIMIT_REACHED:   # (after the fetch's wait, as Kafka: not a busy loop)
        await asyncio.sleep(max(request.max_wait_ms, 0) / 1000)
    if error:
        return answer(error)
    if epoch != FINAL_EPOCH:
        for topic_id, partition, _ in named:
            session.partitions.setdefault((topic_id, partition))
        for forgotten in request.forgotten_topics_data:
            for partition in forgotten.partitions:
                session.partitions.pop((bytes(forgotten.topic_id), partition), None)
    shares = SharePartitions(ctx, group, member)
    renew = ctx.api_version >= 2 and request.is_renew_ack
    acknowledged = [(t, p, batches) for t, p, batches in named if batches]
    await shares.load([(t, p) for t, p, _ in acknowledged])   # (an acknowledgement needs the partition's state)
    for topic_id, partition, batches in acknowledged:
        e = shares.entry(topic_id, partition)
        e["acknowledge_error_code"], e["acknowledge_error_message"] = \
            await shares.acknowledge(topic_id, partition, batches, renew)
    lock_ms = manager.lock_ms(group)
    if epoch == FINAL_EPOCH:
        manager.close_session(session)
        await manager.release_session(session)
        return shares.answer(lock_ms)
    if not renew and request.max_records > 0:   # (0: acquire nothing)
        shares.begin_loads([*session.partitions, *((t, p) for t, p, _ in named)])
        await _acquire(ctx, request, shares, session)
        if epoch == 0:   # a session's first answer names every partition it could read, records or not (Kafka's)
            for key in session.partitions:
                if key in shares.loaded:
                    shares.entry(*key)
    return shares.answer(lock_ms)


async def _acquire(ctx, request, shares: SharePartitions, session) -> None:
    manager = shares.manager
    mode = RECORD_LIMIT if ctx.api_version >= 2 and request.share_acquire_mode == 1 else BATCH_OPTIMIZED
    read_committed = manager.group_config(shares.group, "share.isolation.level") == "read_committed"
    order = list(session.partitions)
    epoch = request.share_session_epoch
    if len(order) > 1 and epoch >= 1:   # Kafka's round robin: the request's epoch picks the first partition,
        turn = epoch % len(order)       # so that one busy partition does not starve the others
        order = order[turn:] + order[:turn]

    def acquirable() -> list:
        """(key, loaded) of the partitions a fetch may acquire from, in order: loaded, and not at their limit
        of records in flight (Kafka's acquirable partitions, among which the fetch's bytes are shared)."""
        return [(key, loaded) for key in order
                if (loaded := shares.loaded.get(key)) is not None and loaded.sp.can_acquire()]

    def attempt(final: bool = False) -> bool:
        """Acquires what the member may have; until ``final``, nothing while less than MinBytes is there."""
        if request.min_bytes > 1 and not final and not enough():
            return False
        budget = request.max_records
        partitions = acquirable()
        caps = byte_shares(request.max_bytes, len(partitions))
        min_one_batch = True   # (the first partition whose log has bytes reads a batch whole, as Kafka's reads)
        got = False
        for ((topic_id, partition), loaded), cap in zip(partitions, caps):
            if budget <= 0:
                break
            data, ranges, read = manager.acquire(shares.group, shares.names[topic_id], partition, loaded,
                                                 shares.member, budget, cap, mode, read_committed,
                                                 request.batch_size, min_one_batch)
            min_one_batch = min_one_batch and not read
            if ranges:
                e = shares.entry(topic_id, partition)
                e["records"] = data
                e["acquired_records"] = [{"first_offset": f, "last_offset": la, "delivery_count": c}
                                         for f, la, c in ranges]
                budget -= sum(la - f + 1 for f, la, _ in ranges)
                got = True
        return got

    def enough() -> bool:   # (Kafka's share of max_bytes per partition, and its count of what is there)
        partitions = acquirable()
        found = 0
        for ((topic_id, partition), loaded), cap in zip(partitions, byte_shares(request.max_bytes, len(partitions))):
            found += manager.available_bytes(shares.names[topic_id], partition, loaded, cap, read_committed)
            if found >= request.min_bytes:
                return True
        return False

    watched = [(shares.names[t], p) for t, p in order if (t, p) in shares.loaded or (t, p) in shares.pending]
    waits = request.max_wait_ms > 0 and bool(watched)
    if not attempt(final=not waits) and waits:
        op = DelayedShareFetch(request.max_wait_ms, attempt)
        shares.on_loaded = lambda: op.completed or op.try_complete()
        purgatory = ctx.broker.replica_manager.fetch_purgatory
        if not purgatory.try_complete_else_watch(op, watched):
            await op.future


def byte_shares(max_bytes: int, partitions: int) -> list[int]:
    """A ShareFetch's MaxBytes shared evenly among the partitions it may acquire from (Kafka's uniform
    strategy), what does not divide going to the first (Kafka gives it to one at random); with fewer bytes
    than partitions, one byte each to the first ones."""
    if partitions <= 0:
        return []
    if max_bytes < partitions:
        return [1 if i < max_bytes else 0 for i in range(partitions)]
    share = max_bytes // partitions
    return [share + max_bytes - share * partitions] + [share] * (partitions - 1)
