"""Feature versions (KIP-584) as ApiVersions v3+ reports them: what this broker supports and what is finalized.

Kafka 4 turns protocol features on through finalized feature levels that clients read from ApiVersions:
``group.version`` 1 is KIP-848's consumer group protocol, ``share.version`` 1 KIP-932's share groups,
``streams.version`` 1 KIP-1071's streams groups,
``transaction.version`` 2 KIP-890's transactions V2 (a client that reads it ends each transaction with
EndTxn v5, which bumps its epoch, and lets the partition leader add partitions from Produce v12 and the
group coordinator the offsets from TxnOffsetCommit v5, without AddPartitionsToTxn or AddOffsetsToTxn).
kbroker reports only the features whose behaviour it implements, each finalized at the level it serves; a
client that finds no level for a feature reads it as level 0, as from a Kafka broker that predates it.

UpdateFeatures (57) raises or lowers a level within what is served (stored in the metadata store, and in
ZooKeeper's ``/feature`` in a cluster, where every broker applies it from the change notification); the
epoch ApiVersions reports counts those updates.

Invariant: a feature is finalized at a level only while the behaviour of that level is served (the consumer
protocol off through ``group.coordinator.rebalance.protocols`` finalizes ``group.version`` at 0, whatever was
stored), and what is served follows the finalized level (``group.version`` 0 refuses ConsumerGroupHeartbeat,
``share.version`` 0 the share group APIs, ``streams.version`` 0 the streams group APIs).
"""

from __future__ import annotations

from kbroker.protocol.errors import ErrorCode

SUPPORTED = {"group.version": (0, 1), "share.version": (0, 1), "streams.version": (0, 1),
             "transaction.version": (0, 2)}
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def ceilings(config) -> dict[str, int]:
    """The highest level of each feature this broker serves as configured (the consumer protocol, share and
    streams groups can be turned off by their configs), which is also its level until UpdateFeatures sets one."""
    return {"group.version": 1 if "consumer" in config["group.coordinator.rebalance.protocols"] else 0,
            "share.version": 1 if config["group.share.enable"] else 0,
            "streams.version": 1 if "streams" in config["group.coordinator.rebalance.protocols"] else 0,
            "transaction.version": 2}


def finalized(config, stored: dict[str, int] | None = None) -> dict[str, int]:
    """Each feature's level: the one UpdateFeatures stored (``stored``), never above what is served."""
    stored = stored or {}
    return {name: min(stored.get(name, ceiling), ceiling) for name, ceiling in ceilings(config).items()}


def level(broker, name: str) -> int:
    """The level of ``name`` this broker serves now."""
    return finalized(broker.config, broker.metadata.features)[name]


def update_error(name: str, level: int, upgrade_type: int, config, stored: dict[str, int]) -> str | None:
    """Why UpdateFeatures cannot set ``name`` to ``level`` (Kafka's words), or None."""
    if name not in SUPPORTED:
        return f"Invalid update version {level} for feature {name}. The broker does not support this feature."
    low, high = SUPPORTED[name][0], ceilings(config)[name]
    if not low <= level <= high:
        return f"Invalid update version {level} for feature {name}. The broker only supports versions {low}-{high}"
    current = finalized(config, stored)[name]
    if level < current and upgrade_type == UPGRADE:
        return (f"Invalid update version {level} for feature {name}. Can't downgrade the version of this feature "
                "without setting the upgrade type to either safe or unsafe downgrade.")
    if level > current and upgrade_type != UPGRADE:
        return f"Invalid update version {level} for feature {name}. Can't downgrade to a newer version."
    return None


def update(updates: list[tuple[str, int, int]], config, stored: dict[str, int]) -> tuple[ErrorCode, str | None]:
    """(error, message) of (feature, level, upgrade type) updates, all or none, as Kafka checks them."""
    for name, level, upgrade_type in updates:
        problem = update_error(name, level, upgrade_type, config, stored)
        if problem:
            return ErrorCode.INVALID_UPDATE_VERSION, ("The update failed for all features since the following "
                                                      f"feature had an error: {problem}")
    return ErrorCode.NONE, None


def api_versions_features(config, stored: dict[str, int] | None = None, epoch: int = 0, *,
                          version: int = 4) -> dict:
    """The feature fields of an ApiVersions v3+ answer (a level 0 feature is not listed as finalized). An answer
    to v3 lists no supported feature whose range starts at 0, as Kafka's (KAFKA-17492): Java clients before 3.9
    send v3 and refuse such a range, failing the whole connection (an AdminClient's thread exits)."""
    return {"supported_features": [{"name": n, "min_version": lo, "max_version": hi}
                                   for n, (lo, hi) in sorted(SUPPORTED.items()) if lo > 0 or version >= 4],
            "finalized_features_epoch": epoch + 1,
            "finalized_features": [{"name": n, "min_version_level": level, "max_version_level": level}
                                   for n, level in sorted(finalized(config, stored).items()) if level > 0]}
