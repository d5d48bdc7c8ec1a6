"""Several log.dirs (JBOD): AlterReplicaLogDirs moves a replica between them while it serves, and a failed
log dir goes offline without stopping the broker (its partitions answer KAFKA_STORAGE_ERROR, the others serve).

Faults are real: the failed dir is removed from under the running broker and a file put in its place, as
Kafka's own log-dir failure tests do; the broker notices at its next I/O there (a checkpoint, a roll).
"""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaStorageError, LogDirNotFoundError, NoError, UnknownTopicOrPartitionError
from kafka.structs import TopicPartitionReplica

from tests.brokerproc import BrokerProcess
from tests.cluster import Cluster, batches, consume_all, describe, wait_until
from tests.integration.test_metrics import metrics_port, scrape, value
from tests.integration.workload import make_topic

FAST_IO = {"log.flush.offset.checkpoint.interval.ms": "300", "log.segment.delete.delay.ms": "200"}


def _two_dirs(tmp_path) -> list[str]:
    return [str(tmp_path / "data"), str(tmp_path / "data-b")]


def _placement(bootstrap: str, topic: str, broker: int | None = None) -> dict[int, tuple[str, bool, int]]:
    """partition -> (log dir, is future, offset lag) of every replica entry DescribeLogDirs lists (one broker:
    the only one, or ``broker`` of a cluster)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        (described,) = admin.describe_log_dirs(brokers=None if broker is None else [broker])
    finally:
        admin.close()
    out = {}
    for d in described["log_dirs"]:
        for t in d["topics"]:
            if t["name"] == topic:
                for p in t["partitions"]:
                    out.setdefault(p["partition_index"], []).append((d["log_dir"], p["is_future_key"], p["offset_lag"]))
    return out


def _dir_errors(bootstrap: str) -> dict[str, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return {d["log_dir"]: d["error_code"] for r in admin.describe_log_dirs() for d in r["log_dirs"]}
    finally:
        admin.close()


def _offline_replicas(bootstrap: str, topic: str) -> dict[int, list[int]]:
    """partition -> the replicas Metadata lists as offline, for the partitions that have any."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        (found,) = admin.describe_topics([topic])
    finally:
        admin.close()
    return {p["partition_index"]: sorted(p["offline_replicas"]) for p in found["partitions"] if p["offline_replicas"]}


def _fail_dir(path: str) -> None:
    """The disk under ``path`` is gone: the folder is removed and a file stands where it was. (The folder is
    moved aside first: removed in place, it could gain a file the live broker wrote after rmtree had listed it,
    and rmtree then failed with 'Directory not empty'. Once moved, nothing the broker writes by path lands in it.)"""
    gone = path + ".gone"
    os.rename(path, gone)
    with open(path, "w") as f:
        f.write("not a directory\n")
    shutil.rmtree(gone)


