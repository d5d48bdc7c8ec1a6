"""franz-go's own integration tests (pkg/kgo, the Go client's 150-odd tests against a live broker) pass
against one kbroker (its SCRAM and OAUTHBEARER tests on a SASL listener), and its ETL tests pass on a three-broker
cluster with every connection cut after 0.5-1.5 s (its chaos mode). Slow: about 70 s and two minutes, plus the module's first download."""

import pytest

from tests.compat.franz_go_suite import ETL_TESTS, broker_with_sasl, run

pytestmark = [pytest.mark.compat, pytest.mark.slow]


def test_franz_gos_client_tests_pass_against_one_broker(tmp_path):
    broker, sasl = broker_with_sasl(str(tmp_path / "data"))
    try:
        outcomes, log = run(broker.bootstrap, 1, sasl_seeds=sasl)
    finally:
        assert broker.stop() == 0
    failed = sorted(name for name, outcome in outcomes.items() if outcome == "FAIL")
    skipped = {name for name, outcome in outcomes.items() if outcome == "SKIP"}
    assert not failed, f"{failed}\n{log[-6000:]}"
    assert not skipped, skipped   # (its SASL tests run on the broker's SASL listener)
    assert sum(outcome == "PASS" for outcome in outcomes.values()) >= 150, sorted(outcomes)


def test_franz_gos_etl_chains_pass_on_a_cluster_with_connections_cut(tmp_path):
    from tests.cluster import Cluster

    cluster = Cluster(str(tmp_path)).start()
    try:
        outcomes, log = run(cluster.bootstrap, 3, ETL_TESTS, chaos=True)
    finally:
        codes = cluster.stop()
    assert outcomes == {"TestGroupETL": "PASS", "TestShareGroupETL": "PASS", "TestTxnEtl": "PASS"}, log[-6000:]
    assert all(code == 0 for code in codes.values()), codes
