"""Controlled shutdown in a cluster: where leaderships go, what every broker is told, and what the stopping broker
still does while the controller moves them."""

from __future__ import annotations

import asyncio
import io
import signal
import threading

import pytest

from kbroker.broker.cluster.zk_client import KafkaZkClient
from kbroker.client.connection import KafkaConnection
from kbroker.protocol import schema
from kbroker.protocol import types as t
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.headers import decode_request_header, response_header
from tests.cluster import Cluster, controller_of, create, describe, partitions_at, wait_until

pytestmark = pytest.mark.timeout(240)

FETCH, LEADER_AND_ISR = 1, 4


def test_a_controller_that_shuts_down_leaves_every_broker_told_where_its_leaderships_went(cluster, topic_name):
    """The controller's own controlled shutdown moves its leaderships, then it stops: once it has exited, every
    other broker's Metadata already names the new leader (the UpdateMetadata it queued were answered before
    its queues went with it), without waiting for the next controller to tell them."""
    controller = controller_of(cluster)
    others = [b for i, b in cluster.brokers.items() if i != controller]
    create(cluster.bootstrap, topic_name, 3, 3)
    wait_until(lambda: all(len(p["isr"]) == 3 for p in describe(cluster.bootstrap, topic_name).values()), 30, 0.2,
               "full ISRs")

    def leaders_on(port: int) -> dict[int, int]:
        return {p.partition_index: p.leader_id for p in partitions_at(port, topic_name)}

    assert controller in leaders_on(others[0].port).values()   # (replicas spread: it leads one)
    try:
        assert cluster.brokers[controller].stop() == 0
        for broker in others:
            leaders = leaders_on(broker.port)
            assert sorted(leaders) == [0, 1, 2] and controller not in leaders.values(), (broker.port, leaders)
    finally:
        cluster.brokers[controller].start()
    wait_until(cluster._formed, 30, 0.1, "the controller back")


class HeldLeader:
    """A stand-in leader on its own port: it keeps the replica fetches it is sent, each held unanswered until
    ``release``; then it answers it with nothing, and no fetch session (so every fetch names all it fetches)."""

    def __init__(self) -> None:
        self.fetches: list[dict[tuple[str, int], int]] = []   # each fetch's partitions and their leader epochs
        self._held: list[asyncio.Future] = []
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        self._loop.run_forever()

    async def _serve(self, reader, writer) -> None:
        try:
            while True:
                frame = await reader.readexactly(int.from_bytes(await reader.readexactly(4), "big"))
                buffer = t.BufferReader(frame)
                header = decode_request_header(buffer, flexible=True)
                assert (header.api_key, header.api_version) == (FETCH, 12), header
                body = schema.decode(schema.struct_for(FETCH, 12, True), buffer)
                released = self._loop.create_future()
                self._held.append(released)
                self.fetches.append({(topic.topic, p.partition): p.current_leader_epoch
                                     for topic in body.topics for p in topic.partitions})
                await released
                answer, _ = schema.encode(schema.struct_for(FETCH, 12, False), {
                    "throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": []})
                out = io.BytesIO()
                out.write(response_header(header.correlation_id, FETCH, True))
                out.write(answer.getvalue())
                writer.write(len(out.getvalue()).to_bytes(4, "big") + out.getvalue())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def release(self) -> None:
        """Answer the fetch held now."""
        self._loop.call_soon_threadsafe(lambda: [f.set_result(None) for f in self._held if not f.done()])

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)


