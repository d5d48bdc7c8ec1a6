"""Client quotas as Kafka enforces them: byte rates for produce and fetch, request time and topic mutations, per
user and client id; and new connections a second per IP address (KIP-612).

Quota configs belong to entities: a user, a client id, or a user with a
client id, each of which may be ``<default>``. For a request from user U with
client id C, the first of these that has the quota key applies (Kafka's
order): (U, C), (U, default), (U), (default, C), (default, default),
(default), (C), (default client). Usage is measured per matched entity with
its defaults filled in with the caller's names, so a user default gives each
user a quota of their own.

Usage is a rate over ``quota.window.num`` samples of
``quota.window.size.seconds`` each (Kafka's ``Rate``), measured over at least
one sample. (Kafka's floor is all but one of them: a new client may then
send ten seconds' worth at once, and again each time its oldest sample
expires, about 30 % over its quota across 20 s; with one sample a throttled
client stays within a few % of it over any 20 s.) A request that takes the rate above the quota is
answered with ``throttle_time_ms`` = the time at which the rate would be back
at the quota, ``(total / quota) - window``, capped at the full window; the
connection then reads nothing from that client for as long (muting, as
Kafka does; clients following KIP-219 also wait on their side). The request
itself is served: a client over its quota is slowed, never refused.

``controller_mutation_rate`` (KIP-599) bounds the partitions a user or client
id creates or deletes a second (CreateTopics, CreatePartitions, DeleteTopics)
with a token bucket holding ``controller.quota.window.num`` x
``controller.quota.window.size.seconds`` seconds' worth, full at first, as
Kafka's ``TokenBucket``. A request at a version that knows
THROTTLING_QUOTA_EXCEEDED is strict: a topic asked for while the bucket is
below zero is refused with it, and a topic that fits is taken whole even if it
empties the bucket past zero. An older request is permissive: everything is
done and the answer's ``throttle_time_ms`` is the time to refill to zero.

An IP address's quota (``connection_creation_rate``, for one address or the
default address) is an entity of its own, never combined with a user or client
id; the acceptor applies it (``broker/network/connection_limits.py``), and it
does not enable the request path's accounting.

Invariant: with no user or client-id quota configured anywhere, ``enabled`` is
False and the request path does nothing more than test it.
"""

from __future__ import annotations

import math
import time
from collections import deque

DEFAULT = "<default>"
PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
MUTATION, CONNECTION_RATE = "controller_mutation_rate", "connection_creation_rate"
CLIENT_KEYS = (PRODUCE, FETCH, REQUEST, MUTATION)   # a user's or client id's
IP_KEYS = (CONNECTION_RATE,)               # an IP address's
QUOTA_KEYS = CLIENT_KEYS + IP_KEYS
USER, CLIENT_ID, IP = "user", "client-id", "ip"
SLOTS = {USER: 0, CLIENT_ID: 1, IP: 2}    # where each entity type's name is in an Entity
MAX_IDLE_CHECK = 1000   # usage entries kept before idle ones are looked for

Entity = tuple  # (user, client id, IP address): each a name, DEFAULT or None (not part of the entity)


def resolution_order(user: str, client_id: str) -> list[Entity]:
    return [(user, client_id, None), (user, DEFAULT, None), (user, None, None), (DEFAULT, client_id, None),
            (DEFAULT, DEFAULT, None), (DEFAULT, None, None), (None, client_id, None), (None, DEFAULT, None)]


def user_name(principal: str | None) -> str:
    """The user of a principal (``User:alice`` -> ``alice``; an unauthenticated one is ``ANONYMOUS``)."""
    return principal.split(":", 1)[1] if principal and ":" in principal else "ANONYMOUS"


class Sensor:
    """A windowed sum: ``samples`` buckets of ``window_s`` seconds, the oldest dropped as time passes."""

    __slots__ = ("samples", "window_s", "buckets")

    def __init__(self, samples: int, window_s: float) -> None:
        self.samples = samples
        self.window_s = window_s
        self.buckets: deque[list[float]] = deque()   # [start, total]

    def _purge(self, now: float) -> None:
        horizon = now - self.samples * self.window_s
        while self.buckets and self.buckets[0][0] + self.window_s <= horizon:
            self.buckets.popleft()

    def record(self, value: float, now: float) -> None:
        self._purge(now)
        if not self.buckets or now >= self.buckets[-1][0] + self.window_s:
            self.buckets.append([now, 0.0])
        self.buckets[-1][1] += value

    def total_and_window(self, now: float) -> tuple[float, float]:
        self._purge(now)
        total = sum(b[1] for b in self.buckets)
        elapsed = now - self.buckets[0][0] if self.buckets else 0.0
        return total, max(elapsed, self.window_s)


