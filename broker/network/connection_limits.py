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
* ``connections.max.idle.ms``: a connection that has read no request and owes
  no response for that long is closed.

Every refusal is counted by listener and by the limit that refused it (``refused``, a metric).
"""

from __future__ import annotations

import time
from collections import Counter

from kbroker.broker.configuration.config import ConfigError


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


class CreationRate:
    """At most ``rate`` new connections a second: a token bucket that holds one second's worth, so a burst of
    up to ``rate`` after a quiet second is let through, as Kafka's one-second rate windows let it through."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self.tokens = float(rate)
        self.at = time.monotonic()

    def admit(self) -> bool:
        now = time.monotonic()
        self.tokens = min(float(self.rate), self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


UNLIMITED = 2147483647


class ConnectionLimits:
    def __init__(self, config) -> None:
        self.reconfigure(config)
        self.inter_broker_listener = config.inter_broker_listener
        self.idle_ms = config["connections.max.idle.ms"]
        self.by_ip: Counter = Counter()
        self.by_listener: Counter = Counter()
        self.refused: Counter = Counter()   # (listener, limit name) -> connections refused

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

    def admit(self, ip: str, listener: str) -> str | None:
        """Count the connection in and return None, or the reason it is refused (nothing counted)."""
        refusal = self._refusal(ip, listener)
        if refusal is not None:
            self.refused[(listener, refusal[0])] += 1
            return refusal[1]
        self.by_ip[ip] += 1
        self.by_listener[listener] += 1
        return None

    def _refusal(self, ip: str, listener: str) -> tuple[str, str] | None:
        limit = self.per_ip_overrides.get(ip, self.per_ip)
        if self.by_ip[ip] >= limit:
            return "max.connections.per.ip", f"{ip} has {self.by_ip[ip]} connections (max.connections.per.ip {limit})"
        if self.by_listener[listener] >= self.per_listener.get(listener, self.total):
            return "max.connections", f"listener {listener} has {self.by_listener[listener]} connections " \
                                      "(max.connections)"
        client = listener != self.inter_broker_listener
        if client and sum(self.by_listener.values()) >= self.total:
            return "max.connections", f"the broker has {sum(self.by_listener.values())} connections " \
                                      "(max.connections)"
        rate = self.rate_per_listener.get(listener) or (self.rate if client else None)
        if rate is not None and not rate.admit():
            return "max.connection.creation.rate", f"listener {listener} is over {rate.rate} new connections " \
                                                   "a second (max.connection.creation.rate)"
        return None

    def release(self, ip: str, listener: str) -> None:
        for counter, key in ((self.by_ip, ip), (self.by_listener, listener)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]
