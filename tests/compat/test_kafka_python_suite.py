"""kafka-python's own integration tests that must pass against kbroker (the MUST_PASS list)."""

import pytest

from tests.compat.kafka_python_suite import BROKER_OVERRIDES, MUST_PASS, run

pytestmark = pytest.mark.compat


def test_kafka_python_must_pass_list(tmp_path):
    from tests.brokerproc import BrokerProcess

    broker = BrokerProcess(str(tmp_path / "data"), BROKER_OVERRIDES).start()
    try:
        failures: dict[str, str] = {}
        results = run(broker, MUST_PASS, failures)
    finally:
        assert broker.stop() == 0
    not_passed = {t: results.get(t, "not run") for t in MUST_PASS if results.get(t) != "passed"}
    assert not not_passed, (not_passed, failures)
