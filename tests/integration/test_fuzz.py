"""Mutated copies of real clients' request frames, replayed at a broker: it stays up, keeps serving a
well-behaved client alongside, and logs no unhandled exception.

Frames are recorded through a proxy from librdkafka (idempotent and transactional producers, a classic
consumer group, a KIP-848 consumer, a share consumer acknowledging every way, client telemetry:
GetTelemetrySubscriptions and PushTelemetry), kafka-python (admin requests) and
the project's client (UpdateFeatures, CLIENT_METRICS configs), beside produce frames carrying compressed
bombs to a compacted topic, then mutated the way a broken client or a bad network would:
bytes flipped, an int32 field set to an extreme, the API key or version changed, the size prefix made to lie,
the stream cut short. Each mutated session is written pipelined on its own connection and closed after a
short read, often while its requests are parked (long-poll fetches, acks=all produces, group joins): the
case that once left a cancelled fetch completing in the purgatory.
"""

from __future__ import annotations

import asyncio
import random
import struct
import time

import pytest

from tests.integration.test_bad_input import create_topic, still_serving
from tests.proxy import DroppingProxy

# Lines in the broker's log that mean an exception escaped a handler or a callback.
UNHANDLED = ("Traceback", "Exception in callback", "exception was never retrieved", "handler_failed",
             "connection_failed", "response_failed", "InvalidStateError")
EXTREMES = (0, -1, 0x7FFFFFFF, -0x80000000, 0x10000, 1)


def record_sessions(port: int, topic: str) -> list[bytes]:
    """Request frames of real clients doing ordinary work, each prefixed by its size."""
    from confluent_kafka import Consumer, Producer
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    proxy = DroppingProxy(port, drop_every=0).start()
    bootstrap = f"127.0.0.1:{proxy.port}"
    # The broker advertises the proxy meanwhile, so that the clients' connections after the bootstrap one
    # (to the partition leaders and the coordinators) are recorded too.
    asyncio.run(_advertise(port, proxy.port))
    try:
        asyncio.run(_features_and_telemetry(proxy.port))
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(topic, 2, 1), NewTopic(topic + "-gone", 1, 1)])
        admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        admin.delete_topics([topic + "-gone"])
        admin.close()
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2})
        for i in range(200):
            producer.produce(topic, key=str(i).encode(), value=b"v" * (i % 50), headers=[("h", b"1")])
        assert producer.flush(30) == 0
        txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic + "-txn"})
        txn.init_transactions(30)
        for committed in (True, False):
            txn.begin_transaction()
            txn.produce(topic, b"in a transaction")
            txn.commit_transaction(30) if committed else txn.abort_transaction(30)
        txn.flush(10)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic + "-group",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "isolation.level": "read_committed", "fetch.wait.max.ms": 500})
        _read_and_commit(consumer, topic, 200)
        _new_group_types(bootstrap, topic)
    finally:
        asyncio.run(_advertise(port, port))
        proxy.stop()
    return [b"".join(frames) for frames in proxy.sessions if frames]


def _read_and_commit(consumer, topic: str, count: int) -> None:
    consumer.subscribe([topic])
    got = 0
    while got < count:
        msg = consumer.poll(10)
        assert msg is not None, f"{consumer} got nothing"
        got += msg.error() is None
    consumer.commit(asynchronous=False)
    consumer.close()


def _new_group_types(bootstrap: str, topic: str) -> None:
    """The two newer kinds of group on the same records: a KIP-848 consumer (ConsumerGroupHeartbeat, its
    assignment, OffsetCommit at its member epoch) and a KIP-932 share consumer (ShareGroupHeartbeat, ShareFetch
    in a share session, every kind of acknowledgement, ShareAcknowledge on close)."""
    from confluent_kafka import AcknowledgeType, Consumer, ShareConsumer

    from tests.integration.share_members import set_group_configs

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic + "-848", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    _read_and_commit(consumer, topic, 50)
    set_group_configs(bootstrap, topic + "-share", share_auto_offset_reset="earliest")
    share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": topic + "-share",
                           "share.acknowledgement.mode": "explicit"})
    share.subscribe([topic])
    kinds = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT)
    acknowledged = 0
    deadline = time.monotonic() + 30
    while acknowledged < 50:
        assert time.monotonic() < deadline, "the share consumer got too little"
        for msg in share.poll(1) or ():
            if msg.error() is None:
                share.acknowledge(msg, kinds[acknowledged % 3])
                acknowledged += 1
    share.close()


async def _advertise(port: int, advertised: int) -> None:
    from kbroker.client.connection import KafkaConnection

    conn = await KafkaConnection.open("127.0.0.1", port)
    try:
        answer = await conn.request(44, 1, {"resources": [{"resource_type": 4, "resource_name": "0", "configs": [
            {"name": "advertised.listeners", "config_operation": 0,
             "value": f"PLAINTEXT://127.0.0.1:{advertised}"}]}], "validate_only": False})
        assert answer.responses[0].error_code == 0, answer
    finally:
        await conn.close()


