"""Fetch: read partitions up to the high watermark; long-poll in the purgatory for ``min_bytes``.

Incremental fetch sessions (KIP-227) are kept in ``broker.fetch_sessions``
(see broker/partitions/fetch_sessions.py for the rules).

From v13 topics are named by id (KIP-516, broker/partitions/topic_ids.py): an id no topic has is UNKNOWN_TOPIC_ID, and
an id is checked again when the answer is made, so a fetch parked while its topic was deleted and recreated
never returns the new topic's records. From v15 a follower names itself in ``replica_state`` (KIP-903);
from v16 a partition refused with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries its current leader,
and the answer that leader's endpoint (KIP-951), so the client goes there without a metadata round trip.
"""

import dataclasses

from kbroker.broker.partitions.fetch_sessions import CLOSE_EPOCH, FULL_EPOCH, FetchSession, next_epoch
from kbroker.broker.handlers.common import LeaderDiscovery, last_of_each, resolve_topic_ids
from kbroker.broker.configuration.quotas import FETCH, throttle_for, unrecord
from kbroker.broker.partitions.delayed_fetch import DelayedFetch, at_rest
from kbroker.broker.partitions.replica_manager import FetchPartitionRequest, FetchPartitionResult
from kbroker.broker.partitions.session_rest import SessionRest
from kbroker.broker.network.idle_fetches import VERSION as IDLE_FETCH_VERSION
from kbroker.protocol.acls import CLUSTER_ACTION, READ, TOPIC
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.fetch import FETCH as API  # noqa: F401  (the registry reads API)


@dataclasses.dataclass
class _Shape:
    """What a request's answer needs beyond its results: ids it named topics by (v13+) and ids it named that
    no topic has, and whether leaders' endpoints go with leadership errors (v16+)."""
    ctx: object
    asked: dict[str, bytes] | None = None               # topic name -> the id the client gave (v13+)
    unknown: list[tuple[bytes, int]] = dataclasses.field(default_factory=list)

    def checked(self, results) -> list:
        """Results for ids that no longer name their topic become UNKNOWN_TOPIC_ID (nothing of them is sent)."""
        if self.asked is None:
            return results
        ids = self.ctx.broker.topic_ids
        return [r if ids.id_of(r.topic) == self.asked.get(r.topic)
                else FetchPartitionResult(r.topic, r.partition, ErrorCode.UNKNOWN_TOPIC_ID) for r in results]


_LEADERSHIP_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


def _response(results, shape: _Shape) -> dict:
    by_id = shape.asked is not None
    name_key = "topic_id" if by_id else "topic"
    discovers, discovery = shape.ctx.api_version >= 16, None   # (made at the first leadership refusal)
    topics: list[dict] = []
    for r in results:
        key = shape.asked.get(r.topic) if by_id else r.topic
        if not topics or topics[-1][name_key] != key:
            topics.append({name_key: key, "partitions": []})
        topics[-1]["partitions"].append({
            "partition_index": r.partition, "error_code": r.error, "high_watermark": r.high_watermark,
            "last_stable_offset": r.last_stable_offset, "log_start_offset": r.log_start_offset,
            "aborted_transactions": r.aborted_transactions, "preferred_read_replica": -1,
            "records": r.records if r.records is not None else b"",
        })
        if r.diverging_epoch is not None:
            topics[-1]["partitions"][-1]["diverging_epoch"] = {"epoch": r.diverging_epoch[0],
                                                               "end_offset": r.diverging_epoch[1]}
        if discovers and r.error in _LEADERSHIP_ERRORS:
            discovery = discovery or LeaderDiscovery(shape.ctx)
            current = discovery.current_leader(r.topic, r.partition, r.current_leader)
            if current is not None:
                topics[-1]["partitions"][-1]["current_leader"] = current
        elif r.current_leader is not None:
            topics[-1]["partitions"][-1]["current_leader"] = {"leader_id": r.current_leader[0],
                                                              "leader_epoch": r.current_leader[1]}
    for topic_id, partition in shape.unknown:
        topics.append({"topic_id": topic_id, "partitions": [{
            "partition_index": partition, "error_code": ErrorCode.UNKNOWN_TOPIC_ID, "high_watermark": -1,
            "records": b""}]})
    response = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics}
    if discovery is not None and discovery.leaders:
        response["node_endpoints"] = discovery.node_endpoints()
    return response


