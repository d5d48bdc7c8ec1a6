"""librdkafka's own tests that need Kafka's command-line tools (0052 message timestamps by topic config, 0077
compaction), built from librdkafka's source and run against a kbroker process, with Kafka's kafka-topics.sh
from Maven Central's jars. Slow: the first run builds librdkafka (about a minute), 0077 waits for the cleaner
(about two)."""

import pytest

from tests.compat.librdkafka_suite import TOOL_TESTS, run

pytestmark = [pytest.mark.compat, pytest.mark.slow]


def test_librdkafka_tests_that_call_kafkas_tools_pass(tmp_path):
    from tests.brokerproc import BrokerProcess

    broker = BrokerProcess(str(tmp_path / "data")).start()
    try:
        results = run(broker, TOOL_TESTS)
    finally:
        assert broker.stop() == 0
    not_passed = {t: results[t] for t in TOOL_TESTS if results[t] != "PASSED"}
    assert not not_passed, f"{not_passed}\n{results['log'][-4000:]}"
