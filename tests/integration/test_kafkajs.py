"""kafkajs, the Node.js client (from the npm registry, run by node), against a real kbroker: admin requests,
idempotent and gzip produce, a classic group of two members, transactions with a group's offsets; and its own
SASL code (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, over TLS) with re-authentication."""

from tests.brokerproc import BrokerProcess
from tests.integration.test_sasl import (ALICE, MECHANISMS, add_scram_user, confluent_security, sasl_settings,
                                         start_sasl_broker, user_for)
from tests.kafkajs import run_scenario, run_security


def test_kafkajs_produces_consumes_in_a_group_and_commits_transactions(broker):
    seen = run_scenario(broker.bootstrap)
    assert sorted(p for member in seen.pop("assigned") for p in member) == [0, 1, 2]
    assert seen == {"created": True, "partitions": 3, "brokers": 1, "endOffsets": 300, "read": 300,
                    "readByEach": [True, True], "committed": 300, "listed": True, "state": "Empty",
                    "transactionalOffset": 5, "transactional": ["committed-1", "committed-2", "committed-3"],
                    "topicsLeft": 0}


def test_kafkajs_authenticates_with_every_mechanism_and_re_authenticates(tmp_path, pki):
    """kafkajs's own PLAIN and SCRAM code over SASL_SSL (and SASL_PLAINTEXT), producing for longer than the
    broker's connections.max.reauth.ms: every record written and read in a group, each connection
    re-authenticated rather than reopened, and a wrong password refused."""
    broker = start_sasl_broker(BrokerProcess(str(tmp_path / "data"), {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0", "ssl.keystore.location": pki.broker,
        **sasl_settings(**{"connections.max.reauth.ms": "1500"})}))
    try:
        add_scram_user(broker.bootstrap, confluent_security("SASL_PLAINTEXT", "PLAIN", pki), *ALICE)
        for protocol, mechanism in [("SASL_SSL", m) for m in MECHANISMS] + [("SASL_PLAINTEXT", "SCRAM-SHA-256")]:
            seen = run_security(f"127.0.0.1:{broker.ports[protocol]}", mechanism, user_for(mechanism),
                                pki.ca if protocol == "SASL_SSL" else None, records=8, gap_ms=250)
            assert seen == {"created": True, "read": 8, "committed": 8,
                            "wrongPassword": "KafkaJSSASLAuthenticationError"}, (protocol, mechanism)
    finally:
        assert broker.stop() == 0
    log = open(broker.log_path, encoding="utf-8").read()
    assert "Traceback" not in log
    # (a producer's connection lived for 2 s against sessions of 1.5 s: re-authenticated on it, not reopened)
    peers = [line.split("peer=")[1].split()[0] for line in log.splitlines() if "sasl_authenticated" in line]
    assert max(peers.count(p) for p in set(peers)) >= 3
