"""How many connections a broker takes, from whom, and for how long they may sit idle.

* ``max.connections.per.ip`` (with ``max.connections.per.ip.overrides``,
  ``host:count`` pairs): a new connection from an address at its limit is
  closed at once, as Kafka's acceptor closes it;
* ``max.connections`` (broker-wide, and per listener as
  ``listener.name.<l>.max.connections``): a connection beyond it is closed at
  once (Kafka leaves it in the accept backlog until a slot frees; an asyncio
  server cannot pause accepting). The inter-broker listener is exempt from the
  broker-wide limit, as in Kafka, so replication never starves behind clients;
* ``max.connection.creation.rate`` (KIP-612; broker-wide and per listener as
  ``listener.name.<l>.max.connection.creation.rate``): connections accepted
  per second beyond it are closed at once (Kafka delays the accept instead;
  again, an asyncio server cannot), the inter-broker listener exempt from the
  broker-wide rate as from the count;
* ``connection_creation_rate`` quotas per IP address (KIP-612; one address's,
  else the default address's, set with AlterClientQuotas): a connection from
  an address over its rate is held unread for as long as the rate needs to
  come back under it, and then closed (``hold_s``), as Kafka's acceptor delays
  the close, so a client retrying at once does not spin. Every listener is
  subject to it, the inter-broker one too, as in Kafka;
* ``connections.max.idle.ms``: a connection that has read no request and owes
  no response for that long is closed.

Every refusal is counted by listener and by the limit that refused it (``refused``, a metric).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections import Counter
from dataclasses import dataclass

import structlog

from kbroker.broker.configuration.config import ConfigError
from kbroker.broker.configuration.quotas import DEFAULT, TokenBucket

log = structlog.get_logger("broker.network.connection_limits")
MAX_IDLE_BUCKETS = 1000   # per-address rate buckets kept before full ones are dropped


def parse_overrides(text: str) -> dict[str, int]:
    result = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        host, sep, count = item.rpartition(":")
        try:
            result[host] = int(count)
        except ValueError:
            raise ConfigError(f"max.connections.per.ip.overrides: {item!r} is not host:count") from None
        if not sep or not host:
            raise ConfigError(f"max.connections.per.ip.overrides: {item!r} is not host:count")
    return result


class CreationRate(TokenBucket):
    """At most ``rate`` new connections a second: a token bucket (the client quotas' ``TokenBucket``) that holds
    one second's worth and never goes below zero, so a burst of up to ``rate`` after a quiet second is let
    through, as Kafka's one-second rate windows let it through."""

    __slots__ = ()

    def __init__(self, rate: int) -> None:
        super().__init__(rate, float(rate))

    def admit(self) -> bool:
        if self.refill(time.monotonic()) >= 1:
            self.tokens -= 1
            return True
        return False

    def give_back(self) -> None:
        """A connection this rate admitted was refused by a later limit: it does not count."""
        self.tokens = min(self.burst, self.tokens + 1)

    def wait_s(self) -> float:
        """How long until the next connection would be admitted (after a refused ``admit``)."""
        return max(0.0, 1 - self.tokens) / self.rate


@dataclass(frozen=True)
class Refusal:
    limit: str           # the config or quota that refused it
    reason: str
    hold_s: float = 0.0  # how long the connection is held unread before it is closed (0: at once)


UNLIMITED = 2147483647


def _literal(name: str) -> str | None:
    """The normalized form of an IP address literal, or None for a host name."""
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return None


async def resolve(name: str) -> list[str]:
    """The addresses a host name (or literal) stands for, as Kafka's InetAddress.getByName finds them; [] if
    none."""
    literal = _literal(name)
    if literal is not None:
        return [literal]
    try:
        found = await asyncio.get_running_loop().getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return sorted({str(ipaddress.ip_address(info[4][0])) for info in found})


class ConnectionLimits:
    def __init__(self, config) -> None:
        self.reconfigure(config)
        self.inter_broker_listener = config.inter_broker_listener
        self.idle_ms = config["connections.max.idle.ms"]
        self.by_ip: Counter = Counter()
        self.by_listener: Counter = Counter()
        self.refused: Counter = Counter()   # (listener, limit name) -> connections refused
        self.ip_rates: dict[str, int] = {}       # address (normalized) or DEFAULT -> connection_creation_rate
        self.ip_buckets: dict[str, CreationRate] = {}
        self.window_s = config["quota.window.size.seconds"]   # (a held connection is held at most this long)
        self._resolving: asyncio.Task | None = None
        self.held: dict = {}   # stream refused by its IP's rate -> the timer that closes it

    def set_ip_rates(self, rates: dict[str, int]) -> None:
        """The IP quotas are now ``rates`` (address, host name or DEFAULT -> connections a second). Literal
        addresses and the default apply at once; a host name once it resolves (in the background, the event
        loop not waiting on DNS), to the addresses it resolves to, as Kafka applies it."""
        literal = {}
        names = {}
        for name, rate in rates.items():
            address = name if name == DEFAULT else _literal(name)
            if address is None:
                names[name] = rate
            else:
                literal[address] = rate
        self._apply_ip_rates(literal)
        if self._resolving is not None:
            self._resolving.cancel()
            self._resolving = None
        if names:
            self._resolving = asyncio.get_running_loop().create_task(self._resolve_names(literal, names))

    async def _resolve_names(self, literal: dict[str, int], names: dict[str, int]) -> None:
        rates = {}
        for name, rate in names.items():
            addresses = await resolve(name)
            if not addresses:
                log.warning("ip_quota_host_unresolved", host=name)
            rates.update(dict.fromkeys(addresses, rate))
        self._apply_ip_rates({**rates, **literal})   # (an address's own quota wins over a name's)

    def _apply_ip_rates(self, rates: dict[str, int]) -> None:
        if rates != self.ip_rates:
            self.ip_rates = rates
            self.ip_buckets.clear()   # usage restarts against the new bounds, as Kafka's sensors are re-made

    def reconfigure(self, config) -> None:
        """Take the limits from ``config`` (at start and on a dynamic change). Connections already open stay,
        as in Kafka; a lower limit refuses new ones until enough have closed."""
        self.per_ip = config["max.connections.per.ip"]
        self.per_ip_overrides = parse_overrides(config["max.connections.per.ip.overrides"])
        self.total = config["max.connections"]
        self.per_listener = {name: config.for_listener(name)("max.connections") for name, _, _ in config.listeners}
        rate = config["max.connection.creation.rate"]
        self.rate = CreationRate(rate) if rate < UNLIMITED else None
        self.rate_per_listener = {}
        for name, _, _ in config.listeners:
            listener_rate = config.for_listener(name)("max.connection.creation.rate")
            if listener_rate < UNLIMITED and listener_rate != rate:
                self.rate_per_listener[name] = CreationRate(listener_rate)

    def admit(self, ip: str, listener: str) -> Refusal | None:
        """Count the connection in and return None, or why it is refused (nothing counted)."""
        refusal = self._refusal(ip, listener)
        if refusal is not None:
            self.refused[(listener, refusal.limit)] += 1
            return refusal
        self.by_ip[ip] += 1
        self.by_listener[listener] += 1
        return None

    def _refusal(self, ip: str, listener: str) -> Refusal | None:
        limit = self.per_ip_overrides.get(ip, self.per_ip)
        if self.by_ip[ip] >= limit:
            return Refusal("max.connections.per.ip",
                           f"{ip} has {self.by_ip[ip]} connections (max.connections.per.ip {limit})")
        if self.by_listener[listener] >= self.per_listener.get(listener, self.total):
            return Refusal("max.connections",
                           f"listener {listener} has {self.by_listener[listener]} connections (max.connections)")
        client = listener != self.inter_broker_listener
        if client and sum(self.by_listener.values()) >= self.total:
            return Refusal("max.connections",
                           f"the broker has {sum(self.by_listener.values())} connections (max.connections)")
        rate = self.rate_per_listener.get(listener) or (self.rate if client else None)
        if rate is not None and not rate.admit():
            return Refusal("max.connection.creation.rate",
                           f"listener {listener} is over {rate.rate} new connections a second "
                           "(max.connection.creation.rate)")
        held = self._ip_rate_refusal(ip) if self.ip_rates else None
        if held is not None and rate is not None:
            rate.give_back()   # (Kafka likewise takes a throttled connection back from the listener's rate)
        return held

    def _ip_rate_refusal(self, ip: str) -> Refusal | None:
        address = _literal(ip) or ip
        bound = self.ip_rates.get(address, self.ip_rates.get(DEFAULT))
        if bound is None:
            return None
        bucket = self.ip_buckets.get(address)
        if bucket is None:
            if len(self.ip_buckets) >= MAX_IDLE_BUCKETS:
                now = time.monotonic()
                self.ip_buckets = {a: b for a, b in self.ip_buckets.items() if not b.full(now)}
            bucket = self.ip_buckets[address] = CreationRate(bound)
        if bucket.admit():
            return None
        return Refusal("connection_creation_rate",
                       f"{ip} is over its {bound} new connections a second (connection_creation_rate)",
                       min(bucket.wait_s(), self.window_s))

    def hold(self, stream, seconds: float) -> None:
        """Keep a refused connection open, unread, for ``seconds``, then close it (``close_held`` at shutdown)."""
        stream.transport.pause_reading()
        self.held[stream] = asyncio.get_running_loop().call_later(seconds, self._close_held, stream)

    def _close_held(self, stream) -> None:
        self.held.pop(stream, None)
        stream.abort()

    def close_held(self) -> None:
        for stream, timer in list(self.held.items()):
            timer.cancel()
            self._close_held(stream)

    def release(self, ip: str, listener: str) -> None:
        for counter, key in ((self.by_ip, ip), (self.by_listener, listener)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]
