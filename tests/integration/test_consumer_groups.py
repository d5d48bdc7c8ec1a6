"""Consumer groups with real clients in their own processes: split, rebalance, crash, resume.

Every scenario uses each of aiokafka, kafka-python and confluent-kafka
(librdkafka). Consumers commit after processing each batch, so delivery is
at-least-once: a record may come again only if its commit was never
acknowledged (checked against every worker's reports on one monotonic clock).
"""

from __future__ import annotations

import pytest

from tests.integration.groupworkers import Worker, check_at_least_once, commit_start, consumed, fill, wait_until
from tests.integration.workload import make_topic

CLIENTS = ["aiokafka", "kafka-python", "confluent"]
DEFAULT_ASSIGNOR = {"aiokafka": "roundrobin", "kafka-python": "range", "confluent": "range"}
ASSIGNORS = [("aiokafka", "range"), ("aiokafka", "roundrobin"), ("aiokafka", "sticky"),
             ("kafka-python", "range"), ("kafka-python", "roundrobin"), ("kafka-python", "sticky"),
             ("confluent", "range"), ("confluent", "roundrobin")]


def stop_all(workers: list[Worker]) -> None:
    for w in workers:
        w.terminate()


@pytest.mark.parametrize("client", CLIENTS)
def test_members_join_leave_and_crash_without_losing_records(broker, topic_name, client):
    first, later = 3000, 1500
    count = first + later
    make_topic(broker.bootstrap, topic_name, partitions=6)
    fill(broker.bootstrap, topic_name, first)
    group = f"group-{topic_name}"
    commit_start(broker.bootstrap, topic_name, group, 6)
    opts = dict(assignor=DEFAULT_ASSIGNOR[client], session_ms=3000, heartbeat_ms=300, batch=20, process_ms=40)
    workers = [Worker(client, broker.bootstrap, topic_name, group, name=f"w{n}", **opts) for n in range(3)]
    try:
        wait_until(lambda: len(consumed(workers)) >= first * 0.2, 60, "20% consumed", workers)
        workers.append(Worker(client, broker.bootstrap, topic_name, group, name="w3", **opts))
        wait_until(lambda: workers[3].of("assigned"), 60, "the fourth member to join", workers)
        # Records produced after the join, to every partition: the fourth member gets some even when the
        # first three consumed the rest while it joined (a loaded machine joins slowly).
        fill(broker.bootstrap, topic_name, later, first=first)
        wait_until(lambda: workers[3].of("rec"), 60, "the fourth member to get records", workers)
        workers[0].terminate()   # leaves the group
        wait_until(lambda: len(consumed(workers)) >= count * 0.6, 60, "60% consumed", workers)
        orphaned = workers[1].owned()
        workers[1].kill()        # crashes: its session has to expire
        killed_at = max(e["t"] for e in workers[1].events)
        wait_until(lambda: len(consumed(workers)) == count, 60, "every record consumed", workers)
        # The crashed member's partitions went to the survivors once its session expired.
        wait_until(lambda: orphaned <= {p for w in workers[2:] for e in w.of("assigned") if e["t"] > killed_at
                                        for p in e["partitions"]}, 30, "the orphaned partitions reassigned", workers)
    finally:
        stop_all(workers)
    check_at_least_once(workers, count)


@pytest.mark.parametrize("client,assignor", ASSIGNORS)
def test_each_assignor_splits_the_partitions(broker, topic_name, client, assignor):
    make_topic(broker.bootstrap, topic_name, partitions=6)
    fill(broker.bootstrap, topic_name, 300)
    group = f"group-{topic_name}"
    commit_start(broker.bootstrap, topic_name, group, 6)
    workers = [Worker(client, broker.bootstrap, topic_name, group, name=f"w{n}", assignor=assignor,
                      session_ms=3000, heartbeat_ms=300, process_ms=0) for n in range(2)]
    try:
        wait_until(lambda: len(consumed(workers)) == 300, 60, "every record consumed", workers)
        wait_until(lambda: all(w.owned() for w in workers) and
                   set().union(*(w.owned() for w in workers)) == set(range(6)), 30, "both members assigned",
                   workers)
        assert not workers[0].owned() & workers[1].owned()
    finally:
        stop_all(workers)
    check_at_least_once(workers, 300)


@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_survive_a_broker_restart(fresh_broker, topic_name, client):
    fresh_broker.start()
    make_topic(fresh_broker.bootstrap, topic_name, partitions=6)
    fill(fresh_broker.bootstrap, topic_name, 1000)
    group = f"group-{topic_name}"
    first = Worker(client, fresh_broker.bootstrap, topic_name, group, name="before", batch=10, process_ms=20)
    wait_until(lambda: len(consumed([first])) >= 400, 60, "400 records consumed", [first])
    first.terminate()
    committed: dict[int, int] = {}
    for e in first.of("commit"):
        for p, o in e["offsets"].items():
            committed[int(p)] = o
    assert fresh_broker.stop() == 0
    fresh_broker.start()
    fill(fresh_broker.bootstrap, topic_name, 200, first=1000)
    second = Worker(client, fresh_broker.bootstrap, topic_name, group, name="after")
    try:
        wait_until(lambda: consumed([first, second]) >= set(range(1200)), 60, "the rest consumed", [second])
    finally:
        second.terminate()
    firsts: dict[int, int] = {}
    for e in second.of("rec"):
        firsts.setdefault(e["p"], e["o"])
    for p, offset in committed.items():
        if p in firsts:
            assert firsts[p] == offset, f"partition {p} resumed at {firsts[p]}, committed {offset}"
    check_at_least_once([first, second], 1200)
    redelivered = {e["i"] for e in second.of("rec")} & {e["i"] for e in first.of("rec")}
    assert not redelivered, f"{len(redelivered)} committed records came again after the restart"


