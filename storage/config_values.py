"""Topic config values read, checked and rendered as Kafka's Java code does it (its ConfigDef and LogConfig), so
that a value Kafka takes is taken, one it refuses is refused in its words, and DescribeConfigs shows the value
as Kafka renders the parsed one.

Invariants:
- A whole set is checked as Kafka's controller checks it: unknown names first (in its hash map's order), then
  every value in the order LogConfig defines them, then min.compaction.lag.ms against max.compaction.lag.ms.
- A type error names the value as sent; a validator names the parsed value (trimmed, a number's digits, a list
  as Java prints one).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from kbroker.storage.java_order import hash_order

INT, LONG, DOUBLE, BOOLEAN, STRING, LIST = "INT", "LONG", "DOUBLE", "BOOLEAN", "STRING", "LIST"
_JAVA_TRIMMED = "".join(chr(c) for c in range(33))   # (String.trim: every char up to the space)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?)")
_HEX_FLOAT = re.compile(r"[+-]?0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+[fFdD]?")
_COMMA = re.compile(r"\s*,\s*")
_THROTTLED_ITEM = re.compile(r"([0-9]+:[0-9]+)?")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# topic config -> (Kafka's type, its validator's arguments), in the order Kafka's LogConfig defines them; the
# two Kafka 4 removed (kept by kbroker for 3.x clients, docs/COMPATIBILITY.md) come last.
TYPES = {
    "segment.bytes": (INT, ("at least", 1 << 20)),
    "segment.ms": (LONG, ("at least", 1)),
    "segment.jitter.ms": (LONG, ("at least", 0)),
    "segment.index.bytes": (INT, ("at least", 4)),
    "flush.messages": (LONG, ("at least", 1)),
    "flush.ms": (LONG, ("at least", 0)),
    "retention.bytes": (LONG, None),
    "retention.ms": (LONG, ("at least", -1)),
    "max.message.bytes": (INT, ("at least", 0)),
    "index.interval.bytes": (INT, ("at least", 0)),
    "delete.retention.ms": (LONG, ("at least", 0)),
    "min.compaction.lag.ms": (LONG, ("at least", 0)),
    "max.compaction.lag.ms": (LONG, ("at least", 1)),
    "file.delete.delay.ms": (LONG, ("at least", 0)),
    "min.cleanable.dirty.ratio": (DOUBLE, ("between", 0, 1)),
    "cleanup.policy": (LIST, ("in", "compact", "delete")),
    "unclean.leader.election.enable": (BOOLEAN, None),
    "min.insync.replicas": (INT, ("at least", 1)),
    "compression.type": (STRING, ("in", *COMPRESSION_TYPES)),
    "compression.gzip.level": (INT, ("gzip",)),
    "compression.lz4.level": (INT, ("between", 1, 17)),
    "compression.zstd.level": (INT, ("between", -131072, 22)),
    "preallocate": (BOOLEAN, None),
    "message.timestamp.type": (STRING, ("in", "CreateTime", "LogAppendTime")),
    "message.timestamp.before.max.ms": (LONG, ("at least", 0)),
    "message.timestamp.after.max.ms": (LONG, ("at least", 0)),
    "leader.replication.throttled.replicas": (LIST, ("throttled",)),
    "follower.replication.throttled.replicas": (LIST, ("throttled",)),
    "internal.segment.bytes": (INT, None),
    "message.format.version": (STRING, None),
    "message.downconversion.enable": (BOOLEAN, None),
}
_BITS = {INT: 32, LONG: 64}


class Refused(ValueError):
    """A value Kafka's ConfigDef refuses; the message is Kafka's."""


def java_double(x: float) -> str:
    """java.lang.Double.toString: decimal from 10^-3 to 10^7, else d.dddE<n>."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        text = repr(x)
        return text if "e" not in text else format(Decimal(text), "f")
    sign, digits, exponent = Decimal(repr(x)).as_tuple()
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    return ("-" if sign else "") + f"{shown[0]}.{shown[1:] or '0'}E{exponent + len(digits) - 1}"


def java_trim(text: str) -> str:
    """java.lang.String.trim: every char up to the space gone from both ends."""
    return text.strip(_JAVA_TRIMMED)


def java_split(text: str, separator: str = ",") -> list[str]:
    """Java's ``text.split(separator)`` (a regex): empty parts kept, trailing ones dropped, all of them if all
    parts are empty; the empty text is one empty part."""
    if not text:
        return [""]
    parts = re.split(separator, text)
    while parts and not parts[-1]:
        parts.pop()
    return parts


