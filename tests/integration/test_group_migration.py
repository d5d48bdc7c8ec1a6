"""Online migration of a running group between the classic and the consumer protocol with librdkafka
consumers in their own processes: members restart one by one with the other ``group.protocol`` while the
group consumes, the group changes type under them, and no record committed is read again."""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient

from tests.integration.groupworkers import Worker, check_at_least_once, commit_start, consumed, fill, wait_until
from tests.integration.workload import make_topic


def group_type(bootstrap: str, group: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(10)
    return {g.group_id: g.type for g in listed.valid}.get(group)


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_a_running_group_moves_to_the_consumer_protocol_and_back(broker, topic_name, assignor):
    count = 6000
    make_topic(broker.bootstrap, topic_name, partitions=4)
    fill(broker.bootstrap, topic_name, count)
    group = f"group-{topic_name}"
    commit_start(broker.bootstrap, topic_name, group, 4)
    workers: list[Worker] = []

    def start(name: str, protocol: str) -> Worker:
        options = dict(protocol=protocol, batch=20, process_ms=15,
                       assignor="uniform" if protocol == "consumer" else assignor)
        workers.append(Worker("confluent", broker.bootstrap, topic_name, group, name=name, **options))
        return workers[-1]

    def split_between(*members: Worker) -> bool:
        owned = [m.owned() for m in members]
        return all(owned) and set().union(*owned) == set(range(4)) and sum(map(len, owned)) == 4

    try:
        c0, c1 = start("c0", "classic"), start("c1", "classic")
        wait_until(lambda: split_between(c0, c1), 60, "two classic members", workers)
        assert group_type(broker.bootstrap, group) == ConsumerGroupType.CLASSIC
        c0.terminate()
        n0 = start("n0", "consumer")   # its first heartbeat converts the running classic group
        wait_until(lambda: split_between(n0, c1), 60, "a consumer member beside the classic one", workers)
        assert group_type(broker.bootstrap, group) == ConsumerGroupType.CONSUMER
        c1.terminate()
        n1 = start("n1", "consumer")
        wait_until(lambda: split_between(n0, n1), 60, "two consumer members", workers)
        progress = len(consumed(workers))
        c2, c3 = start("c2", "classic"), start("c3", "classic")   # classic members join the consumer group
        wait_until(lambda: split_between(n0, n1, c2, c3), 60, "four members of both protocols", workers)
        assert group_type(broker.bootstrap, group) == ConsumerGroupType.CONSUMER
        n0.terminate()
        n1.terminate()   # the last consumer member leaves: the group is classic again
        wait_until(lambda: split_between(c2, c3), 60, "the classic members alone", workers)
        assert group_type(broker.bootstrap, group) == ConsumerGroupType.CLASSIC
        wait_until(lambda: len(consumed(workers)) == count, 90, "every record consumed", workers)
        assert progress < count, "the group had finished before it migrated back"
    finally:
        for w in workers:
            w.terminate()
    check_at_least_once(workers, count)
