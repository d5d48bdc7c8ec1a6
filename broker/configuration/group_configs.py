"""Group configs (the GROUP config resource, KIP-848 and KIP-932): per-group overrides of the broker's group
settings, set with IncrementalAlterConfigs and read with DescribeConfigs, as Kafka 4 names and bounds them.

Each group config falls back to the broker config it overrides; a value outside the broker's bounds for it
is INVALID_CONFIG, as in Kafka.
"""

from __future__ import annotations

# group config -> the broker config that is its default
DEFAULTS = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
    "share.delivery.count.limit": "group.share.delivery.count.limit",
    "share.auto.offset.reset": None,
    "share.isolation.level": None,
}
FIXED_DEFAULTS = {"share.auto.offset.reset": "latest", "share.isolation.level": "read_uncommitted"}
BOUNDS = {   # group config -> (broker config of its minimum, of its maximum)
    "consumer.session.timeout.ms": ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    "consumer.heartbeat.interval.ms": ("group.consumer.min.heartbeat.interval.ms",
                                       "group.consumer.max.heartbeat.interval.ms"),
    "share.session.timeout.ms": ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "share.heartbeat.interval.ms": ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    "share.record.lock.duration.ms": ("group.share.min.record.lock.duration.ms",
                                      "group.share.max.record.lock.duration.ms"),
    "share.delivery.count.limit": ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
}


def default_of(name: str, config) -> str:
    broker_key = DEFAULTS[name]
    return str(config[broker_key]) if broker_key else FIXED_DEFAULTS[name]


def value_of(name: str, group_configs: dict[str, str], config) -> str:
    return group_configs.get(name, default_of(name, config))


def validate(configs: dict[str, str], config) -> str | None:
    """Why ``configs`` cannot be a group's, or None."""
    for name, text in configs.items():
        if name not in DEFAULTS:
            return f"Unknown group config name: {name}"
        if text is None:   # (a SET with a null value)
            return f"Invalid value null for configuration {name}"
        if name == "share.auto.offset.reset":
            if text not in ("latest", "earliest") and not text.startswith("by_duration:"):
                return f"Invalid value {text} for configuration {name}: must be latest, earliest or by_duration:<ISO-8601>"
            continue
        if name == "share.isolation.level":
            if text not in ("read_uncommitted", "read_committed"):
                return f"Invalid value {text} for configuration {name}: String must be one of: read_committed, " \
                       "read_uncommitted"
            continue
        try:
            value = int(text)
        except ValueError:
            return f"Invalid value {text} for configuration {name}: Not a number of type INT"
        low, high = (config[k] for k in BOUNDS[name])
        if not low <= value <= high:
            return f"Invalid value {text} for configuration {name}: must be between {low} and {high}"
    return None
