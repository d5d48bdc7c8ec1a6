"""How Fetch bounds what it answers, side by side: response and partition max bytes of zero, of less than one
batch, and of more than one; where a read starts inside a batch; a fetch below the log start; the first
batch given whole however small the bounds (KIP-74), and what follows left out."""

from __future__ import annotations

import pytest

from kbroker.protocol.records import build_batch, split_batches
from tests.reference.differential import call, same
from tests.reference.test_produce_fetch import create, produce, records
from tests.reference.test_share_groups import topic_id_of

pytestmark = pytest.mark.reference

FETCH = 1
CASES = {   # case -> (fetch offset, response max bytes, partition max bytes)
    "everything": (0, 1 << 20, 1 << 20),
    "response max 0": (0, 0, 1 << 20),
    "partition max 0": (0, 1 << 20, 0),
    "both below a batch": (0, 10, 10),
    "partition max of one batch and a bit": (0, 1 << 20, 400),
    "response max of one batch and a bit": (0, 400, 1 << 20),
    "from inside the first batch": (2, 1 << 20, 1 << 20),
    "from inside the last batch": (11, 10, 10),
    "below the log start": (0, 1 << 20, 1 << 20),
}


@pytest.mark.parametrize("version", [4, 12, 16])
@pytest.mark.parametrize("case", list(CASES))
async def test_what_a_fetch_answers(targets, topic, case, version):
    offset, max_bytes, partition_max = CASES[case]

    async def scenario(target):
        await create(target, topic)
        for _ in range(4):   # four batches of three records, about 300 bytes each
            await produce(target, topic, build_batch(records(3, size=60)))
        if case == "below the log start":
            await call(target, 21, 2, {"topics": [{"name": topic, "partitions": [{"partition_index": 0,
                                                                                  "offset": 4}]}],
                                       "timeout_ms": 5000})
        partition = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                     "partition_max_bytes": partition_max, "last_fetched_epoch": -1}
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
                "topics": [{"topic": topic, "topic_id": await topic_id_of(target, topic) if version >= 13 else
                            bytes(16), "partitions": [partition]}]}
        answer = await call(target, FETCH, version, body)
        p = answer.responses[0].partitions[0]
        data = bytes(p.records or b"")
        return (answer.error_code, p.error_code, p.high_watermark, p.log_start_offset,
                [(h.base_offset, h.records_count) for _, h in split_batches(data)], len(data) > 0)
    await same(targets, scenario)
