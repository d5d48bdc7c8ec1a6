"""Client telemetry (KIP-714): the broker tells each client which of its own metrics to push and how often
(GetTelemetrySubscriptions), receives them (PushTelemetry, OTLP), and serves the latest values on
``/metrics`` beside its own, labelled by client id and instance id.

The subscriptions are the CLIENT_METRICS config resources (``configuration/client_metrics``). A client
instance is evaluated against them when it first asks, and again once they change (its subscription id
then changes, and a push under the old one is UNKNOWN_SUBSCRIPTION_ID, so the client asks again). Checks
and errors are Kafka's (``ClientMetricsManager``): a push earlier than the interval after the last, unless
it follows a fresh subscription or is the client's last, is THROTTLING_QUOTA_EXCEEDED; nothing is accepted
after a terminating push; a payload over ``telemetry.max.bytes`` is TELEMETRY_TOO_LARGE; one that does not
decode is INVALID_RECORD.

Sums are asked for cumulative (``delta_temporality`` false, where Kafka asks for deltas for its plugins):
a Prometheus counter is the running total, which the latest push then is.

Invariants: at most ``MAX_INSTANCES`` instances are known (the least recently seen goes first, as Kafka's
cache); an instance is forgotten when the connection that made it closes or after
max(60 s, 3 intervals) without a request; at most ``kbroker.telemetry.max.points`` data points are held
for all clients together (a push past it is accepted and not kept).
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

import crc32c
import structlog

from kbroker.broker.configuration.client_metrics import ALL_METRICS, DEFAULT_INTERVAL_MS, Subscription
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.inflate import inflate
from kbroker.protocol.otlp import Metric, OtlpError, metrics_data
from kbroker.protocol.types import uuid_to_str

log = structlog.get_logger("broker.client_telemetry")

MAX_INSTANCES = 16384
EXPIRY_MS = 60_000
ACCEPTED_COMPRESSION = [4, 3, 1, 2]   # zstd, lz4, gzip, snappy: Kafka's order of preference
INFLATE_FACTOR = 16   # a compressed push may inflate to 16 times telemetry.max.bytes
ZERO = bytes(16)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass
class ClientInstance:
    instance_id: bytes
    attributes: dict[str, str]
    subscription_id: int = 0
    metrics: list[str] = field(default_factory=list)
    interval_ms: int = DEFAULT_INTERVAL_MS
    generation: int = 0          # of the subscriptions it was evaluated against
    last_get_ms: int = -1
    last_push_ms: int = -1
    asked_since_push: bool = False   # a GetTelemetrySubscriptions answered since the last push
    last_seen_ms: int = 0
    last_error: ErrorCode = ErrorCode.NONE
    terminating: bool = False
    pushed: list[Metric] = field(default_factory=list)
    points: int = 0


class ClientTelemetry:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.instances: OrderedDict[bytes, ClientInstance] = OrderedDict()
        self.points = 0
        self.counts = {"pushes": 0, "throttled": 0, "unknown_subscription": 0, "errors": 0, "not_kept": 0}
        self._generation = 0
        self._seen_configs: dict | None = None
        self._subscriptions: list[Subscription] = []

    @property
    def enabled(self) -> bool:
        """A receiver is there: ``/metrics`` is served (Kafka likewise offers the APIs only with a receiver)."""
        return self.broker.config["metrics.port"] >= 0

    def subscriptions(self) -> list[Subscription]:
        configs = self.broker.metadata.client_metrics
        if configs != self._seen_configs:
            self._seen_configs = {name: dict(c) for name, c in configs.items()}
            self._subscriptions = [Subscription(name, c) for name, c in sorted(configs.items()) if c]
            self._generation += 1
        return self._subscriptions

    # ------------------------------------------------------------------ GetTelemetrySubscriptions
    def get_subscriptions(self, ctx, instance_id: bytes) -> dict:
        now = _now_ms()
        if instance_id == ZERO:
            instance_id = uuid.uuid4().bytes
        instance = self._instance(ctx, instance_id, now)
        answer = {"throttle_time_ms": 0, "client_instance_id": instance_id}
        recent = max(instance.last_get_ms, instance.last_push_ms)
        retry_after_error = instance.last_error in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                                    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        if recent >= 0 and now - recent < instance.interval_ms and not retry_after_error:
            self.counts["throttled"] += 1
            return {**answer, "error_code": ErrorCode.THROTTLING_QUOTA_EXCEEDED, "subscription_id": 0,
                    "accepted_compression_types": [], "push_interval_ms": 0, "telemetry_max_bytes": 0,
                    "delta_temporality": False, "requested_metrics": []}
        instance.last_get_ms, instance.last_error, instance.asked_since_push = now, ErrorCode.NONE, True
        return {**answer, "error_code": 0, "subscription_id": instance.subscription_id,
                "accepted_compression_types": ACCEPTED_COMPRESSION, "push_interval_ms": instance.interval_ms,
                "telemetry_max_bytes": self.broker.config["telemetry.max.bytes"], "delta_temporality": False,
                "requested_metrics": instance.metrics}

    def _instance(self, ctx, instance_id: bytes, now: int) -> ClientInstance:
        subscriptions = self.subscriptions()
        instance = self.instances.get(instance_id)
        if instance is None or instance.generation != self._generation:
            attributes = instance.attributes if instance is not None else self._attributes(ctx, instance_id)
            if instance is not None:
                self._drop(instance)
            else:
                self._watch_connection(ctx, instance_id)   # (once: a re-evaluated instance keeps its watch)
            instance = self._evaluate(instance_id, attributes, subscriptions)
            self.instances[instance_id] = instance
            while len(self.instances) > MAX_INSTANCES:
                self._drop(self.instances.popitem(last=False)[1])
        self.instances.move_to_end(instance_id)
        instance.last_seen_ms = now
        return instance

    @staticmethod
    def _attributes(ctx, instance_id: bytes) -> dict[str, str]:
        name, version = getattr(ctx.connection, "client_software", ("", ""))
        address, _, port = ctx.peer.rpartition(":")
        return {"client_instance_id": uuid_to_str(instance_id), "client_id": ctx.client_id or "",
                "client_software_name": name, "client_software_version": version,
                "client_source_address": address, "client_source_port": port}

    def _evaluate(self, instance_id: bytes, attributes: dict[str, str], subscriptions) -> ClientInstance:
        metrics, interval = set(), DEFAULT_INTERVAL_MS
        for sub in subscriptions:
            if sub.matches(attributes):
                metrics.update(sub.metrics)
                interval = min(interval, sub.interval_ms)
        wanted = [ALL_METRICS] if ALL_METRICS in metrics else sorted(metrics)
        digest = crc32c.crc32c((",".join(wanted) + str(interval)).encode() + instance_id)
        subscription_id = (digest ^ 0x80000000) - 0x80000000   # as an int32
        return ClientInstance(instance_id, attributes, subscription_id, wanted, interval, self._generation)

    def _watch_connection(self, ctx, instance_id: bytes) -> None:
        conn = ctx.connection
        if conn is None:
            return
        if conn.on_close is None:
            conn.on_close = []
        conn.on_close.append(lambda: self.forget(instance_id))

    def forget(self, instance_id: bytes) -> None:
        instance = self.instances.pop(instance_id, None)
        if instance is not None:
            self._drop(instance)

    def _drop(self, instance: ClientInstance) -> None:
        self.points -= instance.points
        instance.points, instance.pushed = 0, []

    # ------------------------------------------------------------------ PushTelemetry
    def push(self, ctx, request) -> ErrorCode:
        instance_id = bytes(request.client_instance_id)
        if instance_id == ZERO:
            return ErrorCode.INVALID_REQUEST
        now = _now_ms()
        instance = self._instance(ctx, instance_id, now)
        error = self._check_push(instance, request, now)
        instance.terminating = instance.terminating or request.terminating
        if error:
            instance.last_error = error
            return error
        if request.metrics and self.enabled:   # (without a receiver the metrics go nowhere, unread, as in Kafka)
            try:
                payload = bytes(request.metrics) if not request.compression_type else inflate(
                    request.compression_type, request.metrics,
                    self.broker.config["telemetry.max.bytes"] * INFLATE_FACTOR)
                self._keep(instance, metrics_data(payload))
            except (OtlpError, ValueError) as exc:
                self.counts["errors"] += 1
                instance.last_error = ErrorCode.INVALID_RECORD
                ctx.log.info("client_telemetry_refused", client_instance_id=uuid_to_str(instance_id), error=str(exc))
                return ErrorCode.INVALID_RECORD
        self.counts["pushes"] += 1
        instance.last_error = ErrorCode.NONE
        return ErrorCode.NONE

    def _check_push(self, instance: ClientInstance, request, now: int) -> ErrorCode:
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST
        # (the first push after a fresh subscription may come early: the client adds jitter to it)
        if not instance.asked_since_push and now - instance.last_push_ms < instance.interval_ms \
                and not request.terminating:
            self.counts["throttled"] += 1
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        instance.last_push_ms, instance.asked_since_push = now, False
        if request.subscription_id != instance.subscription_id:
            self.counts["unknown_subscription"] += 1
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if request.compression_type not in (0, *ACCEPTED_COMPRESSION):
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if request.metrics is not None and len(request.metrics) > self.broker.config["telemetry.max.bytes"]:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    def _keep(self, instance: ClientInstance, metrics: list[Metric]) -> None:
        if instance.metrics != [ALL_METRICS]:
            prefixes = tuple(instance.metrics)
            metrics = [m for m in metrics if m.name.startswith(prefixes)]
        points = sum(len(m.points) for m in metrics)
        if self.points - instance.points + points > self.broker.config["kbroker.telemetry.max.points"]:
            self.counts["not_kept"] += 1
            return
        self.points += points - instance.points
        instance.pushed, instance.points = metrics, points

    # ------------------------------------------------------------------ /metrics
    def live(self) -> list[ClientInstance]:
        """The instances whose pushed metrics are served, after forgetting those not heard from in time."""
        now = _now_ms()
        for instance in [i for i in self.instances.values()
                         if now - i.last_seen_ms > max(EXPIRY_MS, 3 * i.interval_ms)]:
            self.forget(instance.instance_id)
        return [i for i in self.instances.values() if i.pushed]