@pytest.mark.parametrize("client", CLIENTS)
def test_static_member_restart_keeps_its_partitions_without_a_rebalance(broker, topic_name, client):
    make_topic(broker.bootstrap, topic_name, partitions=6)
    fill(broker.bootstrap, topic_name, 60)
    group = f"group-{topic_name}"
    opts = dict(assignor=DEFAULT_ASSIGNOR[client], session_ms=20000, heartbeat_ms=300, process_ms=0)
    a = Worker(client, broker.bootstrap, topic_name, group, name="a", instance_id="instance-a", **opts)
    b = Worker(client, broker.bootstrap, topic_name, group, name="b", instance_id="instance-b", **opts)
    restarted = None
    try:
        wait_until(lambda: len(consumed([a, b])) == 60 and a.owned() and b.owned()
                   and a.owned() | b.owned() == set(range(6)), 60, "a stable two-member group", [a, b])
        a_partitions, b_events = a.owned(), len([e for e in b.events if e["ev"] in ("assigned", "revoked")])
        a.kill()   # a static member does not leave on a crash; it comes back with the same instance id
        restarted = Worker(client, broker.bootstrap, topic_name, group, name="a2", instance_id="instance-a", **opts)
        wait_until(lambda: restarted.owned(), 30, "the restarted member's assignment", [restarted, b])
        assert restarted.owned() == a_partitions
        fill(broker.bootstrap, topic_name, 60, first=60)
        wait_until(lambda: consumed([a, b, restarted]) >= set(range(120)), 30, "new records consumed",
                   [restarted, b])
        assert len([e for e in b.events if e["ev"] in ("assigned", "revoked")]) == b_events, \
            "the other member saw a rebalance"
    finally:
        stop_all([w for w in (a, b, restarted) if w is not None])


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_cooperative_sticky_moves_only_the_partitions_it_must(broker, topic_name, client):
    make_topic(broker.bootstrap, topic_name, partitions=6)
    fill(broker.bootstrap, topic_name, 300)
    group = f"group-{topic_name}"
    commit_start(broker.bootstrap, topic_name, group, 6)
    opts = dict(assignor="cooperative-sticky", session_ms=3000, heartbeat_ms=300, process_ms=0)
    workers = [Worker(client, broker.bootstrap, topic_name, group, name=f"w{n}", **opts) for n in range(3)]
    try:
        wait_until(lambda: all(len(w.owned()) == 2 for w in workers), 60, "three members with two each", workers)
        before = [w.owned() for w in workers]
        marks = [len(w.events) for w in workers]
        workers.append(Worker(client, broker.bootstrap, topic_name, group, name="w3", **opts))
        wait_until(lambda: workers[3].owned() and sum(len(w.owned()) for w in workers) == 6
                   and set().union(*(w.owned() for w in workers)) == set(range(6)), 60,
                   "the fourth member's partitions", workers)
        revoked = [set().union(*[set(e["partitions"]) for e in w.events[m:] if e["ev"] == "revoked"])
                   for w, m in zip(workers, marks)]
        # Incremental: only what moved to the newcomer was revoked; eager would revoke all six.
        assert set().union(*revoked) == workers[3].owned()
        for held, lost, w in zip(before, revoked, workers):
            assert w.owned() == held - lost
        wait_until(lambda: len(consumed(workers)) == 300, 30, "every record consumed", workers)
    finally:
        stop_all(workers)
    check_at_least_once(workers, 300)


def test_added_partitions_are_rebalanced_to_the_subscribers(broker, topic_name):
    """Members learn of new partitions from Metadata and rejoin; the new partitions get owners."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    make_topic(broker.bootstrap, topic_name, partitions=2)
    fill(broker.bootstrap, topic_name, 50)
    group = f"group-{topic_name}"
    workers = [Worker("confluent", broker.bootstrap, topic_name, group, name=f"w{n}", session_ms=3000,
                      heartbeat_ms=300, process_ms=0) for n in range(2)]
    try:
        wait_until(lambda: len(consumed(workers)) == 50 and all(w.owned() for w in workers), 60,
                   "two members with a partition each", workers)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions(topic_name, 4)])[topic_name].result(10)
        wait_until(lambda: set().union(*(w.owned() for w in workers)) == set(range(4)), 30,
                   "the new partitions assigned", workers)
        fill(broker.bootstrap, topic_name, 100, first=50)
        wait_until(lambda: len(consumed(workers)) == 150, 30, "records in the new partitions consumed", workers)
        assert {e["p"] for w in workers for e in w.of("rec")} == set(range(4))
    finally:
        stop_all(workers)
    check_at_least_once(workers, 150)
