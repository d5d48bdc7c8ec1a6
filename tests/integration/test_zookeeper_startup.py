"""A broker rides out a ZooKeeper that is not ready yet: ZooKeeper opening its port before its database has
loaded (ZOOKEEPER-5051) accepts a connection and never answers it. The broker's connection attempts are
bounded, so a later attempt reaches the ready server within ``zookeeper.connection.timeout.ms`` instead of
the first one spending it all (2 of 10 cold `docker-compose up` runs lost a broker that way)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading

import pytest
from kazoo.client import KazooClient

from kbroker.broker.cluster import zookeeper_server
from kbroker.broker.cluster.zookeeper_server import ZooKeeperServer
from tests.brokerproc import BrokerProcess
from tests.cluster import CLUSTER_OVERRIDES, brokers_listed, wait_until

pytestmark = pytest.mark.timeout(120)

pick_free_port = zookeeper_server.free_port   # (the helper itself, kept before a test replaces it)


class SilentFirstConnection:
    """A TCP stand-in for a ZooKeeper that has just opened its port: it holds the first connection open and
    silent (never answered, never closed) and joins every later one to the real server."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.connections = 0
        self._held: list = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader, writer) -> None:
        self.connections += 1
        if self.connections == 1:
            self._held.append(writer)   # (kept open: the client must give up on it by itself)
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pipe(src, dst) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)


def test_a_broker_joins_through_a_zookeeper_that_ignores_its_first_connection(tmp_path):
    zookeeper = ZooKeeperServer(str(tmp_path / "zookeeper")).start()
    stand_in = SilentFirstConnection(zookeeper.port)
    # Kafka's default session timeout (18 s) and no connection timeout: the connection timeout is the
    # session timeout, which one unanswered attempt used to spend entirely.
    overrides = {**CLUSTER_OVERRIDES, "broker.id": "1", "zookeeper.session.timeout.ms": "18000",
                 "zookeeper.connect": f"127.0.0.1:{stand_in.port}/kbroker"}
    broker = BrokerProcess(os.path.join(tmp_path, "broker", "data"), overrides)
    try:
        broker.start(timeout=30)
        wait_until(lambda: brokers_listed(broker.port) == 1, 30, 0.1, "the broker registered in ZooKeeper")
        assert stand_in.connections >= 2
        assert broker.stop() == 0
    finally:
        broker.kill()
        stand_in.stop()
        zookeeper.stop()


def test_a_broker_refuses_the_data_of_another_cluster_or_broker(tmp_path):
    """meta.properties names the cluster of ZooKeeper's ``/cluster/id`` (kbroker used to write an id of its own
    there), and a broker whose data dir names another cluster, ZooKeeper's data lost or ``zookeeper.connect``
    naming another ensemble, does not start: its logs would be strays to this cluster's controller. Nor does a
    broker started on another broker's data dir. Kafka's checks, in Kafka's words."""
    data = os.path.join(tmp_path, "broker", "data")
    first = ZooKeeperServer(str(tmp_path / "zookeeper-1")).start()
    overrides = {**CLUSTER_OVERRIDES, "broker.id": "1", "offsets.topic.replication.factor": "1",
                 "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}
    broker = BrokerProcess(data, {**overrides, "zookeeper.connect": f"{first.connect}/kbroker"})
    try:
        broker.start()
        assert broker.stop() == 0
        with open(os.path.join(data, "meta.properties")) as meta:
            properties = dict(line.strip().split("=", 1) for line in meta if "=" in line)
        cluster_id = cluster_id_in(first)
        assert properties == {"version": "0", "broker.id": "1", "cluster.id": cluster_id}

        broker = BrokerProcess(data, {**overrides, "broker.id": "2", "zookeeper.connect": f"{first.connect}/kbroker"})
        with pytest.raises(RuntimeError):
            broker.start()
        assert broker.proc.returncode == 1
        assert f"Stored node id 1 doesn't match previous node id 2 in {data}/meta.properties" in broker.tail_log()

        second = ZooKeeperServer(str(tmp_path / "zookeeper-2")).start()
        try:
            broker = BrokerProcess(data, {**overrides, "zookeeper.connect": f"{second.connect}/kbroker"})
            with pytest.raises(RuntimeError):
                broker.start()
            assert broker.proc.returncode == 1
            other = cluster_id_in(second)
            assert f"Invalid cluster.id in: {data}/meta.properties. Expected {other}, but read {cluster_id}" \
                in broker.tail_log()
            assert os.listdir(data) and properties["cluster.id"] in open(os.path.join(data, "meta.properties")).read()
        finally:
            second.stop()
    finally:
        broker.kill()
        first.stop()


def test_a_zookeeper_whose_picked_port_is_taken_before_it_binds_starts_on_another(tmp_path, monkeypatch):
    """The tests' ZooKeeper exited with 1 in CI: the port it was given became an outgoing connection's local
    port while its JVM started. A port of the server's own picking is picked again; a port the caller named is
    not (brokers restarted against it know it), and ZooKeeper's log says why it exited."""
    with socket.create_server(("127.0.0.1", 0)) as listener, \
            socket.create_connection(listener.getsockname()) as connection:
        taken = connection.getsockname()[1]
        picks = iter([taken])
        monkeypatch.setattr(zookeeper_server, "free_port", lambda: next(picks, 0) or pick_free_port())
        zookeeper = ZooKeeperServer(str(tmp_path / "zookeeper")).start()
        try:
            assert zookeeper.port not in (0, taken) and zookeeper.ruok()
            log = open(tmp_path / "zookeeper" / "zookeeper.log", encoding="utf-8").read()
            assert log.count("Address already in use") >= 1 and "Exiting JVM with code 1" in log
        finally:
            zookeeper.stop()

        named = ZooKeeperServer(str(tmp_path / "named"), port=taken)
        with pytest.raises(RuntimeError, match="zookeeper exited with 1"):
            named.start()
        assert named.port == taken
        assert "Address already in use" in open(tmp_path / "named" / "zookeeper.log", encoding="utf-8").read()


def cluster_id_in(zookeeper: ZooKeeperServer) -> str:
    client = KazooClient(hosts=f"{zookeeper.connect}/kbroker")
    client.start(timeout=10)
    try:
        return json.loads(client.get("/cluster/id")[0])["id"]
    finally:
        client.stop()
        client.close()