def _resolve_ids(ctx, request) -> list[tuple[bytes, int]]:
    """Fetch v13+: give each topic the name its id has now; topics whose id no topic has are taken out of
    the request and returned as (id, partition), to be answered UNKNOWN_TOPIC_ID."""
    request["topics"], unknown = resolve_topic_ids(ctx, request.topics, "topic")
    return [(bytes(t.topic_id), p.partition) for t in unknown for p in t.partitions]


def _session(ctx, request, by_id: bool) -> tuple[FetchSession | None, bool, ErrorCode]:
    """(the request's fetch session or None, whether it is incremental, the error that refuses it)."""
    if ctx.api_version < 7:
        return None, False, ErrorCode.NONE
    cache = ctx.broker.fetch_sessions
    session_id, epoch = request.session_id, request.session_epoch
    follower = request.replica_id >= 0
    if session_id != 0 and epoch in (FULL_EPOCH, CLOSE_EPOCH):
        cache.remove(session_id)
    if epoch == CLOSE_EPOCH:
        return None, False, ErrorCode.NONE
    if epoch == FULL_EPOCH:
        session = cache.create(follower, sum(len(t.partitions) for t in request.topics))
        if session is not None:
            session.uses_topic_ids = by_id
            session.update(request.topics, None, by_id)
        return session, False, ErrorCode.NONE
    session = cache.get(session_id)   # (an incremental epoch with no session id finds none, as in Kafka)
    if session is None:
        return None, False, ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    if epoch != session.epoch:
        return None, False, ErrorCode.INVALID_FETCH_SESSION_EPOCH
    if session.uses_topic_ids != by_id:
        return None, False, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    session.update(request.topics, request.forgotten_topics_data, by_id)
    if not session.partitions:   # (nothing left to fetch: closed, the fetch answered without a session)
        cache.remove(session_id)
        return None, False, ErrorCode.NONE
    session.epoch = next_epoch(session.epoch)
    return session, True, ErrorCode.NONE


