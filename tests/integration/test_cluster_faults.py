"""Faults and bad input in a cluster: controller kill -9, a divergent leader returning, a broker paused past its
ZooKeeper session (and one whose event loop was only held that long), ZooKeeper itself going away, a new leader
paused as it is elected, a broker restarted while the controller is paused, and requests that carry stale epochs
or a stranger's replica id."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from kafka import KafkaProducer

from kbroker.broker.cluster.zk_client import KafkaZkClient
from kbroker.client.connection import KafkaConnection
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records import build_batch
from tests.cluster import (CLUSTER_OVERRIDES, batches, consume_all, controller_of, create, describe, leader_of,
                           wait_until)

pytestmark = pytest.mark.timeout(300)

PRODUCE, FETCH, METADATA, LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN = 0, 1, 3, 4, 5, 6, 7
ALTER_PARTITION = 56
SESSION_TIMEOUT_S = int(CLUSTER_OVERRIDES["zookeeper.session.timeout.ms"]) / 1000


def zk(cluster) -> KafkaZkClient:
    client = KafkaZkClient(cluster.zookeeper.connect + "/kbroker", 6000)
    client.start()
    return client


def produce_values(cluster, topic: str, values: list[bytes], acks="all") -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks=acks, linger_ms=2, retries=20,
                             retry_backoff_ms=200, request_timeout_ms=15000)
    for v in values:
        producer.send(topic, value=v, partition=0)
    producer.flush(60)
    producer.close()


async def request(broker, api_key: int, version: int, body: dict):
    conn = await KafkaConnection.open("127.0.0.1", broker.port, client_id="fault-test")
    try:
        return await conn.request(api_key, version, body)
    finally:
        await conn.close()


def produce_body(topic: str, value: bytes, acks: int = 1) -> dict:
    batch = build_batch([(None, value, [])], timestamp_ms=int(time.time() * 1000))
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}


def produce_error(response) -> ErrorCode:
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


def replicas_converge(cluster, topic: str, broker_ids) -> None:
    wait_until(lambda: len({tuple(batches(cluster.brokers[b].data_dir, topic, 0)) for b in broker_ids}) == 1,
               30, 0.2, f"the .log batches of {topic}-0 identical on {sorted(broker_ids)}")


def test_controller_kill_elects_a_new_controller_that_gives_new_topics_leaders(cluster, topic_name):
    old = wait_until(lambda: max(controller_of(cluster), 0), 30, 0.2, "a controller")
    cluster.brokers[old].kill()
    try:
        new = wait_until(lambda: (lambda c: c if c not in (old, -1) else 0)(controller_of(cluster)), 30, 0.2,
                         "a new controller")
        assert new != old
        create(cluster.bootstrap, topic_name, 4, 2)
        parts = describe(cluster.bootstrap, topic_name)
        assert sorted(parts) == [0, 1, 2, 3]
        assert all(p["leader"] in p["replicas"] and p["leader"] != old for p in parts.values()), parts
    finally:
        cluster.brokers[old].start()
    wait_until(lambda: all(len(p["isr"]) == 2 for p in describe(cluster.bootstrap, topic_name).values()), 30, 0.2,
               "the restarted broker back in its ISRs")


def test_divergent_leader_truncates_to_the_new_leader_and_converges(cluster, topic_name):
    """KIP-101: records only the old leader had (acks=1, followers paused) are cut when it returns."""
    create(cluster.bootstrap, topic_name, 1, 2, {"min.insync.replicas": "1"})
    produce_values(cluster, topic_name, [b"both-%d" % i for i in range(100)])
    parts = describe(cluster.bootstrap, topic_name)[0]
    wait_until(lambda: len(describe(cluster.bootstrap, topic_name)[0]["isr"]) == 2, 30, 0.2, "full ISR")
    old_leader = parts["leader"]
    follower = next(r for r in parts["replicas"] if r != old_leader)
    replicas_converge(cluster, topic_name, parts["replicas"])

    cluster.brokers[follower].pause()
    try:
        # Its parked fetch expires (replica.fetch.wait.max.ms) and it asks for no more: nothing written
        # from now on leaves the leader.
        time.sleep(1)
        for i in range(20):   # acks=1: only the old leader ever has these
            response = asyncio.run(request(cluster.brokers[old_leader], PRODUCE, 9,
                                           produce_body(topic_name, b"lost-%d" % i)))
            assert produce_error(response) == ErrorCode.NONE
        cluster.brokers[old_leader].kill()
    finally:
        cluster.brokers[follower].resume()
    wait_until(lambda: leader_of(cluster.bootstrap, topic_name, 0) == follower, 30, 0.2, "the follower leads")
    produce_values(cluster, topic_name, [b"new-%d" % i for i in range(30)], acks=1)
    diverged = batches(cluster.brokers[old_leader].data_dir, topic_name, 0)
    cluster.brokers[old_leader].start()
    replicas_converge(cluster, topic_name, parts["replicas"])
    converged = batches(cluster.brokers[old_leader].data_dir, topic_name, 0)
    assert converged != diverged, "the divergent tail was cut"
    values = [v for _, _, v in consume_all(cluster.bootstrap, topic_name, 1)]
    assert values == [b"both-%d" % i for i in range(100)] + [b"new-%d" % i for i in range(30)]


def test_broker_paused_past_its_session_is_fenced_and_rejoins_as_follower(cluster, topic_name):
    create(cluster.bootstrap, topic_name, 1, 3, {"min.insync.replicas": "2"})
    produce_values(cluster, topic_name, [b"before-%d" % i for i in range(50)])
    wait_until(lambda: len(describe(cluster.bootstrap, topic_name)[0]["isr"]) == 3, 30, 0.2, "full ISR")
    stale = leader_of(cluster.bootstrap, topic_name, 0)
    others = [b for b in cluster.brokers if b != stale]

    async def write_to_the_paused_leader():
        conn = await KafkaConnection.open("127.0.0.1", cluster.brokers[stale].port, client_id="stale")
        try:
            cluster.brokers[stale].pause()
            paused_at = time.monotonic()
            try:
                # Sent while it sleeps: the first thing it reads when it wakes.
                pending = asyncio.ensure_future(conn.request(PRODUCE, 9, produce_body(topic_name, b"stale")))
                await asyncio.sleep(0.2)
                wait_until(lambda: leader_of(",".join(cluster.brokers[b].bootstrap for b in others),
                                             topic_name, 0) in others, 30, 0.3, "a new leader")
                # Past its session timeout, as the test says: ZooKeeper expires the session a session timeout
                # after the broker's last heartbeat, which may come well before the pause, so a new leader can
                # be seen before the pause itself is that long (and a broker paused for less than the timeout
                # need not know it lost the session when it wakes, in Kafka neither).
                time.sleep(max(0.0, paused_at + SESSION_TIMEOUT_S + 0.5 - time.monotonic()))
            finally:
                cluster.brokers[stale].resume()
            return produce_error(await pending)
        finally:
            await conn.close()

    assert asyncio.run(write_to_the_paused_leader()) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    produce_values(cluster, topic_name, [b"after-%d" % i for i in range(50)])
    wait_until(lambda: len(describe(cluster.bootstrap, topic_name)[0]["isr"]) == 3, 60, 0.3,
               "the paused broker back in the ISR")
    replicas_converge(cluster, topic_name, list(cluster.brokers))
    values = [v for _, _, v in consume_all(cluster.bootstrap, topic_name, 1)]
    assert values == [b"before-%d" % i for i in range(50)] + [b"after-%d" % i for i in range(50)]


def test_zookeeper_away_leaders_keep_serving_and_metadata_changes_resume(cluster, topic_name):
    create(cluster.bootstrap, topic_name, 1, 3)
    wait_until(lambda: len(describe(cluster.bootstrap, topic_name)[0]["isr"]) == 3, 30, 0.2, "full ISR")
    cluster.zookeeper.stop()
    try:
        produce_values(cluster, topic_name, [b"zk-away-%d" % i for i in range(100)])
        assert len(consume_all(cluster.bootstrap, topic_name, 1)) == 100
        time.sleep(4)   # past the session timeout: nothing expires while the ensemble is down
        produce_values(cluster, topic_name, [b"still-%d" % i for i in range(100)])
    finally:
        cluster.zookeeper.start()
    create(cluster.bootstrap, f"{topic_name}-later", 2, 3)
    parts = describe(cluster.bootstrap, f"{topic_name}-later")
    assert all(p["leader"] >= 0 for p in parts.values()), parts
    values = [v for _, _, v in consume_all(cluster.bootstrap, topic_name, 1)]
    assert values == [b"zk-away-%d" % i for i in range(100)] + [b"still-%d" % i for i in range(100)]
    replicas_converge(cluster, topic_name, list(cluster.brokers))


def _leader_and_isr(topic: str, topic_id: bytes, controller_epoch: int, leader: int, leader_epoch: int,
                    replicas: list[int]) -> dict:
    return {"controller_id": 99, "controller_epoch": controller_epoch, "broker_epoch": -1, "type": 0,
            "topic_states": [{"topic_name": topic, "topic_id": topic_id, "partition_states": [
                {"partition_index": 0, "controller_epoch": controller_epoch, "leader": leader,
                 "leader_epoch": leader_epoch, "isr": replicas, "partition_epoch": 1000, "replicas": replicas,
                 "adding_replicas": [], "removing_replicas": [], "is_new": False}]}],
            "live_leaders": []}


async def earlier_runs_requests(cluster, broker_id: int, broker_epoch: int, controller: int, controller_epoch: int,
                                topic: str, topic_id: bytes, replicas: list[int]) -> dict[str, ErrorCode]:
    """Requests meant for, or sent by, an earlier run of ``broker_id`` (its registration's ``broker_epoch``) that
    would be obeyed if they carried its current epoch: the error each gets."""
    def stale(body: dict) -> dict:
        return {**body, "controller_id": controller, "controller_epoch": controller_epoch,
                "broker_epoch": broker_epoch}
    to_broker = await KafkaConnection.open("127.0.0.1", cluster.brokers[broker_id].port, client_id="fault-test")
    to_controller = await KafkaConnection.open("127.0.0.1", cluster.brokers[controller].port, client_id="fault-test")
    try:
        answers = {
            "LeaderAndIsr": await to_broker.request(LEADER_AND_ISR, 7, stale(
                _leader_and_isr(topic, topic_id, controller_epoch, -1, 1000, replicas))),
            "UpdateMetadata": await to_broker.request(UPDATE_METADATA, 8, stale({
                "type": 0, "topic_states": [], "live_brokers": []})),
            "StopReplica": await to_broker.request(STOP_REPLICA, 4, stale({"topic_states": [{
                "topic_name": topic, "partition_states": [
                    {"partition_index": 0, "leader_epoch": -2, "delete_partition": True}]}]})),
            "AlterPartition": await to_controller.request(ALTER_PARTITION, 1, {
                "broker_id": broker_id, "broker_epoch": broker_epoch, "topics": [{"topic_name": topic, "partitions": [
                    {"partition_index": 0, "leader_epoch": 1000, "new_isr": [broker_id], "leader_recovery_state": 0,
                     "partition_epoch": 1000}]}]}),
            "ControlledShutdown": await to_controller.request(CONTROLLED_SHUTDOWN, 3, {
                "broker_id": broker_id, "broker_epoch": broker_epoch})}
    finally:
        await to_broker.close()
        await to_controller.close()
    return {api: ErrorCode(answer.error_code) for api, answer in answers.items()}


def test_stale_controller_requests_and_strangers_fetches_change_nothing(cluster, topic_name):
    create(cluster.bootstrap, topic_name, 1, 3)
    wait_until(lambda: len(describe(cluster.bootstrap, topic_name)[0]["isr"]) == 3, 30, 0.2, "full ISR")
    # A clean restart of the leader moves leadership once, so there is an older leader epoch to send, and an
    # older broker epoch (its earlier run's registration).
    first = leader_of(cluster.bootstrap, topic_name, 0)
    client = zk(cluster)
    try:
        earlier_run = client.broker_info(first).epoch
        assert cluster.brokers[first].stop() == 0
        cluster.brokers[first].start()
        wait_until(lambda: len(describe(cluster.bootstrap, topic_name)[0]["isr"]) == 3, 30, 0.2, "full ISR again")
        state = client.partition_state(topic_name, 0)
        controller_epoch = client.controller_epoch()
        controller = client.controller_id()
        topic_id = client.topic_assignment(topic_name).topic_id
    finally:
        client.stop()
    assert state.leader_epoch >= 1
    follower = next(b for b in state.isr if b != state.leader)
    replicas = sorted(cluster.brokers)

    stale_controller = asyncio.run(request(cluster.brokers[follower], LEADER_AND_ISR, 7, _leader_and_isr(
        topic_name, topic_id, controller_epoch - 1, follower, state.leader_epoch + 10, replicas)))
    assert stale_controller.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    older_leader_epoch = asyncio.run(request(cluster.brokers[follower], LEADER_AND_ISR, 7, _leader_and_isr(
        topic_name, topic_id, controller_epoch, follower, state.leader_epoch - 1, replicas)))
    assert older_leader_epoch.error_code == ErrorCode.NONE
    assert older_leader_epoch.topics[0].partition_errors[0].error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert asyncio.run(earlier_runs_requests(cluster, first, earlier_run, controller, controller_epoch, topic_name,
                                             topic_id, replicas)) == {api: ErrorCode.STALE_BROKER_EPOCH for api in (
        "LeaderAndIsr", "UpdateMetadata", "StopReplica", "AlterPartition", "ControlledShutdown")}
    # The follower still follows: a write to it is refused, the leader's writes reach it.
    refused = asyncio.run(request(cluster.brokers[follower], PRODUCE, 9, produce_body(topic_name, b"x")))
    assert produce_error(refused) == ErrorCode.NOT_LEADER_OR_FOLLOWER

    stranger = asyncio.run(request(cluster.brokers[state.leader], FETCH, 12, {
        "replica_id": 42, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_epoch": -1, "topics": [{"topic": topic_name, "partitions": [
            {"partition": 0, "current_leader_epoch": state.leader_epoch, "fetch_offset": 0,
             "last_fetched_epoch": -1, "partition_max_bytes": 1 << 20}]}]}))
    assert stranger.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    fenced = asyncio.run(request(cluster.brokers[state.leader], FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_epoch": -1, "topics": [{"topic": topic_name, "partitions": [
            {"partition": 0, "current_leader_epoch": state.leader_epoch - 1, "fetch_offset": 0,
             "last_fetched_epoch": -1, "partition_max_bytes": 1 << 20}]}]}))
    assert fenced.responses[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH

    produce_values(cluster, topic_name, [b"ok-%d" % i for i in range(20)])
    assert leader_of(cluster.bootstrap, topic_name, 0) == state.leader
    replicas_converge(cluster, topic_name, replicas)


def test_a_leaders_isr_proposals_are_answered_as_kafkas_controller_answers_them(cluster, topic_name):
    """AlterPartition as a Kafka 3.3+ leader sends it (v2+ names topics by id; kbroker's controller read only
    names and answered UNKNOWN_TOPIC_OR_PARTITION, which Kafka's leader takes as final: under a kbroker
    controller a Kafka leader never shrank an ISR, and a dead follower held its acks=all writes for good). A
    proposal equal to the state stands even at a stale partition epoch (a retry whose answer was lost), an epoch
    above the controller's is NOT_CONTROLLER (retried), an ineligible replica is INELIGIBLE_REPLICA from v2
    and OPERATION_NOT_ATTEMPTED before it, and an unknown topic id UNKNOWN_TOPIC_ID."""
    create(cluster.bootstrap, topic_name, 1, 3)
    wait_until(lambda: len(describe(cluster.bootstrap, topic_name)[0]["isr"]) == 3, 30, 0.2, "full ISR")
    client = zk(cluster)
    try:
        state = client.partition_state(topic_name, 0)
        leader_epoch = client.broker_info(state.leader).epoch
        controller = client.controller_id()
        topic_id = client.topic_assignment(topic_name).topic_id
    finally:
        client.stop()

    def propose(version: int, isr, *, epoch=state.leader_epoch, partition_epoch=state.zk_version, tid=topic_id):
        entry = {"partition_index": 0, "leader_epoch": epoch, "leader_recovery_state": 0,
                 "partition_epoch": partition_epoch}
        entry.update({"new_isr_with_epochs": [{"broker_id": b, "broker_epoch": -1} for b in isr]} if version >= 3
                     else {"new_isr": isr})
        answer = asyncio.run(request(cluster.brokers[controller], ALTER_PARTITION, version, {
            "broker_id": state.leader, "broker_epoch": leader_epoch, "topics": [
                {"topic_name": topic_name, "topic_id": tid, "partitions": [entry]}]}))
        assert answer.error_code == ErrorCode.NONE, answer
        p = answer.topics[0].partitions[0]
        return ErrorCode(p.error_code), sorted(p.isr)

    assert propose(3, state.isr, partition_epoch=state.zk_version - 1) == (ErrorCode.NONE, sorted(state.isr))
    assert propose(2, state.isr) == (ErrorCode.NONE, sorted(state.isr))
    assert propose(3, state.isr, tid=bytes(16))[0] == ErrorCode.UNKNOWN_TOPIC_ID
    assert propose(2, state.isr, epoch=state.leader_epoch + 1)[0] == ErrorCode.NOT_CONTROLLER
    assert propose(3, [*state.isr, 99])[0] == ErrorCode.INELIGIBLE_REPLICA
    assert propose(1, [*state.isr, 99])[0] == ErrorCode.OPERATION_NOT_ATTEMPTED
    assert propose(1, state.isr, epoch=state.leader_epoch - 1)[0] == ErrorCode.FENCED_LEADER_EPOCH
    client = zk(cluster)
    try:   # nothing was written
        assert client.partition_state(topic_name, 0).zk_version == state.zk_version
    finally:
        client.stop()


def test_a_broker_not_yet_told_the_partitions_calls_the_topic_unknown_not_empty(tmp_path, topic_name):
    """Until the controller's UpdateMetadata tells a broker a topic's partitions (a LeaderAndIsr may come first),
    it answers the retriable UNKNOWN_TOPIC_OR_PARTITION, as Kafka's cache does: "no error, no partitions" would
    tell a client the topic has none. Its own cluster: a session long enough that the paused controller keeps its
    office while the broker restarts."""
    from tests.cluster import Cluster

    cluster = Cluster(str(tmp_path / "cluster"), overrides={"zookeeper.session.timeout.ms": "15000"}).start()
    try:
        create(cluster.bootstrap, topic_name, 2, 3)
        controller = wait_until(lambda: controller_of(cluster), 30, 0.2, "a controller")
        other = cluster.brokers[next(b for b in cluster.brokers if b != controller)]
        assert other.stop() == 0
        cluster.brokers[controller].pause()
        try:
            other.start()
            response = asyncio.run(request(other, METADATA, 9, {
                "topics": [{"name": topic_name}], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}))
        finally:
            cluster.brokers[controller].resume()
        (topic,) = response.topics
        assert (topic.error_code, list(topic.partitions)) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])
        wait_until(lambda: len(describe(other.bootstrap, topic_name)) == 2, 30, 0.2, "the partitions known")
    finally:
        cluster.stop()


async def leaders_named(broker, topic: str, seconds: float) -> set[int]:
    """Every leader of ``topic``-0 that ``broker``'s Metadata names while asked for ``seconds``."""
    conn = await KafkaConnection.open("127.0.0.1", broker.port, client_id="fault-test")
    named, deadline = set(), time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            answer = await conn.request(METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                                       "include_topic_authorized_operations": False})
            named |= {p.leader_id for t in answer.topics for p in t.partitions}
    finally:
        await conn.close()
    return named