class QuotaManager:
    """The quota configs of every entity and the usage of every (user, client id) they apply to."""

    def __init__(self, samples: int = 11, window_s: float = 1.0, mutation_burst_s: float = 11.0) -> None:
        self.samples = samples
        self.window_s = window_s
        self.mutation_burst_s = mutation_burst_s   # seconds of controller_mutation_rate a bucket holds
        self._buckets: dict[tuple, TokenBucket] = {}
        self.configs: dict[Entity, dict[str, float]] = {}
        self.enabled = False
        self._sensors: dict[tuple, Sensor] = {}
        self.on_ip_rates: list = []   # callbacks given ip_rates() whenever an IP address's quota changes

    # ------------------------------------------------------------------ configs
    def replace(self, entity: Entity, values: dict[str, float]) -> None:
        """The entity's quotas are now ``values`` (only its kind's quota keys are kept)."""
        keys = IP_KEYS if entity[2] is not None else CLIENT_KEYS
        kept = {k: float(v) for k, v in values.items() if k in keys}
        if kept:
            self.configs[entity] = kept
        else:
            self.configs.pop(entity, None)
        if entity[2] is not None:
            for callback in self.on_ip_rates:
                callback(self.ip_rates())
            return
        self.enabled = any(e[2] is None for e in self.configs)
        self._sensors.clear()   # usage restarts against the new bounds, as Kafka's sensors are re-made
        self._buckets.clear()

    def ip_rates(self) -> dict[str, int]:
        """IP address (or host name, or DEFAULT) -> the new connections a second it may make."""
        return {e[2]: int(v[CONNECTION_RATE]) for e, v in self.configs.items() if e[2] is not None}

    def resolve(self, key: str, user: str, client_id: str) -> tuple[tuple, float] | None:
        """(the usage key, the bound) of the quota that applies, or None."""
        for entity in resolution_order(user, client_id):
            values = self.configs.get(entity)
            if values is not None and key in values:
                return (key, user if entity[0] is not None else None,
                        client_id if entity[1] is not None else None), values[key]
        return None

    # ------------------------------------------------------------------ usage
    def record(self, key: str, user: str, client_id: str, value: float, now: float) -> int:
        """Record ``value`` (bytes, or ms of request time) and return the throttle time in ms (0: within quota)."""
        found = self.resolve(key, user, client_id)
        if found is None:
            return 0
        usage_key, bound = found
        if key == REQUEST:
            bound = bound * 10.0   # percent of one thread: 100 % = 1000 ms of work per second
        sensor = self._sensors.get(usage_key)
        if sensor is None:
            if len(self._sensors) >= MAX_IDLE_CHECK:
                self._drop_idle(now)
            sensor = self._sensors[usage_key] = Sensor(self.samples, self.window_s)
        sensor.record(value, now)
        if bound <= 0:
            return int(self.samples * self.window_s * 1000)
        total, window = sensor.total_and_window(now)
        if total / window <= bound:
            return 0
        throttle_s = total / bound - window
        return int(math.ceil(min(throttle_s, self.samples * self.window_s) * 1000))

    def _drop_idle(self, now: float) -> None:
        """Forget the usage of clients idle for a whole window (Kafka expires idle quota sensors too), so that
        many short-lived client ids do not pile up."""
        for key, sensor in list(self._sensors.items()):
            sensor._purge(now)
            if not sensor.buckets:
                del self._sensors[key]

    def mutation_quota(self, user: str, client_id: str, strict: bool) -> "MutationQuota":
        """The controller mutation quota of one request from (user, client id)."""
        found = self.resolve(MUTATION, user, client_id)
        if found is None:
            return UNBOUNDED
        usage_key, rate = found
        bucket = self._buckets.get(usage_key)
        if bucket is None:
            if len(self._buckets) >= MAX_IDLE_CHECK:
                now = time.monotonic()
                self._buckets = {k: b for k, b in self._buckets.items() if not b.full(now)}
            bucket = self._buckets[usage_key] = TokenBucket(rate, rate * self.mutation_burst_s)
        return MutationQuota(bucket, strict)

    def unrecord(self, key: str, user: str, client_id: str, value: float, now: float) -> None:
        """Take back a recorded value (a throttled fetch whose data is not sent)."""
        found = self.resolve(key, user, client_id)
        sensor = self._sensors.get(found[0]) if found else None
        if sensor is not None:
            sensor.record(-value, now)


