"""How many connections a broker takes, from whom, and for how long they may sit idle.

* ``max.connections.per.ip`` (with ``max.connections.per.ip.overrides``,
  ``host:count`` pairs): a new connection from an address at its limit is
  closed at once, as Kafka's acceptor closes it;
* ``max.connections`` (broker-wide, and per listener as
  ``listener.name.<l>.max.connections``): a connection beyond it is closed at
  once (Kafka leaves it in the accept backlog until a slot frees; an asyncio
  server cannot pause accepting). The inter-broker listener is exempt from the
  broker-wide limit, as in Kafka, so replication never starves behind clients;
* ``connections.max.idle.ms``: a connection that has read no request and owes
  no response for that long is closed.
"""

from __future__ import annotations

from collections import Counter

from kbroker.broker.config import ConfigError


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


class ConnectionLimits:
    def __init__(self, config) -> None:
        self.reconfigure(config)
        self.inter_broker_listener = config.inter_broker_listener
        self.idle_ms = config["connections.max.idle.ms"]
        self.by_ip: Counter = Counter()
        self.by_listener: Counter = Counter()

    def reconfigure(self, config) -> None:
        """Take the limits from ``config`` (at start and on a dynamic change). Connections already open stay,
        as in Kafka; a lower limit refuses new ones until enough have closed."""
        self.per_ip = config["max.connections.per.ip"]
        self.per_ip_overrides = parse_overrides(config["max.connections.per.ip.overrides"])
        self.total = config["max.connections"]
        self.per_listener = {name: config.for_listener(name)("max.connections") for name, _, _ in config.listeners}

    def admit(self, ip: str, listener: str) -> str | None:
        """Count the connection in and return None, or the reason it is refused (nothing counted)."""
        limit = self.per_ip_overrides.get(ip, self.per_ip)
        if self.by_ip[ip] >= limit:
            return f"{ip} has {self.by_ip[ip]} connections (max.connections.per.ip {limit})"
        if self.by_listener[listener] >= self.per_listener.get(listener, self.total):
            return f"listener {listener} has {self.by_listener[listener]} connections (max.connections)"
        if listener != self.inter_broker_listener and sum(self.by_listener.values()) >= self.total:
            return f"the broker has {sum(self.by_listener.values())} connections (max.connections)"
        self.by_ip[ip] += 1
        self.by_listener[listener] += 1
        return None

    def release(self, ip: str, listener: str) -> None:
        for counter, key in ((self.by_ip, ip), (self.by_listener, listener)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]
