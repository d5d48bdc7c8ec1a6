"""Group configs (the GROUP config resource, KIP-848, KIP-932 and KIP-1071): per-group overrides of the broker's
group settings, set with IncrementalAlterConfigs or AlterConfigs and read with DescribeConfigs, as Kafka 4.2
names, parses and bounds them (its GroupConfig).

Invariants:
- A stored value is the parsed one (an int's digits, a string trimmed), so what DescribeConfigs shows and
  what the coordinators read are one text, as Kafka renders a group config from its parsed value.
- A change is checked on the group's whole resulting set, filled with defaults, as Kafka's controller checks
  it: names first, then every value's type and floor in Kafka's order of definition, then the broker's bounds,
  then each session timeout above its heartbeat interval. The first failure is the answer, in Kafka's words.
- The group coordinator reads a group's streams configs over the broker's ``group.streams.*`` settings; as in
  Kafka 4.2, DescribeConfigs shows Kafka's constant defaults for the ones a group does not set.
"""

from __future__ import annotations

import re

from kbroker.coordinators.group.streams.model import STREAMS_GROUP_CONFIG_DEFAULTS as STREAMS_DEFAULTS
from kbroker.storage.config_values import INT, STRING, Refused, parse_as
from kbroker.storage.java_order import hash_order



class FromBroker(str):
    """The name of the broker config a group config's default is read from."""


B = FromBroker
# group config -> (type, floor of an INT, its default as described, the default Kafka's check fills in where the
# group has no value; each a broker config's value or a constant),
# in Kafka's order of definition, which decides which bad value is named first.
CONFIGS = {
    "consumer.session.timeout.ms": (INT, 1, B("group.consumer.session.timeout.ms"),
                                    B("group.consumer.session.timeout.ms")),
    "consumer.heartbeat.interval.ms": (INT, 1, B("group.consumer.heartbeat.interval.ms"),
                                       B("group.consumer.heartbeat.interval.ms")),
    # (Kafka's check fills the share and streams ones with its own defaults, not the broker's settings)
    "share.session.timeout.ms": (INT, 1, B("group.share.session.timeout.ms"), 45000),
    "share.heartbeat.interval.ms": (INT, 1, B("group.share.heartbeat.interval.ms"), 5000),
    "share.record.lock.duration.ms": (INT, 1000, B("group.share.record.lock.duration.ms"), 30000),
    "share.auto.offset.reset": (STRING, None, "latest", "latest"),
    "share.isolation.level": (STRING, None, "read_uncommitted", "read_uncommitted"),
    **{f"streams.{name}": (INT, floor, STREAMS_DEFAULTS[name], STREAMS_DEFAULTS[name])
       for name, floor in (("session.timeout.ms", 1), ("heartbeat.interval.ms", 1), ("num.standby.replicas", 0),
                           ("initial.rebalance.delay.ms", 0))},
}
# (group config, broker config of its minimum or None, of its maximum), in the order Kafka checks them
BOUNDS = [
    ("consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms",
     "group.consumer.max.heartbeat.interval.ms"),
    ("consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    ("share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    ("share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
     "group.share.max.record.lock.duration.ms"),
    ("streams.heartbeat.interval.ms", "group.streams.min.heartbeat.interval.ms",
     "group.streams.max.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    ("streams.num.standby.replicas", None, "group.streams.max.standby.replicas"),
]
SESSIONS = [("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
            ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
            ("streams.session.timeout.ms", "streams.heartbeat.interval.ms")]
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)
LONG_MAX = (1 << 63) - 1


def duration_ms(text: str) -> int | None:
    """An ISO-8601 duration (``PnDTnHnMn.nS``) as java.time.Duration.parse reads it, in milliseconds; None if
    Java would refuse it (no part, a bare T, a number past a long)."""
    m = _DURATION.fullmatch(text)
    if m is None or m.group(3) == "T" or not any(m.group(i) for i in (2, 4, 5, 6)):
        return None
    sign = -1 if m.group(1) == "-" else 1
    parts = [int(m.group(i)) if m.group(i) else 0 for i in (2, 4, 5, 6)]
    if any(abs(p) > LONG_MAX for p in parts):
        return None
    days, hours, minutes, seconds = parts
    nanos = int((m.group(7) or "").ljust(9, "0")) * (-1 if (m.group(6) or "").startswith("-") else 1)
    total_ns = ((days * 86400 + hours * 3600 + minutes * 60 + seconds) * 10 ** 9 + nanos) * sign
    if abs(total_ns // 10 ** 9) > LONG_MAX:
        return None
    return total_ns // 10 ** 6


def _auto_offset_reset_problem(text: str) -> bool:
    """Whether Kafka's share group strategy refuses ``text``: latest, earliest or by_duration:<a duration not
    below zero>, exactly so (none is a consumer's strategy, not a share group's)."""
    if text in ("latest", "earliest"):
        return False
    if not text.startswith("by_duration:"):
        return True
    ms = duration_ms(text[len("by_duration:"):])
    return ms is None or ms < 0


def _parsed(name: str, raw: str) -> tuple[int | str | None, str | None]:
    """(value, None) or (None, why Kafka's ConfigDef refuses ``raw``): its INT and STRING parse, each config's
    floor or valid strings, and the share group reset strategy's own check."""
    kind, floor, _, _ = CONFIGS[name]
    rule = ("at least", floor) if kind == INT else ("in", *ISOLATION_LEVELS) if name == "share.isolation.level" \
        else None
    try:
        value = parse_as(name, raw, kind, rule)
    except Refused as exc:
        return None, str(exc)
    if name == "share.auto.offset.reset" and _auto_offset_reset_problem(value):
        return None, (f"Invalid value {value} for configuration {name}: Invalid value `{value}` for configuration "
                      f"{name}. The value must be either 'earliest', 'latest' or of the format "
                      "'by_duration:<PnDTnHnMn.nS>'.")
    return value, None


def _bound(config, key: FromBroker | int | str) -> int | str:
    return config[key] if isinstance(key, FromBroker) else key


def default_of(name: str, config) -> str:
    """What DescribeConfigs shows for a config the group does not set."""
    return str(_bound(config, CONFIGS[name][2]))


def value_of(name: str, group_configs: dict[str, str], config) -> str:
    return group_configs.get(name, default_of(name, config))


def checked(configs: dict[str, str | None], config) -> tuple[dict[str, str] | None, str | None]:
    """A group's whole new set of configs as stored (parsed values as text), or (None, why Kafka refuses it)."""
    unknown = [name for name in hash_order(["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
                                            *configs]) if name not in CONFIGS]
    if unknown:
        return None, f"Unknown group config name: {unknown[0]}"
    for name, raw in configs.items():
        if raw is None:   # (a SET with a null value; the handlers refuse it first)
            return None, f"Invalid value null for configuration {name}"
    values = {}
    for name, (_, _, _, fallback) in CONFIGS.items():
        if name in configs:
            values[name], why = _parsed(name, configs[name])
            if why:
                return None, why
        else:
            values[name] = _bound(config, fallback)
    for name, low, high in BOUNDS:
        if low is not None and values[name] < config[low]:
            return None, f"{name} must be greater than or equal to {low}"
        if values[name] > config[high]:
            return None, f"{name} must be less than or equal to {high}"
    for session, heartbeat in SESSIONS:
        if values[session] <= values[heartbeat]:
            return None, f"{session} must be greater than {heartbeat}"
    return {name: str(values[name]) for name in configs}, None
