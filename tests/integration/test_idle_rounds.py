"""Idle replication rounds (issue 30): followers' rounds over partitions at rest, sent again from the
follower's connection's callback (broker/replication/idle_rounds.py) and held by the leader in its own
(broker/network/idle_fetches.py), keep the ISR, and give way at once to whatever must be answered otherwise.
Real clusters with their metrics served: three brokers with real followers, and two with one paused and a raw
follower in its place."""

from __future__ import annotations

import asyncio
import random
import statistics
import time

import pytest
from confluent_kafka import Producer
from kazoo.client import KazooClient

from kbroker.client.connection import ConnectionClosed, KafkaConnection
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records import build_batch
from tests.cluster import Cluster, controller_of, create, describe, known_to, partitions_at, wait_until
from tests.integration.test_metrics import metrics_port, scrape, value

pytestmark = pytest.mark.timeout(240)
FETCH, PRODUCE, API_VERSIONS = 1, 0, 18


@pytest.fixture(scope="module")
def quiet_cluster(tmp_path_factory):
    cluster = Cluster(str(tmp_path_factory.mktemp("cluster")), overrides={
        "replica.fetch.wait.max.ms": "1000", "replica.lag.time.max.ms": "3000", "metrics.port": "0"}).start()
    yield cluster
    assert all(code == 0 for code in cluster.stop().values())


@pytest.fixture
def two_brokers(tmp_path):
    """Two brokers whose sessions and ISR outlast a pause of one of them (the raw follower test's)."""
    cluster = Cluster(str(tmp_path / "cluster"), size=2, overrides={
        "replica.lag.time.max.ms": "30000", "zookeeper.session.timeout.ms": "40000", "metrics.port": "0"}).start()
    yield cluster
    for broker in cluster.brokers.values():
        broker.resume()
    assert all(code == 0 for code in cluster.stop().values())


def _count(broker, name: str) -> float:
    return value(scrape(metrics_port(broker)), name)


def test_idle_followers_stay_in_the_isr_and_an_append_among_idle_partitions_reaches_them_at_once(quiet_cluster,
                                                                                              topic_name):
    """A follower's round over partitions at rest reads none of them (broker/partitions/delayed_fetch.py): the
    leader must still count the follower caught up on each (or the ISR shrinks after replica.lag.time.max.ms,
    a new partition state in ZooKeeper), and an append to one of them must complete the parked fetch at once,
    not when replica.fetch.wait.max.ms runs out (an acks=all write would then wait half of it on average).
    Idle rounds are sent again from the followers' connections' callbacks and held by the leaders in theirs:
    every broker does both here, and the appends among them still reach the followers at once."""
    cluster = quiet_cluster
    zk = KazooClient(hosts=cluster.zookeeper.connect)
    zk.start()
    brokers = list(cluster.brokers.values())

    def rounds() -> list[tuple[float, float]]:
        """Each broker's (idle rounds sent again as a follower, idle fetches held as a leader)."""
        return [(_count(b, "kbroker_replicafetcher_idlerounds_total"), _count(b, "kbroker_fetch_idleroundsheld_total"))
                for b in brokers]

    try:
        create(cluster.bootstrap, topic_name, 24, 3)
        wait_until(lambda: all(len(p["isr"]) == 3 for p in describe(cluster.bootstrap, topic_name).values()),
                   message="every replica in sync")
        wait_until(lambda: all(sent >= 2 and held >= 2 for sent, held in rounds()), 30, 0.2,
                   "idle rounds sent again by every follower and held by every leader")
        states = [f"/kbroker/brokers/topics/{topic_name}/partitions/{p}/state" for p in range(24)]
        versions = [zk.get(path)[1].version for path in states]
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
        took = []
        # One write to each partition in turn, over two lag windows: each written partition has been at rest
        # since it was created, and the others stay at rest meanwhile. (The pause between writes is the idle
        # time under test, not a wait for something to happen; it varies, so that writes do not fall in step
        # with the followers' rounds and come just before a round would end anyway.)
        pauses = random.Random(7)
        for partition in range(24):
            sent, done = time.monotonic(), []
            producer.produce(topic_name, b"v", partition=partition, on_delivery=lambda err, msg: done.append(err))
            assert producer.flush(30) == 0 and done == [None]
            took.append(time.monotonic() - sent)
            time.sleep(pauses.uniform(0.1, 0.5))
        assert statistics.median(took) < 0.2, f"acks=all writes waited for the followers' rounds: {took}"
        after_writes = rounds()   # (and once written to, idle rounds again on both sides)
        wait_until(lambda: all(sent > s and held > h for (sent, held), (s, h) in zip(rounds(), after_writes)),
                   30, 0.2, "idle rounds sent again and held after the writes")
        assert [zk.get(path)[1].version for path in states] == versions, "an ISR changed"
        assert all(sorted(p["isr"]) == [1, 2, 3] for p in describe(cluster.bootstrap, topic_name).values())
    finally:
        zk.stop()


