"""max.connections.per.ip (and its overrides), max.connections and connections.max.idle.ms on a real broker:
connections beyond a limit are closed at once while the admitted ones are served, a freed slot admits again,
and a silent connection is closed while a busy one stays."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from tests.brokerproc import BrokerProcess
from tests.cluster import wait_until

pytestmark = pytest.mark.timeout(120)


def api_versions(sock: socket.socket, correlation_id: int = 1) -> bool:
    """One ApiVersions round trip: True if answered, False if the broker closed the connection."""
    body = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"test"
    try:
        sock.sendall(struct.pack(">i", len(body)) + body)
        header = sock.recv(8)
        if len(header) < 8:
            return False
        size, answered = struct.unpack(">ii", header)
        remaining = size - 4
        while remaining > 0:
            remaining -= len(sock.recv(remaining))
        return answered == correlation_id
    except (ConnectionError, socket.timeout):
        return False


def connect(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=10)


def test_connections_beyond_the_per_ip_and_broker_limits_are_refused(tmp_path):
    broker = BrokerProcess(str(tmp_path / "data"), {"max.connections.per.ip": "3"}).start()
    try:
        admitted = [connect(broker) for _ in range(3)]
        assert all(api_versions(s) for s in admitted)
        extra = connect(broker)
        assert not api_versions(extra)                       # closed at once
        assert all(api_versions(s, 2) for s in admitted)     # the others are served as before
        admitted.pop().close()
        wait_until(lambda: broker.connections() == 2, 10, 0.02, "the broker closed its side")   # (its slot freed)
        again = connect(broker)
        assert api_versions(again)                           # a freed slot admits again
        for s in [*admitted, extra, again]:
            s.close()
    finally:
        assert broker.stop() == 0
    log = open(broker.log_path, encoding="utf-8").read()
    assert "connection_refused" in log and "max.connections.per.ip 3" in log

    overridden = BrokerProcess(str(tmp_path / "data2"), {"max.connections.per.ip": "0",
                                                          "max.connections.per.ip.overrides": "127.0.0.1:2",
                                                          "max.connections": "5"}).start()
    try:
        socks = [connect(overridden) for _ in range(3)]
        assert [api_versions(s) for s in socks] == [True, True, False]
    finally:
        for s in socks:
            s.close()
        assert overridden.stop() == 0


def test_the_broker_wide_limit_refuses_clients_beyond_it(tmp_path):
    broker = BrokerProcess(str(tmp_path / "data"), {"max.connections": "2"}).start()
    try:
        socks = [connect(broker) for _ in range(3)]
        assert [api_versions(s) for s in socks] == [True, True, False]
        for s in socks:
            s.close()
    finally:
        assert broker.stop() == 0


def test_idle_connections_are_closed_and_busy_ones_stay(tmp_path):
    broker = BrokerProcess(str(tmp_path / "data"), {"connections.max.idle.ms": "1000"}).start()
    try:
        silent, busy = connect(broker), connect(broker)
        assert api_versions(silent) and api_versions(busy)
        for i in range(10):                                 # 3 s: busy asks every 0.3 s, silent says nothing
            time.sleep(0.3)
            assert api_versions(busy, i + 2)
        silent.settimeout(5)
        assert silent.recv(1) == b""                        # closed by the broker
        silent.close()
        busy.close()
    finally:
        assert broker.stop() == 0
    assert "connection_idle_closed" in open(broker.log_path, encoding="utf-8").read()
