"""Describing APIs at their edges, side by side: DescribeTransactions and ListTransactions filters,
DescribeCluster's endpoint types, DescribeLogDirs by partition."""

from __future__ import annotations

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_produce_fetch import create_written

pytestmark = pytest.mark.reference

FIND_COORDINATOR, DESCRIBE_LOG_DIRS, DESCRIBE_CLUSTER, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 10, 35, 60, 65, 66


@pytest.mark.parametrize("case", ["an unknown id", "an empty id"])
async def test_describe_transactions(targets, topic, case):
    transactional_id = f"t-{topic}" if case == "an unknown id" else ""

    async def scenario(target):
        # (the transaction coordinator's topic exists from the first FindCoordinator of a transactional id)
        await settled(lambda: call(target, FIND_COORDINATOR, 3, {"key": f"t-{topic}", "key_type": 1}),
                      lambda a: a.error_code == 0)
        answer = await settled(lambda: call(target, DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]}),
                               lambda a: a.transaction_states[0].error_code not in (14, 15, 16))
        return [(s.error_code, s.transaction_state, s.transaction_timeout_ms, s.transaction_start_time_ms,
                 s.producer_id, s.producer_epoch, len(s.topics)) for s in answer.transaction_states]
    await same(targets, scenario)


@pytest.mark.parametrize("case", ["an unknown state", "an invalid pattern", "a negative duration",
                                  "an unknown producer"])
async def test_list_transactions_filters(targets, topic, case):
    request = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1, "transactional_id_pattern": None}
    request.update({"an unknown state": {"state_filters": ["NoSuchState"]},
                    "an invalid pattern": {"transactional_id_pattern": "[bad"},
                    "a negative duration": {"duration_filter": -5},
                    "an unknown producer": {"producer_id_filters": [123456789]}}[case])

    async def scenario(target):
        answer = await call(target, LIST_TRANSACTIONS, 2, request)
        return answer.error_code, sorted(answer.unknown_state_filters), [
            t.transactional_id for t in answer.transaction_states if t.transactional_id.endswith(topic)]
    await same(targets, scenario)


@pytest.mark.parametrize("endpoint_type", [1, 2, 9])
async def test_describe_cluster_endpoint_types(targets, endpoint_type):
    async def scenario(target):
        answer = await call(target, DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False,
                                                          "endpoint_type": endpoint_type})
        return answer.error_code, answer.error_message is not None, answer.endpoint_type, len(answer.brokers)
    await same(targets, scenario)


@pytest.mark.parametrize("case", ["both partitions", "an unknown topic", "a partition the topic lacks"])
async def test_describe_log_dirs_by_partition(targets, topic, case):
    async def scenario(target):
        await create_written(target, topic, [1, 1])
        topics = {"both partitions": [{"topic": topic, "partitions": [0, 1]}],
                  "an unknown topic": [{"topic": f"{topic}-none", "partitions": [0]}],
                  "a partition the topic lacks": [{"topic": topic, "partitions": [9]}]}[case]
        answer = await call(target, DESCRIBE_LOG_DIRS, 4, {"topics": topics})
        return answer.error_code, [(r.error_code, sorted((t.name == topic, sorted(p.partition_index for p in t.partitions))
                                                         for t in r.topics)) for r in answer.results]
    await same(targets, scenario)
