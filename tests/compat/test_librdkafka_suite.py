"""librdkafka's own tests, built from librdkafka's source and run against kbroker: those that need Kafka's
command-line tools (0052 message timestamps by topic config, 0077 compaction), with Kafka's kafka-topics.sh from
Maven Central's jars, and the whole suite on brokers configured as librdkafka's own. Slow: the first run builds
librdkafka (about a minute), 0077 waits for the cleaner (about two), the whole suite takes about seven."""

import pytest

from tests.compat.librdkafka_suite import TOOL_TESTS, run, run_suite

# (The first test to run builds librdkafka inside its time: about a minute on a quiet machine, three on a busy
# one, where the tool tests then took longer than the default 300 s.)
pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.timeout(1200)]


def test_librdkafka_tests_that_call_kafkas_tools_pass(tmp_path):
    from tests.brokerproc import BrokerProcess

    broker = BrokerProcess(str(tmp_path / "data")).start()
    try:
        results = run(broker, TOOL_TESTS)
    finally:
        assert broker.stop() == 0
    not_passed = {t: results[t] for t in TOOL_TESTS if results[t] != "PASSED"}
    assert not not_passed, f"{not_passed}\n" + "\n".join(own_lines(results["log"], t) for t in not_passed)


def test_librdkafka_whole_suite_passes_on_brokers_configured_as_its_own():
    """Every test of the runner's quick mode that needs a broker: none fails (those its options leave out, mock
    clusters and librdkafka's unit tests, are skipped), and most pass: on 2026-11-30, 93-94 passed, 63 were
    skipped and 14-15 had no outcome to read (manual ones, and those the summary lists as still running)."""
    results = run_suite()
    outcomes = {t: o for t, o in results.items() if t != "log"}
    failed = sorted(t for t, o in outcomes.items() if o == "FAILED")
    assert not failed, f"{failed}\n" + "\n".join(own_lines(results["log"], t) for t in failed)
    assert sum(o == "PASSED" for o in outcomes.values()) >= 90, outcomes


def own_lines(log: str, test: str, last: int = 80) -> str:
    """The last lines the runner printed for ``test`` (each starts ``[0115_producer_auth   / 1.2s]``): the
    tests run five at a time, so the log's tail is mostly the others'."""
    return "\n".join([line for line in log.splitlines() if line.startswith(f"[{test}_")][-last:])
