"""UpdateFeatures (KIP-584) on a real broker: a finalized level lowered or raised is what ApiVersions reports,
what the broker serves (group.version 0 refuses the consumer group protocol, share.version 0 share groups,
streams.version 0 streams groups)
and what it keeps across a restart; bad updates change nothing."""

from __future__ import annotations

import asyncio
import time

import pytest

from kbroker.client.connection import KafkaConnection
from kbroker.protocol.errors import ErrorCode as E
from tests.brokerproc import BrokerProcess
from tests.streams_requests import STREAMS_GROUP_HEARTBEAT, join, subtopology

pytestmark = pytest.mark.timeout(120)
API_VERSIONS, UPDATE_FEATURES, CONSUMER_GROUP_HEARTBEAT, SHARE_GROUP_HEARTBEAT = 18, 57, 68, 76
UPGRADE, SAFE_DOWNGRADE = 1, 2


async def finalized(conn) -> tuple[dict[str, int], int]:
    answer = await conn.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    return {f.name: f.max_version_level for f in answer.finalized_features}, answer.finalized_features_epoch


async def update(conn, *changes, validate_only=False) -> int:
    answer = await conn.request(UPDATE_FEATURES, 2, {"timeout_ms": 10000, "validate_only": validate_only,
                                                     "feature_updates": [
        {"feature": f, "max_version_level": level, "upgrade_type": kind} for f, level, kind in changes]})
    return answer.error_code


async def coordinator_ready(conn, group: str) -> None:
    """FindCoordinator until the group has one (the first makes the internal topic)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        found = await conn.request(10, 4, {"key_type": 0, "coordinator_keys": [group]})
        if found.coordinators[0].error_code == 0:
            return
        await asyncio.sleep(0.05)   # (polling the broker process for its internal topic)
    raise AssertionError(f"no coordinator for {group}")


async def consumer_heartbeat(conn) -> int:
    await coordinator_ready(conn, "features-g")
    answer = await conn.request(CONSUMER_GROUP_HEARTBEAT, 0, {
        "group_id": "features-g", "member_id": "", "member_epoch": 0, "instance_id": None, "rack_id": None,
        "rebalance_timeout_ms": 30000, "subscribed_topic_names": ["t"], "server_assignor": None,
        "topic_partitions": []})
    return answer.error_code


async def share_heartbeat(conn) -> int:
    await coordinator_ready(conn, "features-s")
    answer = await conn.request(SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": "features-s", "member_id": "m" * 22, "member_epoch": 0, "rack_id": None,
        "subscribed_topic_names": ["t"]})
    return answer.error_code


async def streams_heartbeat(conn) -> int:
    await coordinator_ready(conn, "features-st")
    answer = await conn.request(STREAMS_GROUP_HEARTBEAT, 0, join("features-st", "m" * 22,
                                                                  [subtopology("0", sources=["t"])]))
    return answer.error_code


async def test_levels_lowered_and_raised_decide_what_is_served_and_survive_a_restart(tmp_path):
    broker = BrokerProcess(str(tmp_path / "data")).start()
    try:
        conn = await KafkaConnection.open("127.0.0.1", broker.port)
        levels, epoch = await finalized(conn)
        assert levels == {"group.version": 1, "share.version": 1, "streams.version": 1, "transaction.version": 2}
        # all or none: one bad update leaves the good one undone too
        assert await update(conn, ("transaction.version", 1, SAFE_DOWNGRADE), ("group.version", 2, UPGRADE)) == \
            E.INVALID_UPDATE_VERSION
        assert await update(conn, ("group.version", 0, UPGRADE)) == E.INVALID_UPDATE_VERSION
        assert await update(conn, ("group.version", 0, SAFE_DOWNGRADE), validate_only=True) == 0
        assert await finalized(conn) == (levels, epoch)
        assert await update(conn, ("group.version", 0, SAFE_DOWNGRADE), ("share.version", 0, SAFE_DOWNGRADE),
                            ("streams.version", 0, SAFE_DOWNGRADE), ("transaction.version", 1, SAFE_DOWNGRADE)) == 0
        assert await finalized(conn) == ({"transaction.version": 1}, epoch + 1)
        assert await consumer_heartbeat(conn) == E.UNSUPPORTED_VERSION
        assert await share_heartbeat(conn) == E.UNSUPPORTED_VERSION
        assert await streams_heartbeat(conn) == E.UNSUPPORTED_VERSION
        await conn.close()
        broker.stop()
        broker.start()
        conn = await KafkaConnection.open("127.0.0.1", broker.port)
        assert await finalized(conn) == ({"transaction.version": 1}, epoch + 1)
        assert await update(conn, ("group.version", 1, UPGRADE), ("share.version", 1, UPGRADE),
                            ("streams.version", 1, UPGRADE), ("transaction.version", 2, UPGRADE)) == 0
        assert (await finalized(conn))[0] == levels
        assert await consumer_heartbeat(conn) == 0
        assert await share_heartbeat(conn) == 0
        assert await streams_heartbeat(conn) == 0
        await conn.close()
    finally:
        broker.stop()


async def test_a_level_cannot_go_past_what_the_configuration_serves(tmp_path):
    broker = BrokerProcess(str(tmp_path / "data"), {"group.coordinator.rebalance.protocols": "classic",
                                                    "group.share.enable": "false"}).start()
    try:
        conn = await KafkaConnection.open("127.0.0.1", broker.port)
        levels = (await finalized(conn))[0]
        assert not {"group.version", "share.version", "streams.version"} & set(levels)
        assert await update(conn, ("group.version", 1, UPGRADE)) == E.INVALID_UPDATE_VERSION
        assert await update(conn, ("streams.version", 1, UPGRADE)) == E.INVALID_UPDATE_VERSION
        assert await update(conn, ("share.version", 1, UPGRADE)) == E.INVALID_UPDATE_VERSION
        assert await consumer_heartbeat(conn) == E.UNSUPPORTED_VERSION
        assert await share_heartbeat(conn) == E.UNSUPPORTED_VERSION
        assert await streams_heartbeat(conn) == E.UNSUPPORTED_VERSION
        await conn.close()
    finally:
        broker.stop()
