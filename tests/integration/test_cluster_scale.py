"""A cluster's work at a change grows with what changed, not with every partition it holds: a follower killed
with kill -9 and started again rejoins the ISRs of hundreds of partitions in a few AlterPartition requests from
their leaders (Kafka's AlterPartitionManager sends what waits together, one request in flight), and the
controller tells the brokers only the partitions that changed. Each ISR change in a request of its own, and an
UpdateMetadata of every partition after each, took a follower 150 s to rejoin 2,000 partitions."""

from __future__ import annotations

import pytest

from tests.cluster import Cluster, controller_of, create, describe, wait_until
from tests.integration.test_metrics import metrics_port, scrape

pytestmark = pytest.mark.timeout(240)
PARTITIONS = 300


def _answered(broker, api: str) -> float:
    """How many ``api`` requests ``broker`` has answered, at every version."""
    return sum(v for (name, labels), v in scrape(metrics_port(broker)).items()
               if name == "kafka_network_requestmetrics_requests_total" and dict(labels).get("request") == api)


def _isr_sizes(cluster, topic: str) -> set[int]:
    return {len(p["isr"]) for p in describe(cluster.bootstrap, topic).values()}


def test_a_follower_back_from_kill_9_rejoins_hundreds_of_isrs_in_a_few_requests(tmp_path, topic_name):
    cluster = Cluster(str(tmp_path), overrides={"metrics.port": "0"}).start()
    try:
        create(cluster.bootstrap, topic_name, PARTITIONS, 3)
        wait_until(lambda: _isr_sizes(cluster, topic_name) == {3}, 60, 0.2, "every replica in sync")
        controller = cluster.brokers[controller_of(cluster)]
        victim = next(b for b in cluster.brokers.values() if b is not controller)
        victim.kill()
        wait_until(lambda: _isr_sizes(cluster, topic_name) == {2}, 60, 0.2, "the killed follower out of every ISR")
        before = _answered(controller, "AlterPartition")
        victim.start()
        wait_until(lambda: _isr_sizes(cluster, topic_name) == {3}, 90, 0.5, "the follower back in every ISR")
        requests = _answered(controller, "AlterPartition") - before
        # (the follower is back in 300 ISRs, all led by the two others since the kill: a request per change
        # would be 300)
        assert 2 <= requests <= PARTITIONS / 10, f"{requests} AlterPartition requests for {PARTITIONS} partitions"
    finally:
        cluster.stop()