def test_replica_moves_to_another_log_dir_under_load(tmp_path, topic_name):
    """A partition moves between log dirs while an idempotent producer writes to it: every acknowledged
    record is there afterwards, once and in order, in the new dir only, and after a restart too."""
    dirs = _two_dirs(tmp_path)
    proc = BrokerProcess(dirs[0], {"log.dirs": ",".join(dirs), "log.segment.bytes": "200000", **FAST_IO}).start()
    try:
        make_topic(proc.bootstrap, topic_name, partitions=1)
        ((source, _, _),) = _placement(proc.bootstrap, topic_name)[0]
        target = next(d for d in dirs if d != source)
        acked, stop = [], threading.Event()

        def produce():
            producer = Producer({"bootstrap.servers": proc.bootstrap, "enable.idempotence": True, "linger.ms": 2})
            i = 0
            while not stop.is_set():
                producer.produce(topic_name, str(i).encode(), partition=0,
                                 on_delivery=lambda err, msg: err is None and acked.append(int(msg.value())))
                producer.poll(0)
                i += 1
                if i % 500 == 0:
                    time.sleep(0.01)
            assert producer.flush(30) == 0

        writer = threading.Thread(target=produce)
        writer.start()
        wait_until(lambda: len(acked) > 20000, message="records before the move")
        admin = KafkaAdminClient(bootstrap_servers=proc.bootstrap)
        try:
            result = admin.alter_replica_log_dirs({TopicPartitionReplica(topic_name, 0, 0): target})
        finally:
            admin.close()
        assert list(result.values()) == [NoError]
        wait_until(lambda: _placement(proc.bootstrap, topic_name)[0] == [(target, False, 0)], timeout=60,
                   message="the replica in its new dir, no copy left")
        moved_at = len(acked)
        wait_until(lambda: len(acked) > moved_at + 1000, message="more writes landing in the moved log")
        stop.set()
        writer.join(60)
        wait_until(lambda: not os.path.exists(os.path.join(source, f"{topic_name}-0"))
                   and not [n for n in os.listdir(source) if n.startswith(topic_name)],
                   message="the old copy removed after the delete delay")

        def check():
            got = [int(v) for _, _, v in consume_all(proc.bootstrap, topic_name, 1)]
            assert got == sorted(set(got)), "duplicates or reordering"
            assert set(acked) <= set(got), f"{len(set(acked) - set(got))} acknowledged records lost"
        check()
        assert proc.stop() == 0
        proc.start()
        assert _placement(proc.bootstrap, topic_name)[0] == [(target, False, 0)]
        check()
    finally:
        proc.kill()


def _set_broker_config(bootstrap: str, values: dict[str, str] | None, broker: int = 0) -> None:
    """Set dynamic configs of ``broker``, or (None) reset every one it has to its default."""
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        if values is None:
            admin.reset_configs([ConfigResource(ConfigResourceType.BROKER, str(broker), {})])
        else:
            # (replica.alter.log.dirs.io.max.bytes.per.second is a quota config, outside Kafka's KafkaConfig:
            # described only once set, so kafka-python must not check the names first, as against Kafka)
            admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(broker), values)],
                                raise_on_unknown=False)
    finally:
        admin.close()


