"""Replication throttles (Kafka's ReplicationQuotaManager, used by partition reassignment).

A topic names the replicas whose replication traffic is throttled:
``leader.replication.throttled.replicas`` (``partition:broker`` pairs, where
the broker is a leader sending) and ``follower.replication.throttled.replicas``
(where the broker is a follower fetching), or ``*`` for all. Each broker
measures the bytes of those replicas it sends (leader) or receives (follower)
over ``replication.quota.window.num`` windows of
``replication.quota.window.size.seconds`` and, while the rate is above
``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``
(dynamic broker configs), leaves them out: the leader answers a throttled
replica's fetch without its records, the follower leaves the partition out of
its fetch.

Invariant: a replica in the ISR is never throttled (Kafka's rule: throttling
must not shrink the ISR or hold back the high watermark), nor is anything when
the rate is unset.
"""

from __future__ import annotations

from functools import lru_cache

from kbroker.broker.configuration.config import LONG_MAX
from kbroker.broker.configuration.quotas import Sensor
from kbroker.storage.log_config import throttled_replicas


@lru_cache(maxsize=256)
def _parsed(text: str):
    return throttled_replicas(text) or frozenset()


class ReplicationQuota:
    def __init__(self, broker_id: int, config, rate_key: str, replicas_attr: str | None) -> None:
        """``config``: the broker's (its rates change at runtime); ``replicas_attr``: the LogConfig attribute
        naming the throttled replicas for this side, None when every replica is (moves between log dirs)."""
        self.broker_id = broker_id
        self.config = config
        self.rate_key = rate_key
        self.replicas_attr = replicas_attr
        self.sensor = Sensor(config["replication.quota.window.num"], config["replication.quota.window.size.seconds"])

    def is_throttled(self, partition) -> bool:
        """Whether ``partition``'s replica on this broker is named by its topic's throttled replicas."""
        if self.replicas_attr is None:
            return True
        named = _parsed(getattr(partition.log.config, self.replicas_attr))
        return named == "*" or (partition.index, self.broker_id) in named

    @property
    def rate(self) -> int:
        """Bytes per second allowed now (LONG_MAX: no limit)."""
        return self.config[self.rate_key]

    @property
    def limited(self) -> bool:
        """Whether a rate is set (without one ``holds_back`` is always False)."""
        return self.rate < LONG_MAX

    def throttle_time(self, now: float) -> float:
        """Seconds until the bytes recorded over the window are back at the rate (0 when under it, or with
        no rate set): Kafka's quota throttle time, (observed - limit) / limit x window."""
        limit = self.rate
        if limit >= LONG_MAX:
            return 0.0
        total, window = self.sensor.total_and_window(now)
        return max(total / limit - window, 0.0)

    def is_exceeded(self, now: float) -> bool:
        return self.throttle_time(now) > 0

    def holds_back(self, partition, replica_id: int, now: float) -> bool:
        """Leave ``replica_id``'s copy of ``partition`` out of this round: throttled, out of the ISR, over
        the rate."""
        return (self.limited and replica_id not in partition.isr and self.is_throttled(partition)
                and self.is_exceeded(now))   # (limited first: with no rate set, as is usual, nothing else is read)

    def record(self, partition, size: int, now: float) -> None:
        if size and self.is_throttled(partition):
            self.sensor.record(size, now)


def leader_quota(broker_id: int, config) -> ReplicationQuota:
    return ReplicationQuota(broker_id, config, "leader.replication.throttled.rate",
                            "leader_replication_throttled_replicas")


def follower_quota(broker_id: int, config) -> ReplicationQuota:
    return ReplicationQuota(broker_id, config, "follower.replication.throttled.rate",
                            "follower_replication_throttled_replicas")


def alter_log_dirs_quota(broker_id: int, config) -> ReplicationQuota:
    """Copies between this broker's log dirs (replica.alter.log.dirs.io.max.bytes.per.second), every one."""
    return ReplicationQuota(broker_id, config, "replica.alter.log.dirs.io.max.bytes.per.second", None)
