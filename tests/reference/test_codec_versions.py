"""Each codec against the Produce and Fetch versions that know it, as raw frames side by side: zstd came with
Produce v7 and Fetch v10 (KIP-110), so an older client may neither write nor read it."""

from __future__ import annotations

import pytest

from kbroker.protocol.records import build_batch
from tests.reference.differential import call, same
from tests.reference.test_produce_fetch import PRODUCE, create, records

pytestmark = pytest.mark.reference

FETCH = 1
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("version", [3, 6, 7])
async def test_produce_of_each_codec_at_old_versions(targets, topic, codec, version):
    async def scenario(target):
        await create(target, topic)
        answer = await call(target, PRODUCE, version, {
            "transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [{
                "name": topic, "partition_data": [{"index": 0, "records": build_batch(records(2),
                                                                                      compression=CODECS[codec])}]}]})
        p = answer.responses[0].partition_responses[0]
        return p.error_code, p.base_offset
    await same(targets, scenario)


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
@pytest.mark.parametrize("version", [4, 9, 10])
async def test_fetch_of_each_codec_at_old_versions(targets, topic, codec, version):
    async def scenario(target):
        await create(target, topic)
        written = await call(target, PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [{
                "name": topic, "partition_data": [{"index": 0, "records": build_batch(records(2),
                                                                                      compression=CODECS[codec])}]}]})
        assert written.responses[0].partition_responses[0].error_code == 0
        answer = await call(target, FETCH, version, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""})
        p = answer.responses[0].partitions[0]
        return answer.get("error_code", 0), p.error_code, p.high_watermark, len(p.records or b"") > 0
    await same(targets, scenario)