@contextlib.contextmanager
def pausable_cluster(tmp_path):
    """A cluster of its own, whose sessions are long enough to pause a broker (the controller among them)
    through what a test does meanwhile, and without controlled shutdown (a paused controller could not answer
    it): the cluster, a ZooKeeper client on it and the controller's id."""
    from tests.cluster import Cluster

    cluster = Cluster(str(tmp_path / "cluster"), overrides={"controlled.shutdown.enable": "false",
                                                            "zookeeper.session.timeout.ms": "15000"}).start()
    client = None
    try:
        client = zk(cluster)
        yield cluster, client, wait_until(lambda: controller_of(cluster), 30, 0.2, "a controller")
    finally:
        if client is not None:
            client.stop()
        cluster.stop()


@pytest.mark.parametrize("the_leader_controls", [False, True], ids=["leader", "leader-and-controller"])
def test_no_broker_names_a_new_leader_before_it_has_taken_the_lead(tmp_path, topic_name, the_leader_controls):
    """A leader leaves (its ZooKeeper session closed at once: no controlled shutdown) while the replica elected
    in its place is paused. Until that replica has answered its LeaderAndIsr (or the controller has waited
    ``LEADERS_FIRST_S`` for it), no broker's Metadata names it: a client sent there first has one batch refused
    by a follower and the next taken by the leader it became, and librdkafka counts the refused one delivered.
    With the old leader the controller too, the next controller's first round elects the new leader, and
    holds to the same order."""
    from tests.integration.test_cluster_elections import create_on

    with pausable_cluster(tmp_path) as (cluster, client, controller):
        others = [b for b in sorted(cluster.brokers) if b != controller]
        old, new, watcher = (controller, *others) if the_leader_controls else (others[0], others[1], controller)
        create_on(cluster.bootstrap, topic_name, [old, new, watcher])
        wait_until(lambda: len(describe(cluster.bootstrap, topic_name)[0]["isr"]) == 3, 30, 0.2, "full ISR")
        produce_values(cluster, topic_name, [b"before"])

        cluster.brokers[new].pause()
        try:
            assert cluster.brokers[old].stop() == 0
            wait_until(lambda: client.partition_state(topic_name, 0).leader == new, 30, 0.02,
                       f"broker {new} written as the leader")
            named = asyncio.run(leaders_named(cluster.brokers[watcher], topic_name, 0.5))
        finally:
            cluster.brokers[new].resume()
        assert named and new not in named, f"broker {watcher} named {sorted(named)} while {new} was paused"
        wait_until(lambda: leader_of(cluster.brokers[watcher].bootstrap, topic_name, 0) == new, 30, 0.1,
                   f"broker {new} named once it leads")
        produce_values(cluster, topic_name, [b"after"])
        assert [v for _, _, v in consume_all(cluster.bootstrap, topic_name, 1)] == [b"before", b"after"]