def test_a_throttled_move_survives_kill_9_and_goes_on_from_its_copy(tmp_path, topic_name):
    """``replica.alter.log.dirs.io.max.bytes.per.second`` (dynamic) holds a move to that rate; a broker killed
    with kill -9 mid-move goes on with it after the restart from what its copy holds (it does not start
    over, nor drop the move, as Kafka resumes its alter-log-dirs fetchers); with the throttle lifted the
    move completes with every record, once, in order, in the new dir only."""
    dirs = _two_dirs(tmp_path)
    rate, size = 200_000, 3_000_000
    proc = BrokerProcess(dirs[0], {"log.dirs": ",".join(dirs), "log.segment.bytes": "500000", **FAST_IO}).start()
    try:
        make_topic(proc.bootstrap, topic_name, partitions=1)
        ((source, _, _),) = _placement(proc.bootstrap, topic_name)[0]
        target = next(d for d in dirs if d != source)
        producer = Producer({"bootstrap.servers": proc.bootstrap, "enable.idempotence": True, "linger.ms": 5})
        for i in range(size // 1000):
            producer.produce(topic_name, b"%06d" % i + b"x" * 994, partition=0)
            producer.poll(0)
        assert producer.flush(30) == 0
        _set_broker_config(proc.bootstrap, {"replica.alter.log.dirs.io.max.bytes.per.second": str(rate)})
        admin = KafkaAdminClient(bootstrap_servers=proc.bootstrap)
        try:
            assert list(admin.alter_replica_log_dirs({TopicPartitionReplica(topic_name, 0, 0): target}).values()) \
                == [NoError]
        finally:
            admin.close()

        def copy():
            entries = dict(((d, future), lag) for d, future, lag in _placement(proc.bootstrap, topic_name)[0])
            return entries.get((target, True))
        # At 200 kB/s, 3 MB takes 15 s: kill the broker once the copy is under way, far from done.
        wait_until(lambda: (copy() or size) < 0.9 * size // 1000, timeout=30, interval=0.2,
                   message="the copy under way")
        lag_before = copy()
        assert lag_before is not None and 0 < lag_before < size // 1000, lag_before   # moving, at the rate
        future_dir = next(n for n in os.listdir(target) if n.startswith(f"{topic_name}-0.") and n.endswith("-future"))
        proc.kill()
        copied = sum(os.path.getsize(os.path.join(target, future_dir, n))
                     for n in os.listdir(os.path.join(target, future_dir)) if n.endswith(".log"))
        assert 0 < copied < size, copied
        proc.start()   # the throttle is a stored dynamic config: it holds after the restart too
        lag_after = copy()
        assert lag_after is not None and lag_after < size // 1000, lag_after   # resumed from its copy
        _set_broker_config(proc.bootstrap, None)   # the throttle lifted
        wait_until(lambda: _placement(proc.bootstrap, topic_name)[0] == [(target, False, 0)], timeout=60,
                   message="the move finished in the new dir")
        got = [int(v[:6]) for _, _, v in consume_all(proc.bootstrap, topic_name, 1)]
        assert got == list(range(size // 1000))
        wait_until(lambda: not [n for n in os.listdir(source) if n.startswith(topic_name)],
                   message="the old copy removed after the delete delay")
    finally:
        proc.kill()


@pytest.mark.timeout(240)
def test_a_followers_move_cut_short_by_kill_9_goes_on_after_its_leader_and_isr(tmp_path, topic_name):
    """In a cluster: a follower replica moving between its broker's log dirs (throttled) when the broker is
    killed with kill -9 goes on with the move once the controller's LeaderAndIsr makes it a replica again;
    it completes, the replica rejoins the ISR and its batches are the leader's."""
    root = str(tmp_path)
    dirs = [os.path.join(root, "broker-1", "data"), os.path.join(root, "broker-1", "data-b")]
    cluster = Cluster(root, per_broker={1: {"log.dirs": ",".join(dirs), **FAST_IO}}).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            admin.create_topics([NewTopic(topic_name, replica_assignments={0: [2, 1]})])
        finally:
            admin.close()
        wait_until(lambda: sorted(describe(cluster.bootstrap, topic_name)[0]["isr"]) == [1, 2], message="ISR")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(2000):
            producer.produce(topic_name, b"%06d" % i + b"x" * 994, partition=0)
            producer.poll(0)
        assert producer.flush(30) == 0
        ((source, _, _),) = _placement(cluster.bootstrap, topic_name, 1)[0]
        target = next(d for d in dirs if d != source)
        wait_until(lambda: batches(source, topic_name, 0) == batches(cluster.brokers[2].data_dir, topic_name, 0),
                   message="the follower caught up")
        _set_broker_config(cluster.bootstrap, {"replica.alter.log.dirs.io.max.bytes.per.second": "200000"}, 1)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            assert list(admin.alter_replica_log_dirs({TopicPartitionReplica(topic_name, 0, 1): target}).values()) \
                == [NoError]
        finally:
            admin.close()
        # At 200 kB/s the copy of 2 MB takes about ten seconds: kill the broker once it is under way, far from done.
        wait_until(lambda: any(d == target and future and lag < 1800
                               for d, future, lag in _placement(cluster.bootstrap, topic_name, 1)[0]),
                   timeout=30, interval=0.2, message="the copy under way")
        entries = _placement(cluster.bootstrap, topic_name, 1)[0]
        assert any(d == target and future and lag > 0 for d, future, lag in entries), entries
        cluster.brokers[1].kill()
        cluster.brokers[1].start()
        wait_until(lambda: (target, True) in [(d, f) for d, f, _ in
                                              _placement(cluster.bootstrap, topic_name, 1).get(0, [])],
                   timeout=60, message="the move going on after the restart")
        _set_broker_config(cluster.bootstrap, None, 1)   # the throttle lifted
        wait_until(lambda: _placement(cluster.bootstrap, topic_name, 1)[0] == [(target, False, 0)], timeout=90,
                   message="the move finished")
        wait_until(lambda: sorted(describe(cluster.bootstrap, topic_name)[0]["isr"]) == [1, 2], timeout=60,
                   message="back in the ISR")
        wait_until(lambda: batches(target, topic_name, 0) == batches(cluster.brokers[2].data_dir, topic_name, 0),
                   timeout=30, message="the moved replica identical to the leader's")
    finally:
        codes = cluster.stop()
    assert all(code == 0 for code in codes.values()), codes


def test_alter_replica_log_dirs_answers(tmp_path, topic_name):
    """Kafka 4's answers: NONE for the dir a replica is in, LOG_DIR_NOT_FOUND for a path not in log.dirs,
    UNKNOWN_TOPIC_OR_PARTITION for a replica of a topic not made yet, which is then created in the dir asked
    for."""
    dirs = _two_dirs(tmp_path)
    proc = BrokerProcess(dirs[0], {"log.dirs": ",".join(dirs)}).start()
    try:
        make_topic(proc.bootstrap, topic_name, partitions=1)
        ((current, _, _),) = _placement(proc.bootstrap, topic_name)[0]
        later = topic_name + "-later"
        admin = KafkaAdminClient(bootstrap_servers=proc.bootstrap)
        try:
            same = TopicPartitionReplica(topic_name, 0, 0)
            assert admin.alter_replica_log_dirs({same: current}) == {same: NoError}
            assert admin.alter_replica_log_dirs({same: str(tmp_path / "elsewhere")}) == {same: LogDirNotFoundError}
            for index, wanted in enumerate(dirs):
                replica = TopicPartitionReplica(later, index, 0)
                assert admin.alter_replica_log_dirs({replica: wanted}) == {replica: UnknownTopicOrPartitionError}
        finally:
            admin.close()
        make_topic(proc.bootstrap, later, partitions=2)
        placed = _placement(proc.bootstrap, later)
        assert placed == {0: [(dirs[0], False, 0)], 1: [(dirs[1], False, 0)]}
    finally:
        assert proc.stop() == 0


def test_failed_log_dir_goes_offline_and_the_broker_keeps_serving(tmp_path, topic_name):
    """One of two dirs fails: its partitions answer KAFKA_STORAGE_ERROR and DescribeLogDirs lists the dir
    with that error; the partitions in the other dir take and serve records; when the last dir fails too the
    broker stops with a non-zero exit code."""
    dirs = _two_dirs(tmp_path)
    proc = BrokerProcess(dirs[0], {"log.dirs": ",".join(dirs), "metrics.port": "0", **FAST_IO}).start()
    try:
        port = metrics_port(proc)
        assert value(scrape(port), "kafka_log_logmanager_offlinelogdirectorycount") == 0
        make_topic(proc.bootstrap, topic_name, partitions=2)
        placed = {p: entries[0][0] for p, entries in _placement(proc.bootstrap, topic_name).items()}
        assert sorted(placed.values()) == sorted(dirs), placed   # one partition in each dir
        doomed = placed[1]
        survivor = next(p for p, d in placed.items() if d != doomed)
        failing = next(p for p, d in placed.items() if d == doomed)
        producer = KafkaProducer(bootstrap_servers=proc.bootstrap, retries=0, acks=1)
        for p in (0, 1):
            producer.send(topic_name, b"before", partition=p).get(10)
        _fail_dir(doomed)
        wait_until(lambda: _dir_errors(proc.bootstrap).get(doomed) == 56, message="the dir reported offline")
        assert value(scrape(port), "kafka_log_logmanager_offlinelogdirectorycount") == 1
        with pytest.raises(KafkaStorageError):
            producer.send(topic_name, b"after", partition=failing).get(10)
        for i in range(100):
            producer.send(topic_name, b"after-%d" % i, partition=survivor)
        producer.flush(10)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=proc.bootstrap, consumer_timeout_ms=3000,
                                 auto_offset_reset="earliest")
        consumer.assign([TopicPartition(topic_name, survivor)])
        got = [r.value for r in consumer]
        consumer.close()
        assert got == [b"before"] + [b"after-%d" % i for i in range(100)]
        assert proc.proc.poll() is None
        _fail_dir(next(d for d in dirs if d != doomed))
        assert proc.proc.wait(30) == 1, proc.tail_log()
    finally:
        proc.kill()


@pytest.mark.timeout(240)
def test_failed_log_dir_in_a_cluster_moves_leadership(tmp_path, topic_name):
    """A broker's log dir fails under acks=all load: the controller moves the leadership of the replicas in
    it to other brokers and takes them out of the ISR; the producer sees no error beyond retriable ones and
    every acknowledged record is readable, once; the broker keeps serving its replicas in its other dir."""
    root = str(tmp_path)
    dirs = [os.path.join(root, "broker-1", "data"), os.path.join(root, "broker-1", "data-b")]
    cluster = Cluster(root, per_broker={1: {"log.dirs": ",".join(dirs), **FAST_IO}}).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:   # broker 1 leads every partition, so some leadership has to move whichever dir they land in
            admin.create_topics([NewTopic(topic_name, replica_assignments={0: [1, 2, 3], 1: [1, 3, 2], 2: [1, 2, 3],
                                                                           3: [1, 3, 2]},
                                          topic_configs={"min.insync.replicas": "2"})])
        finally:
            admin.close()
        wait_until(lambda: all(p["leader"] == 1 for p in describe(cluster.bootstrap, topic_name).values())
                   and len(describe(cluster.bootstrap, topic_name)) == 4, message="broker 1 leading")
        wait_until(lambda: all(len(p["isr"]) == 3 for p in describe(cluster.bootstrap, topic_name).values()),
                   message="full ISRs")
        doomed = dirs[1]
        in_doomed = {int(n.rsplit("-", 1)[1]) for n in os.listdir(doomed) if n.startswith(topic_name + "-")}
        assert in_doomed and len(in_doomed) < 4, in_doomed
        acked, errors, stop = [], [], threading.Event()

        def produce():
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                                 "linger.ms": 2})
            i = 0
            while not stop.is_set():
                producer.produce(topic_name, str(i).encode(), partition=i % 4, on_delivery=lambda err, msg: (
                    acked.append(int(msg.value())) if err is None else errors.append(err)))
                producer.poll(0)
                i += 1
                if i % 200 == 0:
                    time.sleep(0.02)
            producer.flush(60)

        writer = threading.Thread(target=produce)
        writer.start()
        wait_until(lambda: len(acked) > 5000, message="records before the failure")
        _fail_dir(doomed)
        wait_until(lambda: all(p["leader"] != 1 and 1 not in p["isr"] for i, p in
                               describe(cluster.bootstrap, topic_name).items() if i in in_doomed),
                   timeout=60, message="leadership and ISR moved off the failed replicas")
        count = len(acked)
        wait_until(lambda: len(acked) > count + 5000, message="writes continuing")
        stop.set()
        writer.join(90)
        assert not errors, errors[:5]
        assert cluster.brokers[1].proc.poll() is None
        others = [p for p in range(4) if p not in in_doomed]
        state = describe(cluster.bootstrap, topic_name)
        assert all(1 in state[p]["isr"] for p in others), state   # its replicas in the good dir still in sync
        assert _offline_replicas(cluster.bootstrap, topic_name) == {p: [1] for p in in_doomed}
        # Restarted with the disk still failed: the dir is offline from the start, and the replicas the
        # controller expects there are answered KAFKA_STORAGE_ERROR, not recreated empty in the good dir.
        assert cluster.brokers[1].stop() == 0
        cluster.brokers[1].start()
        wait_until(lambda: _offline_replicas(cluster.bootstrap, topic_name) == {p: [1] for p in in_doomed}
                   and all(1 in p["isr"] for i, p in describe(cluster.bootstrap, topic_name).items()
                           if i not in in_doomed), timeout=60, message="offline again after the restart")
        assert not [n for n in os.listdir(dirs[0]) if any(n == f"{topic_name}-{p}" for p in in_doomed)]
        got = [int(v) for _, _, v in consume_all(cluster.bootstrap, topic_name, 4)]
        assert len(got) == len(set(got)), "duplicates"
        assert set(acked) <= set(got), f"{len(set(acked) - set(got))} acknowledged records lost"
    finally:
        codes = cluster.stop()
    assert all(code == 0 for code in codes.values()), codes
