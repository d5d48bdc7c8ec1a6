"""ApiVersions' client software name and version (KIP-511), side by side: what Kafka takes, what it refuses
(INVALID_REQUEST), and whether the connection goes on after."""

from __future__ import annotations

import pytest

from kbroker.client.connection import KafkaConnection
from tests.reference.differential import same

pytestmark = pytest.mark.reference

API_VERSIONS, METADATA = 18, 3


@pytest.mark.parametrize("name, version", [
    ("librdkafka", "2.12.0"), ("a", "1"), ("bad name", "1"), ("-leading", "1"), ("trailing-", "1"),
    ("dots.and-dashes", "1.0-rc.1"), ("", ""), ("name", "1 2"), ("ünicode", "1"), ("x" * 300, "1")])
async def test_client_software_names_and_versions(targets, name, version):
    async def scenario(target):
        conn = await KafkaConnection.open("127.0.0.1", target.port, client_id="differential")
        try:
            answer = await conn.request(API_VERSIONS, 3, {"client_software_name": name,
                                                          "client_software_version": version})
            after = await conn.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False})
            return answer.error_code, len(answer.api_keys) > 0, len(after.brokers)
        finally:
            await conn.close()
    await same(targets, scenario)