def test_a_broker_that_restarts_while_the_controller_looks_away_is_handled_as_failed_and_started(
        tmp_path, topic_name):
    """A broker that leads a partition stops and starts again on the same port while the controller is paused.
    The registration the controller reads when it resumes has the same endpoints as before, but a new broker
    epoch (the znode's czxid): as Kafka's controller does for a bounced broker, it handles it as failed and then
    started. Its leadership moves to another ISR member, it leaves the ISR, and it is sent LeaderAndIsr for what
    it hosts, so it follows, catches up and rejoins. (Before, the controller saw nothing change: the restarted
    broker was never told its partitions, and the controller kept it as their leader.)"""
    from tests.integration.test_cluster_elections import create_on

    with pausable_cluster(tmp_path) as (cluster, client, controller):
        bounced, other = [b for b in sorted(cluster.brokers) if b != controller]
        create_on(cluster.bootstrap, topic_name, [bounced, other, controller])
        wait_until(lambda: len(describe(cluster.bootstrap, topic_name)[0]["isr"]) == 3, 30, 0.2, "full ISR")
        produce_values(cluster, topic_name, [b"before"])
        epoch = client.broker_info(bounced).epoch

        cluster.brokers[controller].pause()
        try:
            assert cluster.brokers[bounced].restart().proc.poll() is None
            wait_until(lambda: (lambda info: info is not None and info.epoch != epoch)(client.broker_info(bounced)),
                       30, 0.05, f"broker {bounced} registered again")
        finally:
            cluster.brokers[controller].resume()
        wait_until(lambda: describe(cluster.bootstrap, topic_name)[0]["leader"] in (other, controller), 30, 0.2,
                   f"the lead moved from broker {bounced}")
        produce_values(cluster, topic_name, [b"after"])
        wait_until(lambda: len(describe(cluster.bootstrap, topic_name)[0]["isr"]) == 3, 30, 0.2,
                   f"broker {bounced} back in the ISR")
        assert [v for _, _, v in consume_all(cluster.bootstrap, topic_name, 1)] == [b"before", b"after"]
        replicas_converge(cluster, topic_name, cluster.brokers)


