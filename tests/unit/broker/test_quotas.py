"""Client quota arithmetic without sockets: which entity's quota applies (Kafka's resolution order), whose
usage it is, and that throttle times pace a client at its quota from its first request on."""

import pytest

from kbroker.broker.configuration.quotas import DEFAULT, FETCH, PRODUCE, REQUEST, QuotaManager, entity_components, entity_from_components


def manager(**configs) -> QuotaManager:
    q = QuotaManager()
    for entity, values in configs.items():
        user, _, client = entity.partition("|")
        q.replace((user or None, client or None), values)
    return q


@pytest.mark.parametrize("user, client, bound", [
    ("alice", "app", 1), ("alice", "other", 2), ("bob", "app", 4), ("bob", "other", 5), ("carol", "x", 5),
])
def test_the_most_specific_entity_with_the_key_applies(user, client, bound):
    q = manager(**{"alice|app": {PRODUCE: 1}, f"alice|{DEFAULT}": {PRODUCE: 2}, "alice": {FETCH: 3},
                   f"{DEFAULT}|app": {PRODUCE: 4}, DEFAULT: {PRODUCE: 5}, "|app": {PRODUCE: 6}})
    assert q.resolve(PRODUCE, user, client)[1] == bound


def test_a_default_gives_each_user_a_quota_of_their_own():
    q = manager(**{DEFAULT: {PRODUCE: 1000}})
    assert q.record(PRODUCE, "alice", "c", 1000, 0.0) == 0
    assert q.record(PRODUCE, "bob", "c", 1000, 0.0) == 0          # bob's usage is not alice's
    assert q.record(PRODUCE, "alice", "d", 1000, 0.0) == 1000     # alice's, whatever her client id


@pytest.mark.parametrize("size", [1_000_000, 100_000, 10_000])
def test_a_client_that_waits_out_its_throttle_runs_at_its_quota(size):
    q = manager(**{"|slow": {PRODUCE: 1_048_576}})
    now, sent = 0.0, []
    while now < 60:
        sent.append((now, size))
        now += max(q.record(PRODUCE, "ANONYMOUS", "slow", size, now) / 1000, 0.001)
    for start in (0, 10, 20, 40):
        rate = sum(n for t, n in sent if start <= t < start + 20) / 20
        assert 0.9 <= rate / 1_048_576 <= 1.1


def test_request_percentage_is_a_share_of_one_thread_and_unrecord_takes_back():
    q = manager(**{"|c": {REQUEST: 10}})   # 10 %: 100 ms of work per second
    assert q.record(REQUEST, "u", "c", 100, 0.0) == 0
    assert q.record(REQUEST, "u", "c", 100, 0.0) == 1000
    q.unrecord(REQUEST, "u", "c", 100, 0.0)
    assert q.record(REQUEST, "u", "c", 0, 0.0) == 0
    assert q.record(PRODUCE, "u", "c", 10**9, 0.0) == 0   # no byte-rate quota configured


def test_entities_round_trip_through_the_protocol_form():
    for entity in [("alice", None), (DEFAULT, "app"), (None, DEFAULT), ("alice", "app")]:
        components = [(c["entity_type"], c["entity_name"]) for c in entity_components(entity)]
        assert entity_from_components(components) == entity