def java_int(text: str, bits: int = 32) -> int | None:
    """Integer.parseInt (Long.parseLong for 64 bits) of ``text``: an optional sign and ASCII digits within the
    type's range, else None."""
    if not _INTEGER.fullmatch(text) or not -(1 << bits - 1) <= int(text) < 1 << bits - 1:
        return None
    return int(text)


def render(name: str, value) -> str:
    """A parsed value as Kafka's DescribeConfigs shows it (ConfigDef.convertToString)."""
    kind = TYPES[name][0]
    if kind == LIST:
        return ",".join(value)
    if kind == BOOLEAN:
        return "true" if value else "false"
    if kind == DOUBLE:
        return java_double(value)
    return str(value)


def _java_list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def parse(name: str, raw: str):
    """``raw`` as Kafka parses and validates the topic config ``name``; raises Refused with Kafka's message."""
    return parse_as(name, raw, *TYPES[name])


def parse_as(name: str, raw: str, kind: str, rule):
    """``raw`` parsed as Kafka's ConfigDef parses a config ``name`` of type ``kind`` with the validator ``rule``
    (as in TYPES); raises Refused with Kafka's message."""
    text = java_trim(raw)

    def refused(value, why: str) -> Refused:
        return Refused(f"Invalid value {value} for configuration {name}: {why}")
    if kind in _BITS:
        value = java_int(text, _BITS[kind])
        if value is None:
            raise refused(raw, f"Not a number of type {kind}")
    elif kind == DOUBLE:
        value = _java_parse_double(text)
        if value is None:
            raise refused(raw, "Not a number of type DOUBLE")
    elif kind == BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise refused(raw, "Expected value to be either true or false")
        value = text.lower() == "true"
    elif kind == LIST:
        value = [] if not text else _COMMA.split(text)
    else:
        value = text
    shown = _java_list(value) if kind == LIST else java_double(value) if kind == DOUBLE else value
    if rule is None:
        return value
    if rule[0] in ("at least", "between") and value < rule[1]:   # (NaN passes both, as in Java)
        raise refused(shown, f"Value must be at least {rule[1]}")
    if rule[0] == "between" and value > rule[2]:
        raise refused(shown, f"Value must be no more than {rule[2]}")
    if rule[0] == "gzip" and (value > 9 or (value < 1 and value != -1)):
        raise refused(shown, "Value must be between 1 and 9 or equal to -1")
    if rule[0] == "in" and kind == STRING and value not in rule[1:]:
        raise refused(shown, "String must be one of: " + ", ".join(rule[1:]))
    if rule[0] == "in" and kind == LIST:
        value[:] = dict.fromkeys(value)   # (Kafka drops a list's repeats before its check, with a warning)
        for item in value:
            if not item:
                raise Refused(f"Configuration '{name}' values must not be empty.")
            if item not in rule[1:]:
                raise Refused(f"Invalid value {item} for configuration {name}: String must be one of: "
                              + ", ".join(rule[1:]))
    if rule[0] == "throttled":
        items = [item.strip(_JAVA_TRIMMED) for item in value]
        if not (all(_THROTTLED_ITEM.fullmatch(item) for item in items) or "".join(items) == "*"):
            raise refused(shown, f"{name} must be the literal '*' or a list of replicas in the following format: "
                                 "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return value


def _java_parse_double(text: str) -> float | None:
    """Double.parseDouble of an already trimmed text (a trailing f or d allowed, hex floats too), or None."""
    if _DECIMAL.fullmatch(text):
        body = text.rstrip("fFdD") if not text.endswith("Infinity") else text
        return float(body.replace("Infinity", "inf").replace("NaN", "nan"))
    if _HEX_FLOAT.fullmatch(text):
        return float.fromhex(text.rstrip("fFdD"))
    return None


def normalized(name: str, raw: str) -> str:
    """What Kafka's DescribeConfigs shows for ``raw``, a value it takes."""
    return render(name, parse(name, raw))


def problem(configs: dict[str, str], defaults: dict[str, int] | None = None) -> str | None:
    """Why Kafka refuses a topic's whole set of overrides, in its words, or None. ``defaults``: the broker's
    min.compaction.lag.ms and max.compaction.lag.ms where the set has none."""
    for name in hash_order(configs):
        if name not in TYPES:
            return f"Unknown topic config name: {name}"
    parsed = {}
    for name in TYPES:
        if name in configs:
            try:
                parsed[name] = parse(name, configs[name])
            except Refused as exc:
                return str(exc)
    lags = {**(defaults or {}), **parsed}
    low, high = lags.get("min.compaction.lag.ms", 0), lags.get("max.compaction.lag.ms", (1 << 63) - 1)
    if low > high:
        return f"conflict topic config setting min.compaction.lag.ms ({low}) > max.compaction.lag.ms ({high})"
    return None