async def _features_and_telemetry(port: int) -> None:
    """A client metrics subscription (so librdkafka pushes its metrics while it works) and a validated feature
    update, sent through the recording proxy."""
    from kbroker.client.connection import KafkaConnection

    conn = await KafkaConnection.open("127.0.0.1", port)
    try:
        await conn.request(44, 1, {"resources": [{"resource_type": 16, "resource_name": "fuzz", "configs": [
            {"name": "metrics", "config_operation": 0, "value": "*"},
            {"name": "interval.ms", "config_operation": 0, "value": "100"}]}], "validate_only": False})
        await conn.request(57, 2, {"timeout_ms": 10000, "validate_only": True, "feature_updates": [
            {"feature": "transaction.version", "max_version_level": 1, "upgrade_type": 2}]})
    finally:
        await conn.close()


def bomb_sessions(bootstrap: str, topic: str) -> list[bytes]:
    """Produce frames carrying compressed bombs (every codec; zeros alone and one well-formed record) to a
    compacted topic, whose records the broker must read: small ones (16 MiB inflated), which mutation turns into
    broken streams, lying lengths and cut-short bodies."""
    from tests.hostile import CODECS, bomb_batch, produce_frame
    from tests.integration.workload import make_topic

    make_topic(bootstrap, topic, 1, {"cleanup.policy": "compact"})
    return [produce_frame(topic, bomb_batch(codec, 16 << 20, well_formed), correlation_id=n)
            for n, (codec, well_formed) in enumerate(((c, w) for c in CODECS.values() for w in (True, False)), 1)]


def mutate(rng: random.Random, session: bytes) -> bytes:
    """One to three mutations of a session's frames; the result may be a cut-short byte stream."""
    frames = []
    pos = 0
    while pos + 4 <= len(session):
        (size,) = struct.unpack_from(">i", session, pos)
        frames.append(bytearray(session[pos + 4:pos + 4 + size]))
        pos += 4 + size
    lying = {}
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(frames))
        frame = frames[i]
        kind = rng.choice(("flip", "flip", "extreme", "extreme", "version", "api", "size", "cut"))
        if kind == "flip" and frame:
            for _ in range(rng.randint(1, 4)):
                frame[rng.randrange(len(frame))] ^= rng.randrange(1, 256)
        elif kind == "extreme" and len(frame) >= 4:
            at = rng.randrange(len(frame) - 3)
            struct.pack_into(">i", frame, at, rng.choice(EXTREMES))
        elif kind == "version" and len(frame) >= 4:
            struct.pack_into(">h", frame, 2, rng.randint(-1, 20))
        elif kind == "api" and len(frame) >= 2:
            struct.pack_into(">h", frame, 0, rng.randint(-1, 95))
        elif kind == "size":
            lying[i] = max(0, len(frame) + rng.choice((-7, -1, 1, 3, 1000)))
        elif kind == "cut":
            frames[i] = frame[:rng.randrange(len(frame) + 1)]
    out = b"".join(struct.pack(">i", lying.get(i, len(f))) + bytes(f) for i, f in enumerate(frames))
    return out[:rng.randrange(len(out) // 2, len(out) + 1)] if rng.random() < 0.2 else out


async def replay(port: int, data: bytes, linger: float) -> None:
    """Send a mutated session pipelined, read for ``linger`` seconds, then hang up."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return
    try:
        writer.write(data)
        await writer.drain()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + linger
        while (left := deadline - loop.time()) > 0:
            if not await asyncio.wait_for(reader.read(65536), left):
                break
    except (OSError, asyncio.TimeoutError):
        pass
    finally:
        writer.close()


async def fuzz(broker, sessions: list[bytes], count: int, seed: int, well_behaved: str) -> None:
    rng = random.Random(seed)
    concurrent = 8
    for start in range(0, count, concurrent):
        batch = [mutate(rng, rng.choice(sessions)) for _ in range(min(concurrent, count - start))]
        await asyncio.gather(*(replay(broker.port, data, rng.choice((0.0, 0.05, 0.3))) for data in batch))
        if start % (concurrent * 10) == 0:
            await still_serving(broker, well_behaved)
            assert broker.proc.poll() is None, broker.tail_log()
    await still_serving(broker, well_behaved)


async def run_fuzz(broker, topic_name: str, count: int, seed: int) -> None:
    broker.overrides["metrics.port"] = "0"   # (client telemetry is offered with a metrics endpoint)
    broker.start()
    well_behaved = "well-behaved-client-topic"
    await create_topic(broker, well_behaved)
    sessions = await asyncio.to_thread(record_sessions, broker.port, topic_name)
    assert len(sessions) >= 3
    sessions += await asyncio.to_thread(bomb_sessions, broker.bootstrap, topic_name + "-compacted")
    await fuzz(broker, sessions, count, seed, well_behaved)
    await asyncio.sleep(1.5)   # parked operations reach their timeouts: a late completion would log now
    # Stopping completes whatever is still parked, after the connections are gone: that must log nothing either.
    assert broker.stop() == 0, broker.tail_log()
    with open(broker.log_path, encoding="utf-8", errors="replace") as f:
        bad = [line for line in f if any(marker in line for marker in UNHANDLED)]
    assert not bad, "".join(bad[:20])


async def test_mutated_client_frames_leave_the_broker_serving(fresh_broker, topic_name):
    await run_fuzz(fresh_broker, topic_name, count=400, seed=20261122)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_mutated_client_frames_soak(fresh_broker, topic_name, seed):
    await run_fuzz(fresh_broker, topic_name, count=6000, seed=seed)