async def test_a_held_idle_fetch_gives_way_to_a_request_behind_it_an_append_and_a_closed_session(two_brokers,
                                                                                                topic_name):
    """A raw follower's fetch session at the leader, the only follower fetching from it: the cluster's other
    broker, the partition's real follower, is paused (SIGSTOP; its ZooKeeper session and its place in the ISR
    outlast the test) and the raw one fetches as that replica, at its log end. Its idle fetch is held and
    answered with nothing when its wait ends, but not behind a request still being handled. Then what must be
    answered otherwise: a request behind a held fetch is answered after it, and the fetch waits only what was
    left of its wait (not its whole wait again); an append answers a held fetch at once with the record; a
    session closed meanwhile answers FETCH_SESSION_ID_NOT_FOUND at the end of the wait; a connection closed
    while its fetch is held has nothing written to it, and the leader goes on serving. Last, held rounds move
    onto their wait's grid and stay there."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    cluster = two_brokers
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    # (the controller leads and stays: the paused broker neither leads the partition nor handles the creation)
    wait_until(lambda: controller_of(cluster) > 0, message="a controller")
    leader_id = controller_of(cluster)
    follower_id = 3 - leader_id
    admin.create_topics([NewTopic(topic_name, replica_assignments={0: [leader_id, follower_id]})])
    admin.close()
    leader = cluster.brokers[leader_id]
    wait_until(lambda: sorted(describe(cluster.bootstrap, topic_name)[0]["isr"]) == [1, 2],
               message="both replicas in sync")
    await known_to(leader.port, topic_name, leading=True)
    cluster.brokers[follower_id].pause()
    conn = await KafkaConnection.open("127.0.0.1", leader.port)
    other = await KafkaConnection.open("127.0.0.1", leader.port)

    def held() -> float:
        return _count(leader, "kbroker_fetch_idleroundsheld_total")

    def fetch(session_id: int, epoch: int, wait_ms: int, offset: int | None = None, via=conn):
        partitions = [] if offset is None else [{"topic": topic_name, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]
        return via.request(FETCH, 12, {"replica_id": follower_id, "max_wait_ms": wait_ms, "min_bytes": 1,
                                       "max_bytes": 1 << 20, "isolation_level": 0, "session_id": session_id,
                                       "session_epoch": epoch, "topics": partitions, "forgotten_topics_data": [],
                                       "rack_id": ""})

    async def settle(session: int, epoch: int, via=conn) -> int:
        """Rounds of 100 ms until two in a row are held (after a change, the request path looks first; and the
        paused follower's last fetch may have been held just after it paused): the next epoch."""
        in_a_row = 0
        while in_a_row < 2:
            before = held()
            assert (await fetch(session, epoch, 100, via=via)).error_code == 0
            in_a_row = in_a_row + 1 if held() == before + 1 else 0
            epoch += 1
            assert epoch < 100, "no idle fetch held"
        return epoch

    async def timed(request) -> tuple[object, float]:
        began = time.monotonic()
        answer = await request
        return answer, time.monotonic() - began

    try:
        opened = await fetch(0, 0, 0, offset=0)
        session = opened.session_id
        assert opened.error_code == 0 and session != 0
        epoch = await settle(session, 1)
        before = held()
        quiet = await fetch(session, epoch, 100)
        assert quiet.error_code == 0 and quiet.session_id == session and quiet.responses == []
        assert held() == before + 1, "the idle fetch was not held"

        # A request still being handled (a topic's creation waits for the controller) and an idle fetch behind it,
        # sent together: the creation is answered first, and the fetch after it, by the request path.
        order = []

        async def noted(name: str, request):
            answer = await request
            order.append(name)
            return answer
        created, _ = await asyncio.gather(
            noted("create", conn.request(19, 7, {"topics": [{
                "name": f"{topic_name}-2", "num_partitions": -1, "replication_factor": -1,
                "assignments": [{"partition_index": 0, "broker_ids": [leader_id]}]}], "timeout_ms": 10000})),
            noted("fetch", fetch(session, epoch + 1, 1)))
        assert created.topics[0].error_code == 0 and order == ["create", "fetch"]
        assert held() == before + 1, "a fetch behind a request still being handled was held"
        epoch = await settle(session, epoch + 2)
        before = held()
        assert (await fetch(session, epoch, 100)).error_code == 0 and held() == before + 1

        # A request behind a held fetch, sent two seconds into its four-second wait: the fetch first, at the end
        # of its own wait (not four seconds after the request came), then the request. (The two seconds are the
        # scenario: a request arriving mid-wait.)
        waiting = asyncio.ensure_future(timed(fetch(session, epoch + 1, 4000)))
        await asyncio.sleep(2.0)
        versions = asyncio.ensure_future(timed(conn.request(API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"})))
        (answered, waited), (_, versions_waited) = await asyncio.gather(waiting, versions)
        assert answered.error_code == 0 and answered.responses == []
        assert 3.9 <= waited < 5.5, f"the held fetch answered after {waited:.2f}s of a 4 s wait"
        assert versions_waited >= waited - 2.0 - 0.05, "a request was answered before the fetch ahead of it"
        assert held() == before + 1, "a fetch with a request behind it was answered as idle"

        # An append to the session's partition, half a second into a ten-second wait: answered at once with it.
        waiting = asyncio.ensure_future(timed(fetch(session, epoch + 2, 10000)))
        await asyncio.sleep(0.5)
        produced = await other.request(PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 10000,
                                                    "topic_data": [{"name": topic_name, "partition_data": [
                                                        {"index": 0, "records": build_batch([(b"k", b"v", [])])}]}]})
        assert produced.responses[0].partition_responses[0].error_code == 0
        answered, waited = await waiting
        assert waited < 5.0, f"an append reached a held fetch only after {waited:.1f}s"
        (partition,) = answered.responses[0].partitions
        assert partition.error_code == 0 and partition.records

        # Caught up again, held again; the session then closed from another connection: its end is the error.
        caught_up = await fetch(session, epoch + 3, 100, offset=1)
        assert caught_up.error_code == 0
        epoch = await settle(session, epoch + 4)
        waiting = asyncio.ensure_future(timed(fetch(session, epoch, 1500)))
        await asyncio.sleep(0.5)
        closed = await fetch(session, -1, 0, via=other)   # (epoch -1: close the session, then a sessionless fetch)
        assert closed.error_code == 0
        answered, waited = await waiting
        assert answered.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and 1.4 <= waited < 2.5

        # A connection closed while its fetch is held: nothing is written to it when the wait would have ended.
        reopened = await fetch(0, 0, 0, offset=1, via=other)
        session = reopened.session_id
        epoch = await settle(session, 1, via=other)
        count = held()
        doomed = asyncio.ensure_future(fetch(session, epoch, 1000, via=other))
        await asyncio.sleep(0.3)
        await other.close()
        with pytest.raises(ConnectionClosed):
            await doomed
        await asyncio.sleep(1.0)   # (past the end of its wait: the scenario, not a wait for a condition)
        assert held() == count

        # Held rounds move onto their wait's grid (the multiples of the wait on the host's monotonic clock, each
        # round ending at most a twentieth of its wait early, here 20 ms) and stay there. Rounds of 400 ms begun
        # 60-70 ms off the grid: a few rounds bring them onto it; over the last five of 12, answers come just after
        # a multiple of 400 ms (on the code before, a round ended a whole wait after it began: 60 ms off and more).
        # (A round's own latency, the answer's way back and the next fetch's, moves it later by that much: the
        # twentieth must exceed it for rounds to reach the grid, which on a loaded machine 5 ms of a 100 ms wait
        # did not.)
        reopened = await fetch(0, 0, 0, offset=1)
        session = reopened.session_id
        epoch = await settle(session, 1) - 1
        off_grid, start = [], held()
        while not 0.06 <= time.monotonic() % 0.4 < 0.07:   # (the scenario's starting phase)
            await asyncio.sleep(0.002)
        for _ in range(12):
            epoch += 1
            assert (await fetch(session, epoch, 400)).error_code == 0
            phase = time.monotonic() % 0.4
            off_grid.append(min(phase, 0.4 - phase))
        # (all held but one at most: every 5 s a session's round looks at its partitions on the request path)
        assert held() >= start + 11, "idle rounds were not held"
        assert statistics.median(off_grid[7:]) < 0.02, f"idle rounds off their grid by {off_grid} s"

        with open(leader.log_path, encoding="utf-8") as log:
            assert "Traceback" not in log.read()
        answer = await conn.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert answer.error_code == 0
    finally:
        await conn.close()
        await other.close()


def test_a_follower_whose_rounds_stop_leaves_the_isr_of_its_partitions_at_rest(tmp_path, topic_name):
    """A follower's rounds over partitions at rest count it caught up on each once per round, for the session
    (broker/partitions/session_rest.py), not partition by partition: when its rounds stop, the leader's lag
    check must still see each of those partitions' follower fall behind and shrink the ISR after
    replica.lag.time.max.ms, while the follower's ZooKeeper session (and so the controller's view of it) lives
    on. The follower is paused (SIGSTOP) once every partition is at rest in its session, then resumed, and it
    rejoins every ISR."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    lag_ms = 2000
    cluster = Cluster(str(tmp_path / "cluster"), size=2, overrides={
        "replica.lag.time.max.ms": str(lag_ms), "replica.fetch.wait.max.ms": "500",
        "zookeeper.session.timeout.ms": "40000", "metrics.port": "0"}).start()
    zk = KazooClient(hosts=cluster.zookeeper.connect)
    zk.start()
    try:
        wait_until(lambda: controller_of(cluster) > 0, message="a controller")
        leader_id = controller_of(cluster)   # (the controller leads: the ISR change needs no paused broker)
        follower_id = 3 - leader_id
        leader, follower = cluster.brokers[leader_id], cluster.brokers[follower_id]
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{leader.port}")
        admin.create_topics([NewTopic(topic_name, replica_assignments={
            p: [leader_id, follower_id] for p in range(20)})])
        admin.close()
        wait_until(lambda: isrs(leader.port, topic_name) == {(1, 2)}, message="both replicas in sync")
        held = _count(leader, "kbroker_fetch_idleroundsheld_total")
        wait_until(lambda: _count(leader, "kbroker_fetch_idleroundsheld_total") >= held + 3, 30, 0.2,
                   "the follower's rounds over the partitions at rest, held by the leader")
        follower.pause()
        paused = time.monotonic()
        try:
            wait_until(lambda: isrs(leader.port, topic_name) == {(leader_id,)}, 30, 0.2,
                       "the paused follower out of every ISR")
            shrunk = time.monotonic() - paused
            assert zk.exists(f"/kbroker/brokers/ids/{follower_id}"), "the follower's ZooKeeper session ended"
        finally:
            follower.resume()
        # (caught up at its last round, at most a fetch wait before the pause: never out before the lag less that)
        assert shrunk >= (lag_ms - 500) / 1000, f"shrunk {shrunk:.1f} s after the pause"
        wait_until(lambda: isrs(leader.port, topic_name) == {(1, 2)}, 60, 0.2, "the follower back in every ISR")
    finally:
        zk.stop()
        for broker in cluster.brokers.values():
            broker.resume()
        assert all(code == 0 for code in cluster.stop().values())


def isrs(port: int, topic: str) -> set[tuple[int, ...]]:
    """The ISRs of the topic's partitions as the broker on ``port`` knows them."""
    return {tuple(sorted(p.isr_nodes)) for p in partitions_at(port, topic)}
