"""The in-process broker: the ``kbroker`` pytest fixture (from the plugin's entry point, as a user gets it)
and the ``KBroker`` context manager, driven by real clients over real sockets."""

from __future__ import annotations

import os

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer

from kbroker.broker.embedded import KBroker


async def test_the_fixture_serves_aiokafka(kbroker, topic_name):
    producer = AIOKafkaProducer(bootstrap_servers=kbroker.bootstrap_servers)
    await producer.start()
    try:
        for i in range(20):
            await producer.send_and_wait(topic_name, b"v%d" % i)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic_name, bootstrap_servers=kbroker.bootstrap_servers, group_id="g",
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        got = []
        async for msg in consumer:
            got.append(msg.value)
            if len(got) == 20:
                break
    finally:
        await consumer.stop()
    assert got == [b"v%d" % i for i in range(20)]
    assert kbroker.start_seconds < 2   # (the benchmark reports the real figure; this machine is shared)


class TestSettings:
    @pytest.fixture
    def kbroker_config(self):
        return {"num.partitions": "3"}

    def test_settings_come_from_the_kbroker_config_fixture(self, kbroker, topic_name):
        producer = Producer({"bootstrap.servers": kbroker.bootstrap_servers})
        producer.produce(topic_name, b"x")
        assert producer.flush(10) == 0
        assert kbroker.broker.metadata.topics[topic_name].partitions == 3


def test_the_context_manager_cleans_up_after_itself(topic_name):
    with KBroker() as broker:
        data_dir = broker.broker.config.log_dirs[0]
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce(topic_name, b"hello")
        assert producer.flush(10) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic_name])
        msg = None
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                break
        consumer.close()
        assert msg is not None and msg.value() == b"hello"
        assert os.path.isdir(data_dir)
    assert not os.path.exists(data_dir)


def test_run_on_loop_calls_into_the_broker_on_its_own_loop(topic_name):
    """A caller on another thread reaches the broker's objects through ``run_on_loop``: the coroutine runs on
    the broker's loop (not the caller's thread) and its result, or its exception, comes back."""
    import asyncio
    import threading

    async def where_and_topics():
        return threading.current_thread(), sorted(broker.broker.metadata.topics)

    async def fails():
        raise KeyError("nope")

    with KBroker() as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce(topic_name, b"x")
        assert producer.flush(10) == 0
        thread, topics = broker.run_on_loop(where_and_topics())
        assert thread is not threading.current_thread()
        assert topic_name in topics
        with pytest.raises(KeyError):
            broker.run_on_loop(fails())
        assert broker.run_on_loop(asyncio.sleep(0, "done")) == "done"


def test_a_users_own_modules_named_like_kbrokers_folders_stay_theirs(tmp_path):
    """Installed, kbroker is one import name: a project with its own ``protocol``, ``client``, ``storage``,
    ``broker`` and ``coordinators`` modules (first on sys.path) runs an in-process broker and a client, and its
    modules are the ones it imports."""
    import subprocess
    import sys

    for name in ("protocol", "client", "storage", "broker", "coordinators"):
        (tmp_path / f"{name}.py").write_text(f"OWNER = 'user'\nNAME = {name!r}\n")
    script = (
        "import protocol, client, storage, broker, coordinators\n"
        "from confluent_kafka import Consumer, Producer\n"
        "from kbroker.broker.embedded import KBroker\n"
        "with KBroker() as b:\n"
        "    p = Producer({'bootstrap.servers': b.bootstrap_servers})\n"
        "    p.produce('t', b'v'); assert p.flush(10) == 0\n"
        "    c = Consumer({'bootstrap.servers': b.bootstrap_servers, 'group.id': 'g',\n"
        "                  'auto.offset.reset': 'earliest'})\n"
        "    c.subscribe(['t']); m = c.poll(10); c.close()\n"
        "    assert m is not None and m.value() == b'v'\n"
        "import sys\n"
        "assert all(sys.modules[n].OWNER == 'user' for n in ('protocol', 'client', 'storage', 'broker',\n"
        "                                                        'coordinators'))\n"
        "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr[-2000:]
