"""What ShareFetch and ShareAcknowledge share: refusals of the request as a whole, the share partitions a
request names (resolved, authorized, loaded), their acknowledgements, and the shape of the answer."""

from __future__ import annotations

import asyncio

import structlog

from kbroker.broker.configuration import features
from kbroker.broker.handlers.common import LeaderDiscovery
from kbroker.broker.shares.partition import RENEW
from kbroker.protocol.acls import GROUP, READ, TOPIC
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("broker.shares")

NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


LEADERSHIP_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


def answer(error=0, reason=None, lock_ms=0, responses=(), node_endpoints=()) -> dict:
    """A ShareFetch or ShareAcknowledge answer (v1 ShareAcknowledge has no lock timeout: not encoded there). A
    refusal of the whole request carries no words, as Kafka's error answers carry none (its ``reason`` is
    kbroker's own, for whoever reads this code)."""
    return {"throttle_time_ms": 0, "error_code": error, "error_message": None,
            "acquisition_lock_timeout_ms": lock_ms, "responses": list(responses),
            "node_endpoints": list(node_endpoints)}


def request_refusal(ctx, request) -> tuple[ErrorCode, str | None] | None:
    if features.level(ctx.broker, "share.version") < 1:   # (0 also while group.share.enable is false)
        return ErrorCode.UNSUPPORTED_VERSION, "Share groups are not enabled."
    if not request.group_id:
        return ErrorCode.INVALID_REQUEST, "Group id must be set."
    if not request.member_id:
        return ErrorCode.INVALID_REQUEST, "Member id must be set."
    if not ctx.authorized(READ, GROUP, request.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    return None


def named_partitions(request) -> list[tuple[bytes, int, list]]:
    """(topic id, partition, acknowledgement batches) of each partition a ShareFetch or ShareAcknowledge names."""
    return [(bytes(t.topic_id), p.partition_index, p.acknowledgement_batches)
            for t in request.topics for p in t.partitions]


class SharePartitions:
    """The share partitions of one request and what is answered for each. A partition refused because this
    broker does not lead it (at that epoch) carries the leader this broker knows, and the answer that
    leader's endpoint, as Kafka's (the client goes there without asking for metadata first)."""

    def __init__(self, ctx, group: str, member: str) -> None:
        self.ctx, self.group, self.member = ctx, group, member
        self.manager = ctx.broker.shares
        self.discovery = LeaderDiscovery(ctx)
        self.names: dict[bytes, str] = {}
        self.loaded: dict[tuple[bytes, int], object] = {}
        self.entries: dict[tuple[bytes, int], dict] = {}
        self.pending: dict[tuple[bytes, int], asyncio.Task] = {}
        self.on_loaded = None

    def entry(self, topic_id: bytes, partition: int) -> dict:
        # Records are an empty set, never null, where nothing was acquired (an error, or acknowledgements only):
        # Kafka writes null as empty, and librdkafka fails to parse a ShareFetch answer with null records.
        return self.entries.setdefault((topic_id, partition), {
            "partition_index": partition, "error_code": 0, "error_message": None, "acknowledge_error_code": 0,
            "acknowledge_error_message": None, "current_leader": dict(NO_LEADER), "records": b"",
            "acquired_records": []})

    def begin_loads(self, keys) -> None:
        """Resolves and authorizes each partition; one whose share partition is loaded (or that this broker
        does not lead) is settled at once, any other starts loading and is ``pending`` until it lands (then
        ``on_loaded`` runs): a fetch need not wait for a load that takes long (Kafka's neither)."""
        broker = self.ctx.broker
        for topic_id, partition in keys:
            key = (topic_id, partition)
            if key in self.loaded or key in self.pending or key in self.entries:
                continue
            name = self.names.get(topic_id) or broker.topic_ids.name_of(topic_id)
            if name is None:
                self.entry(topic_id, partition)["error_code"] = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            if not self.ctx.authorized(READ, TOPIC, name):
                self.entry(topic_id, partition)["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            self.names[topic_id] = name
            known = self.manager.loaded_now(self.group, name, topic_id, partition)
            if known is not None:
                self._settle(key, *known)
                continue
            task = self.manager.load_in_background(self.group, name, topic_id, partition)
            self.pending[key] = task
            task.add_done_callback(lambda t, key=key: self._landed(key, t))

    async def load(self, keys) -> None:
        """``begin_loads``, then waits until each of ``keys`` has landed."""
        keys = list(keys)
        self.begin_loads(keys)
        waiting = {k: self.pending[k] for k in keys if k in self.pending}
        if waiting:
            await asyncio.wait(waiting.values())
            for key, task in waiting.items():
                self._landed(key, task)

    def _landed(self, key, task: asyncio.Task) -> None:
        if self.pending.pop(key, None) is None or task.cancelled():
            return
        if task.exception() is not None:
            log.error("share_partition_load_failed", group=self.group, exc_info=task.exception())
            self.entry(*key)["error_code"] = ErrorCode.UNKNOWN_SERVER_ERROR
        else:
            self._settle(key, *task.result())
        if self.on_loaded is not None:
            self.on_loaded()

    def _settle(self, key, error, loaded) -> None:
        topic_id, partition = key
        if not error:
            self.loaded[key] = loaded
            return
        e = self.entry(topic_id, partition)
        e["error_code"] = error
        leader = self.discovery.current_leader(self.names[topic_id], partition) \
            if error in LEADERSHIP_ERRORS else None
        if leader is not None:
            e["current_leader"] = leader

    async def acknowledge(self, topic_id: bytes, partition: int, batches,
                          renew: bool = False) -> tuple[ErrorCode, str | None]:
        """The acknowledgement's error and Kafka's words for it (where kbroker knows them). ``renew``: the
        request says it renews (v2's IsRenewAck, KIP-1222); a renew type (4) without it is INVALID_REQUEST, as
        Kafka checks before it looks at any record."""
        e = self.entry(topic_id, partition)
        loaded = self.loaded.get((topic_id, partition))
        if loaded is None:
            return ErrorCode(e["error_code"] or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None
        if not renew and any(RENEW in b.acknowledge_types for b in batches):
            return ErrorCode.INVALID_REQUEST, None
        error = await self.manager.acknowledge(
            (self.group, self.names[topic_id], partition), loaded, self.member,
            [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in batches])
        return error, loaded.sp.refusal if error else None

    def answer(self, lock_ms: int, fields=None) -> dict:
        return answer(lock_ms=lock_ms, responses=self.topics(fields), node_endpoints=self.discovery.node_endpoints()
                      if self.discovery.leaders else ())

    def topics(self, fields=None) -> list[dict]:
        by_topic: dict[bytes, list[dict]] = {}
        for (topic_id, _), e in self.entries.items():
            by_topic.setdefault(topic_id, []).append(e if fields is None else {k: e[k] for k in fields})
        return [{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()]