def handle(ctx, request):
    rm = ctx.broker.replica_manager
    if ctx.api_version >= 15:   # KIP-903: a follower names itself (and its broker epoch) in replica_state
        state = request.replica_state   # (a tagged field: None when a consumer leaves it out)
        request["replica_id"] = state.replica_id if state is not None else -1
    by_id = ctx.api_version >= 13
    shape = _Shape(ctx, unknown=_resolve_ids(ctx, request) if by_id else [])
    request["topics"] = last_of_each(request.topics, index="partition", name="topic")
    session, incremental, error = _session(ctx, request, by_id)
    if error:
        return {"throttle_time_ms": 0, "error_code": error, "session_id": 0, "responses": []}
    if by_id:
        shape.asked = (session.topic_ids() if session is not None
                       else {t.topic: bytes(t.topic_id) for t in request.topics})
    quiet = []   # (incremental sessions) partitions at rest: listened on by the session, not read
    if incremental:   # every partition of the session, at the position the client last gave
        requests, quiet = _split_at_rest(ctx, request, session)
        if request.replica_id >= 0 and ctx.api_version == IDLE_FETCH_VERSION and ctx.connection is not None:
            ctx.connection.hold_idle_fetches()
    else:
        requests = [FetchPartitionRequest(t.topic, p.partition, p.fetch_offset, p.partition_max_bytes,
                                          p.current_leader_epoch, p.last_fetched_epoch)
                    for t in request.topics for p in t.partitions]
    denied = _unauthorized(ctx, request, requests + [r for r, _ in quiet]) if ctx.broker.authorizer is not None \
        else []
    if denied:
        refused = {(d.topic, d.partition) for d in denied}
        requests = [r for r in requests if (r.topic, r.partition) not in refused]
        if quiet:
            quiet = [(r, c) for r, c in quiet if (r.topic, r.partition) not in refused]
            for tp in refused:   # (no event comes when an ACL changes: looked at again once allowed)
                session.rest.leave(tp)
    if quiet and request.replica_id < 0:   # partitions at rest count as fetched in the topics' metrics
        topics = ctx.broker.metrics.topics
        for req, _ in quiet:
            topics[req.topic].fetch_requests += 1
    max_bytes = request.max_bytes if ctx.api_version >= 3 else 0x7FFFFFFF
    if request.replica_id < 0:   # a consumer: the broker's own fetch.max.bytes bounds the answer (KIP-541)
        max_bytes = min(max_bytes, ctx.broker.config["fetch.max.bytes"])
    # Fetch v11+ carries client metadata (KIP-392): a consumer may read a follower, as Kafka lets it.
    from_follower = ctx.api_version >= 11 and request.replica_id < 0
    found = rm.fetch(requests, replica_id=request.replica_id, isolation_level=request.isolation_level,
                     max_bytes=max_bytes, from_follower=from_follower)
    results = found + denied
    available = sum(r.records.length for r in results if r.records is not None)
    has_error = denied or shape.unknown or any(r.error != ErrorCode.NONE or r.diverging_epoch is not None
                                               for r in results)
    if request.max_wait_ms <= 0 or available >= request.min_bytes or has_error or not (requests or quiet):
        return _metered(ctx, request, results, shape, session, incremental)
    op = DelayedFetch(rm, requests, replica_id=request.replica_id, isolation_level=request.isolation_level,
                      max_bytes=max_bytes, min_bytes=max(request.min_bytes, 1), timeout_ms=request.max_wait_ms,
                      from_follower=from_follower, initial=found, quiet=quiet,
                      quiet_index=session.rest.partitions if quiet else None,
                      respond=lambda found: _metered(ctx, request, found + denied, shape, session, incremental))
    keys = [(r.topic, r.partition) for r in requests]   # (those at rest: the session's listener wakes the fetch)
    if quiet:
        session.rest.parked = op
    if available == 0:   # the read just now found nothing to send: trying again at once would find the same
        rm.fetch_purgatory.watch(op, keys)
    else:
        rm.fetch_purgatory.try_complete_else_watch(op, keys)
    return op.future   # (the response; cancelled by a connection that closes, it leaves the purgatory)


def _positions(session) -> list[FetchPartitionRequest]:
    """A request for every partition of the session at its position, each made once per position (an idle
    session's rounds then make none)."""
    return [_position(tp, c) for tp, c in session.partitions.items()]


def _position(tp, c) -> FetchPartitionRequest:
    req = c.request
    if req is None:
        req = c.request = FetchPartitionRequest(tp[0], tp[1], c.fetch_offset, c.max_bytes, c.current_leader_epoch,
                                                c.last_fetched_epoch)
    return req


