"""Client metrics subscriptions (the CLIENT_METRICS config resource, KIP-714), as Kafka names, checks and
matches them.

A subscription is a named set of three configs: ``metrics`` (metric name prefixes, ``*`` for all),
``interval.ms`` (how often matching clients push, 100 ms to an hour, default 5 minutes) and ``match``
(``<attribute>=<regex>`` entries a client must all match in full; none matches every client). The attributes
are the client's instance id, client id, software name and version (from its ApiVersions), source address
and port.
"""

from __future__ import annotations

import re

from kbroker.protocol.errors import ErrorCode

METRICS, INTERVAL, MATCH = "metrics", "interval.ms", "match"
NAMES = (METRICS, INTERVAL, MATCH)
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
ALL_METRICS = "*"
ATTRIBUTES = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
              "client_source_address", "client_source_port")


def as_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def patterns(entries: list[str]) -> dict[str, re.Pattern]:
    """``match``'s entries by attribute; ValueError naming the first that is not ``<attribute>=<regex>``."""
    out = {}
    for entry in entries:
        parts = _java_split(entry, "=")
        if len(parts) != 2 or parts[0].strip() not in ATTRIBUTES:
            raise ValueError(f"Illegal client matching pattern: {entry}")
        try:
            out[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise ValueError(f"Illegal client matching pattern: {entry}") from None
    return out


def _java_split(text: str, separator: str) -> list[str]:
    """``text.split(separator)`` as Java's ``String.split`` does it, which Kafka splits an entry with: trailing
    empty strings are dropped, so ``client_id=`` is one part (refused) and ``client_id=a==`` two (``a``)."""
    parts = text.split(separator)
    while len(parts) > 1 and not parts[-1]:
        parts.pop()
    return parts


def error(name: str, configs: dict[str, str]) -> tuple[ErrorCode, str] | None:
    """Why ``configs`` cannot be subscription ``name``'s, with Kafka's error code, or None."""
    if not name:
        return ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"
    for key, value in configs.items():
        if key not in NAMES:
            return ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}"
        if value is None:   # (a SET with a null value)
            return ErrorCode.INVALID_CONFIG, f"Invalid value null for configuration {key}"
    if INTERVAL in configs:
        try:
            interval = int(configs[INTERVAL])
        except ValueError:
            return ErrorCode.INVALID_CONFIG, f"Invalid value {configs[INTERVAL]} for configuration {INTERVAL}: " \
                                             "Not a number of type INT"
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            return ErrorCode.INVALID_REQUEST, f"Invalid value {interval} for {INTERVAL}, interval must be between " \
                                              f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)"
    try:
        patterns(as_list(configs.get(MATCH, "")))
    except ValueError as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    return None


class Subscription:
    """One subscription, parsed: what it asks for, how often, of which clients."""

    def __init__(self, name: str, configs: dict[str, str]) -> None:
        self.name = name
        self.metrics = as_list(configs.get(METRICS, ""))
        self.interval_ms = int(configs.get(INTERVAL, DEFAULT_INTERVAL_MS))
        self.match = patterns(as_list(configs.get(MATCH, "")))

    def matches(self, attributes: dict[str, str]) -> bool:
        return all(p.fullmatch(attributes.get(key, "")) for key, p in self.match.items())


def described(configs: dict[str, str]) -> list[tuple[str, str, bool]]:
    """(name, value, is it the default) of each config, as DescribeConfigs lists them."""
    defaults = {METRICS: "", INTERVAL: str(DEFAULT_INTERVAL_MS), MATCH: ""}
    return [(key, configs.get(key, defaults[key]), key not in configs) for key in NAMES]
