"""One Apache Kafka node and one kbroker, configured alike, shared by the whole differential suite."""

import itertools
import uuid

import pytest

pytest.register_assert_rewrite("tests.reference.differential")   # (its diffs show both answers)

from tests.brokerproc import BrokerProcess  # noqa: E402
from tests.reference.apache_kafka import SINGLE_NODE, KafkaNode  # noqa: E402
from tests.reference.differential import Target  # noqa: E402
from tests.reference.secured import secured_pair  # noqa: E402

# Set on both brokers alike, beside SINGLE_NODE: retention is checked, and timed-out transactions
# aborted, every second rather than every five minutes and ten seconds, so those scenarios wait seconds.
# A share group may set an acquisition lock as short as 1 s (Kafka's floor is 15 s by default), and a
# consumer or share group a heartbeat interval as short as 1 s (5 s by default): the scenarios where real
# clients wait for an assignment set their group's own, where a member would otherwise wait a heartbeat or two
# of 5 s. A new streams group assigns at once (its 3 s initial delay is tested where a group sets its own).
COMMON = {**SINGLE_NODE, "log.retention.check.interval.ms": "1000", "num.partitions": "1",
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
          "group.share.min.record.lock.duration.ms": "1000", "group.streams.initial.rebalance.delay.ms": "0",
          "group.consumer.min.heartbeat.interval.ms": "1000", "group.share.min.heartbeat.interval.ms": "1000"}


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    node = KafkaNode(str(tmp_path_factory.mktemp("apache-kafka")), dict(COMMON)).start()
    yield node
    node.stop()


@pytest.fixture(scope="session")
def kbroker(tmp_path_factory):
    # Without BrokerProcess's test settings (a 500 ms minimum session timeout, a fast cleaner): both
    # brokers run on their defaults but for COMMON.
    proc = BrokerProcess(str(tmp_path_factory.mktemp("kbroker") / "data"), dict(COMMON), test_overrides=False).start()
    yield proc
    assert proc.stop() == 0, proc.tail_log()


@pytest.fixture
def targets(kafka, kbroker) -> list[Target]:
    """Apache Kafka first: a diff reads ``kafka`` as what is expected."""
    return [Target("kafka", kafka.port), Target("kbroker", kbroker.port)]


@pytest.fixture(scope="session")
def secured(tmp_path_factory):
    """Kafka and kbroker with SASL/PLAIN listeners and ACLs on (tests.reference.secured), Kafka first."""
    yield from secured_pair(tmp_path_factory)


_counter = itertools.count()


@pytest.fixture
def topic(request) -> str:
    """A name of the test's own, the same on both brokers."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:50]
    return f"{base}-{next(_counter)}-{uuid.uuid4().hex[:6]}"