def test_a_broker_whose_event_loop_is_held_past_its_session_keeps_its_leaderships(tmp_path, topic_name):
    """An event loop held by one callback past the ZooKeeper session timeout is not a stopped process: kazoo's
    thread kept the session, the controller moved nothing, and the broker goes on leading. A produce that
    arrived while the loop was held is the first thing the broker reads after it, as after a pause, and is
    taken, not fenced as a paused broker's would be (``ProcessClock`` tells the two apart). The loop is held
    for real: an embedded broker's own loop runs pure Python for twice the session timeout."""
    import threading

    from kbroker.broker.cluster.zookeeper_server import ZooKeeperServer
    from kbroker.broker.embedded import KBroker

    zookeeper = ZooKeeperServer(str(tmp_path / "zookeeper")).start()
    single = {"offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
              "transaction.state.log.min.isr": "1"}
    broker = KBroker(str(tmp_path / "data"), {**CLUSTER_OVERRIDES, **single, "broker.id": "1",
                                              "zookeeper.connect": f"{zookeeper.connect}/kbroker"})
    client = KafkaZkClient(zookeeper.connect + "/kbroker", 6000)
    try:
        broker.start()
        client.start()
        create(broker.bootstrap_servers, topic_name, 1, 1)
        wait_until(lambda: leader_of(broker.bootstrap_servers, topic_name, 0) == 1, 30, 0.1, "a leader")
        registered = client.zk.get(client.path("/brokers/ids/1"))[1].czxid
        holding = threading.Event()

        async def hold_the_loop() -> None:
            holding.set()
            until = time.monotonic() + 2 * SESSION_TIMEOUT_S
            while time.monotonic() < until:
                sum(range(1000))

        async def produce_while_held() -> ErrorCode:
            conn = await KafkaConnection.open("127.0.0.1", broker.port, client_id="held")
            try:
                held = asyncio.get_running_loop().run_in_executor(None, broker.run_on_loop, hold_the_loop())
                assert await asyncio.to_thread(holding.wait, 10)
                answer = await conn.request(PRODUCE, 9, produce_body(topic_name, b"while held", acks=-1))
                await held
                return produce_error(answer)
            finally:
                await conn.close()

        started = time.monotonic()
        assert asyncio.run(produce_while_held()) == ErrorCode.NONE
        assert time.monotonic() - started >= 2 * SESSION_TIMEOUT_S
        assert client.zk.get(client.path("/brokers/ids/1"))[1].czxid == registered   # the same session's registration
        assert produce_error(asyncio.run(request(broker, PRODUCE, 9, produce_body(topic_name, b"after", acks=-1)))) \
            == ErrorCode.NONE
        assert [v for _, _, v in consume_all(broker.bootstrap_servers, topic_name, 1)] == [b"while held", b"after"]
    finally:
        client.stop()
        broker.stop()
        zookeeper.stop()