def test_a_broker_shutting_down_follows_nothing_it_is_made_a_follower_of(tmp_path, topic_name):
    """Once its controlled shutdown has started, a broker made a follower of a partition stops fetching it and
    starts no fetcher for it, as Kafka's ReplicaManager does while ``isShuttingDown``. A Kafka controller makes
    the stopping broker a follower of what it led on purpose; kbroker's replica caught up with the new leader
    just before it exited, and a Kafka 3.3 leader, which counts a replica caught up within
    ``replica.lag.time.max.ms`` even after its broker is gone, held acks=all writes at that replica's end until a
    producer's retry (30 s). Here the controller is paused to hold the shutdown open, and the test is the
    controller: its LeaderAndIsr names a stand-in leader that holds each replica fetch until the test lets it
    go, so the first fetch sent after that LeaderAndIsr shows what the broker follows."""
    cluster = Cluster(str(tmp_path / "cluster"), overrides={"zookeeper.session.timeout.ms": "15000"}).start()
    leader = HeldLeader()
    controller = None
    try:
        create(cluster.bootstrap, topic_name, 2, 3)
        wait_until(lambda: all(len(p["isr"]) == 3 for p in describe(cluster.bootstrap, topic_name).values()),
                   30, 0.2, "full ISRs")
        controller = controller_of(cluster)
        stopping_id = next(b for b in sorted(cluster.brokers) if b != controller)
        stopping = cluster.brokers[stopping_id]
        zk = KafkaZkClient(cluster.zookeeper.connect + "/kbroker", 6000)
        zk.start()
        try:
            states = {p: zk.partition_state(topic_name, p) for p in (0, 1)}
            topic_id = zk.topic_assignment(topic_name).topic_id
            controller_epoch, broker_epoch = zk.controller_epoch(), zk.broker_info(stopping_id).epoch
        finally:
            zk.stop()

        def made_follower(bumps: dict[int, int]) -> None:
            """A LeaderAndIsr from the current controller's epoch: ``stopping`` follows the stand-in (broker 99)
            for each partition in ``bumps``, at its leader epoch plus that bump."""
            partitions = [{"partition_index": p, "controller_epoch": controller_epoch, "leader": 99,
                           "leader_epoch": states[p].leader_epoch + bump, "isr": [99], "replicas": [99, stopping_id],
                           "partition_epoch": states[p].zk_version + bump, "adding_replicas": [],
                           "removing_replicas": [], "is_new": False, "leader_recovery_state": 0}
                          for p, bump in bumps.items()]

            async def send():
                conn = await KafkaConnection.open("127.0.0.1", stopping.port)
                try:
                    return await conn.request(LEADER_AND_ISR, 7, {
                        "controller_id": controller, "controller_epoch": controller_epoch,
                        "broker_epoch": broker_epoch, "type": 0,
                        "topic_states": [{"topic_name": topic_name, "topic_id": topic_id,
                                          "partition_states": partitions}],
                        "live_leaders": [{"broker_id": 99, "host_name": "127.0.0.1", "port": leader.port}]})
                finally:
                    await conn.close()
            answer = asyncio.run(send())
            assert answer.error_code == ErrorCode.NONE, answer
            assert {p.error_code for t in answer.topics for p in t.partition_errors} == {ErrorCode.NONE}, answer

        made_follower({0: 1, 1: 1})
        wait_until(lambda: leader.fetches, 15, 0.05, "a fetch from the broker made a follower")
        followed = {(topic_name, 0): states[0].leader_epoch + 1, (topic_name, 1): states[1].leader_epoch + 1}
        assert leader.fetches[0] == followed   # (held: the broker's next fetch is built after what comes now)

        cluster.brokers[controller].pause()   # (its controlled shutdown waits for the controller)
        stopping.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: "controlled_shutdown_started" in open(stopping.log_path, encoding="utf-8").read(),
                   15, 0.05, "the broker's controlled shutdown under way")
        made_follower({0: 2})   # a new leader epoch for partition 0: its leader moved, this broker is to follow
        fetches = len(leader.fetches)
        leader.release()
        wait_until(lambda: len(leader.fetches) > fetches, 15, 0.05, "the broker's next fetch")
        assert leader.fetches[fetches] == {(topic_name, 1): states[1].leader_epoch + 1}, leader.fetches
    finally:
        if controller is not None:
            cluster.brokers[controller].resume()
        leader.close()
        codes = cluster.stop()
    assert all(code == 0 for code in codes.values() if code is not None), codes