class TokenBucket:
    """Kafka's TokenBucket: refilled at ``rate`` a second up to ``burst``, full at first; a take may leave it below
    zero, and it is then owed for the time the refill takes."""

    __slots__ = ("rate", "burst", "tokens", "at")

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.at = time.monotonic()

    def refill(self, now: float) -> float:
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        return self.tokens

    def full(self, now: float) -> bool:
        return self.tokens + (now - self.at) * self.rate >= self.burst

    def owed_ms(self) -> int:
        return round(-self.tokens / self.rate * 1000) if self.tokens < 0 else 0


class MutationQuota:
    """One request's controller mutation quota (KIP-599): ``admit`` each topic's partitions in turn;
    ``throttle_ms`` is then the answer's throttle time."""

    def __init__(self, bucket: TokenBucket | None, strict: bool) -> None:
        self.bucket = bucket
        self.strict = strict
        self.throttle_ms = 0

    def admit(self, partitions: int) -> bool:
        """Take ``partitions`` mutations; False (nothing taken) when a strict quota is already exhausted."""
        bucket = self.bucket
        if bucket is None:
            return True
        bucket.refill(time.monotonic())
        if self.strict and bucket.tokens < 0:
            self.throttle_ms = bucket.owed_ms()
            return False
        bucket.tokens = min(bucket.burst, bucket.tokens - partitions)
        if not self.strict:
            self.throttle_ms = bucket.owed_ms()
        return True


UNBOUNDED = MutationQuota(None, False)


def mutation_quota(ctx, strict_since: int) -> MutationQuota:
    """The controller mutation quota of this request (CreateTopics, CreatePartitions, DeleteTopics), strict from
    the request's ``strict_since`` version on."""
    quotas, conn = ctx.broker.quotas, ctx.connection
    if not quotas.enabled or conn is None:
        return UNBOUNDED
    return quotas.mutation_quota(user_name(conn.principal), ctx.client_id or "", ctx.api_version >= strict_since)


def mutation_throttle(ctx, quota: MutationQuota) -> int:
    """The answer's throttle time; the connection reads nothing more for as long, as for the other quotas."""
    if quota.throttle_ms and ctx.connection is not None:
        ctx.connection.throttle(quota.throttle_ms)
    return quota.throttle_ms


# Not counted against request quotas: the brokers' own requests, and what a client needs to connect at all.
EXEMPT_APIS = frozenset({4, 5, 6, 7, 17, 18, 27, 36, 56, 67})


def throttle_for(ctx, key: str, value: float) -> int:
    """Record a request's usage against its principal's and client id's quota; mute the connection for the
    throttle time if it is over, and return that time in ms (0 within quota, or without quotas)."""
    quotas = ctx.broker.quotas
    conn = ctx.connection
    if not quotas.enabled or conn is None:
        return 0
    ms = quotas.record(key, user_name(conn.principal), ctx.client_id or "", value, time.monotonic())
    if ms:
        conn.throttle(ms)
    return ms


def unrecord(ctx, key: str, value: float) -> None:
    conn = ctx.connection
    ctx.broker.quotas.unrecord(key, user_name(conn.principal), ctx.client_id or "", value, time.monotonic())


def entity_from_components(components: list[tuple[str, str | None]]) -> Entity:
    """AlterClientQuotas' entity (``[(type, name or None for the default)]``) -> (user, client id, IP)."""
    entity = [None, None, None]
    for kind, name in components:
        if kind in SLOTS:
            entity[SLOTS[kind]] = DEFAULT if name is None else name
    return tuple(entity)


def entity_components(entity: Entity) -> list[dict]:
    return [{"entity_type": kind, "entity_name": None if entity[slot] == DEFAULT else entity[slot]}
            for kind, slot in SLOTS.items() if entity[slot] is not None]
