"""Feature versions (KIP-584) as ApiVersions v3+ reports them: what this broker supports and what is finalized.

Kafka 4 turns protocol features on through finalized feature levels that clients read from ApiVersions:
``group.version`` 1 is KIP-848's consumer group protocol, ``share.version`` 1 KIP-932's share groups,
``transaction.version`` 2 KIP-890's transactions V2 (a client that reads it ends each transaction with
EndTxn v5, which bumps its epoch, and lets the partition leader add partitions from Produce v12 and the
group coordinator the offsets from TxnOffsetCommit v5, without AddPartitionsToTxn or AddOffsetsToTxn).
kbroker reports only the features whose behaviour it implements, each finalized at the level it serves; a
client that finds no level for a feature reads it as level 0, as from a Kafka broker that predates it.

Invariant: a feature is finalized at a level only while the behaviour of that level is served (the consumer
protocol off through ``group.coordinator.rebalance.protocols`` finalizes ``group.version`` at 0).
"""

from __future__ import annotations

SUPPORTED = {"group.version": (0, 1), "share.version": (0, 1), "transaction.version": (0, 2)}
FINALIZED_EPOCH = 1   # finalized levels follow from the configuration; they change only with a restart


def finalized(config) -> dict[str, int]:
    return {"group.version": 1 if "consumer" in config["group.coordinator.rebalance.protocols"] else 0,
            "share.version": 1 if config["group.share.enable"] else 0,
            "transaction.version": 2}


def api_versions_features(config) -> dict:
    """The feature fields of an ApiVersions v3+ answer (a level 0 feature is not listed as finalized)."""
    return {"supported_features": [{"name": n, "min_version": lo, "max_version": hi}
                                   for n, (lo, hi) in sorted(SUPPORTED.items())],
            "finalized_features_epoch": FINALIZED_EPOCH,
            "finalized_features": [{"name": n, "min_version_level": level, "max_version_level": level}
                                   for n, level in sorted(finalized(config).items()) if level > 0]}