def _split_at_rest(ctx, request, session) -> tuple[list, list]:
    """An incremental fetch: (the partitions to read, those at rest with what their session last told the
    fetcher, its ``CachedPartition``). Only a partition the request left unnamed can be at rest: one it names
    has a new position, whose last fetched epoch (a follower's) is checked against the leader's (KIP-320) by
    the read. One named by a topic id that no longer is its topic's is read (and answered UNKNOWN_TOPIC_ID).
    A partition the session found at rest and no event has marked since is taken as at rest without a look
    (broker/partitions/session_rest.py): a round of a session all at rest makes no list of its partitions."""
    rm, ids = ctx.broker.replica_manager, ctx.broker.topic_ids
    rest = session.rest
    if rest is None:
        rest = session.rest = SessionRest(rm.fetch_purgatory)
    now_ms, replica_id, isolation, cached = rm.now_ms(), request.replica_id, request.isolation_level, session.partitions
    rest.begin_round(now_ms)
    quiet = rest.all_quiet(len(cached), now_ms) if not request.topics else None
    if quiet is not None:
        read = []
    else:
        read, quiet = [], []
        named = {(t.topic, p.partition) for t in request.topics for p in t.partitions}
        outside = () if len(rest.partitions) == len(cached) else [tp for tp in cached if tp not in rest.partitions]
        looked = named.union(rest.marked, outside)
        if len(looked) * 4 < len(cached):
            # Few to look at (a produce to one partition of many at rest marks that one): the others stand at
            # rest unlooked.
            positions = [_position(tp, cached[tp]) for tp in sorted(looked) if tp in cached]
            quiet = rest.quiet_except(looked)
        else:
            positions = _positions(session)
        for req in positions:
            tp = (req.topic, req.partition)
            c = cached[tp]
            if tp not in named and rest.keep(tp):
                quiet.append((req, c))
            elif tp in named or (c.topic_id is not None and ids.id_of(req.topic) != c.topic_id) or \
                    not at_rest(rm, req, replica_id, isolation, now_ms, c):
                read.append(req)
                rest.leave(tp)
            else:
                quiet.append((req, c))
                rest.enter(tp, req, c, rm.partitions[tp].followers.get(replica_id) if replica_id >= 0 else None)
        rest.marked.clear()
        rest.rested(now_ms)
    return read, quiet


def _unauthorized(ctx, request, requests) -> list[FetchPartitionResult]:
    """A follower needs ClusterAction; a consumer Read on each topic. The rest is answered TOPIC_AUTHORIZATION_FAILED."""
    if request.replica_id >= 0:
        allowed = ctx.cluster_authorized(CLUSTER_ACTION)
        return [] if allowed else [FetchPartitionResult(r.topic, r.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                                   for r in requests]
    verdicts: dict[str, bool] = {}
    for r in requests:
        if r.topic not in verdicts:
            verdicts[r.topic] = ctx.authorized(READ, TOPIC, r.topic)
    return [FetchPartitionResult(r.topic, r.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for r in requests if not verdicts[r.topic]]


def _metered(ctx, request, results, shape: _Shape, session: FetchSession | None = None,
             incremental: bool = False) -> dict:
    """The response, unless the consumer is over its fetch quota: then an empty one carrying the throttle time
    (the data stays for its next fetch, and is not counted), as Kafka answers since KIP-219. In a fetch
    session, only what the client does not know yet (see broker.fetch_sessions)."""
    if request.replica_id >= 0:
        ctx.broker.metrics.replication_bytes_out += sum(r.records.length for r in results if r.records is not None)
        return _in_session(results, shape, session, incremental)
    if not ctx.broker.quotas.enabled:
        _count(ctx, results)
        return _in_session(results, shape, session, incremental)
    size = sum(r.records.length for r in results if r.records is not None)
    throttle = throttle_for(ctx, FETCH, size)
    if throttle:
        unrecord(ctx, FETCH, size)
        results = [dataclasses.replace(r, records=None) for r in results]
    _count(ctx, results)
    response = _in_session(results, shape, session, incremental)
    response["throttle_time_ms"] = throttle
    return response


def _in_session(results, shape: _Shape, session: FetchSession | None, incremental: bool) -> dict:
    results = shape.checked(results)
    if session is None:
        return _response(results, shape)
    response = _response(session.answer(results, incremental), shape)
    response["session_id"] = session.session_id
    return response


def _count(ctx, results) -> None:
    topics = ctx.broker.metrics.topics
    for r in results:
        counted = topics[r.topic]
        counted.fetch_requests += 1
        if r.records is not None:
            counted.bytes_out += r.records.length
        if r.error:
            counted.failed_fetch += 1
