import itertools
import uuid

import pytest

from tests.brokerproc import BrokerProcess
from tests.cluster import Cluster
from tests.tls import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    """A CA, a broker certificate and a client certificate (tests.tls), one set per test module."""
    return make_pki(str(tmp_path_factory.mktemp("pki")))


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """One broker shared by the tests that only need topics of their own."""
    proc = BrokerProcess(str(tmp_path_factory.mktemp("shared-broker") / "data")).start()
    yield proc
    code = proc.stop()
    assert code == 0, f"broker exited {code} on SIGTERM:\n{proc.tail_log()}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """ZooKeeper and three brokers, one cluster per test module; every broker must stop cleanly at the end."""
    c = Cluster(str(tmp_path_factory.mktemp("cluster"))).start()
    yield c
    codes = c.stop()
    assert all(code == 0 for code in codes.values() if code is not None), codes


@pytest.fixture
def fresh_broker(tmp_path):
    """A broker of the test's own, for crash and restart tests."""
    proc = BrokerProcess(str(tmp_path / "data"))
    yield proc
    proc.kill()


@pytest.fixture
async def conn(broker):
    """A raw protocol connection (the project's own client) to the shared broker, client id ``wire-test``."""
    from kbroker.client.connection import KafkaConnection

    connection = await KafkaConnection.open("127.0.0.1", broker.port, client_id="wire-test")
    yield connection
    await connection.close()


_counter = itertools.count()


@pytest.fixture
def topic_name(request):
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    return f"{base}-{next(_counter)}-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def spark():
    """One local Spark session per test module (two cores, tasks retried up to 4 times), the kbroker source registered."""
    from tests.integration.spark_job import spark_session

    session = spark_session("kbroker-tests", **{"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()
