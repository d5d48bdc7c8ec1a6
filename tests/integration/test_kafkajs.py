"""kafkajs, the Node.js client (from the npm registry, run by node), against a real kbroker: admin requests,
idempotent and gzip produce, a classic group of two members, transactions with a group's offsets."""

from tests.kafkajs import run_scenario


def test_kafkajs_produces_consumes_in_a_group_and_commits_transactions(broker):
    seen = run_scenario(broker.bootstrap)
    assert sorted(p for member in seen.pop("assigned") for p in member) == [0, 1, 2]
    assert seen == {"created": True, "partitions": 3, "brokers": 1, "endOffsets": 300, "read": 300,
                    "readByEach": [True, True], "committed": 300, "listed": True, "state": "Empty",
                    "transactionalOffset": 5, "transactional": ["committed-1", "committed-2", "committed-3"],
                    "topicsLeft": 0}
