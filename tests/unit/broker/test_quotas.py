"""Client quota arithmetic without sockets: which entity's quota applies (Kafka's resolution order), whose
usage it is, and that throttle times pace a client at its quota from its first request on."""

import pytest

from kbroker.broker.configuration.config import BrokerConfig
from kbroker.broker.configuration.quotas import (DEFAULT, FETCH, MUTATION, PRODUCE, REQUEST, QuotaManager,
                                                 entity_components, entity_from_components)
from kbroker.broker.network.connection_limits import ConnectionLimits


def manager(**configs) -> QuotaManager:
    q = QuotaManager()
    for entity, values in configs.items():
        user, _, client = entity.partition("|")
        q.replace((user or None, client or None, None), values)
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
    for entity in [("alice", None, None), (DEFAULT, "app", None), (None, DEFAULT, None), ("alice", "app", None),
                   (None, None, "10.0.0.1"), (None, None, DEFAULT)]:
        components = [(c["entity_type"], c["entity_name"]) for c in entity_components(entity)]
        assert entity_from_components(components) == entity


async def test_an_address_quota_beats_the_default_and_a_refusal_holds_for_the_time_to_the_next_token():
    limits = ConnectionLimits(BrokerConfig.from_dict({"log.dirs": "/tmp/unused"}))
    limits.set_ip_rates({"10.0.0.1": 2, DEFAULT: 1, "::0:1": 4})
    assert [limits.admit("10.0.0.1", "PLAINTEXT") for _ in range(2)] == [None, None]
    refused = limits.admit("10.0.0.1", "PLAINTEXT")
    assert refused.limit == "connection_creation_rate" and 0.4 < refused.hold_s <= 0.5
    assert limits.admit("10.0.0.9", "PLAINTEXT") is None                 # the default: one a second
    assert limits.admit("10.0.0.9", "PLAINTEXT").hold_s > 0.9
    assert [limits.admit("::1", "PLAINTEXT") for _ in range(4)] == [None] * 4   # an address's normal form
    assert limits.by_ip == {"10.0.0.1": 2, "10.0.0.9": 1, "::1": 4}      # the held ones are not counted
    assert limits.refused[("PLAINTEXT", "connection_creation_rate")] == 2


def test_the_quota_manager_tells_address_quotas_apart_and_they_enable_no_request_accounting():
    q = QuotaManager()
    told = []
    q.on_ip_rates.append(told.append)
    q.replace((None, None, "10.0.0.1"), {"connection_creation_rate": 3, "producer_byte_rate": 5})
    assert told == [{"10.0.0.1": 3}] and not q.enabled
    q.replace((None, "app", None), {PRODUCE: 5, "connection_creation_rate": 3})
    assert q.enabled and q.configs[(None, "app", None)] == {PRODUCE: 5}


def test_a_strict_mutation_quota_takes_what_fits_then_refuses_until_the_bucket_refills():
    q = QuotaManager(mutation_burst_s=11)
    q.replace((None, "admin", None), {MUTATION: 2})   # a bucket of 22, full at first
    strict = q.mutation_quota("u", "admin", strict=True)
    assert strict.admit(30)                            # it fits while the bucket is not below zero: 22 - 30 = -8
    assert not strict.admit(1) and 3900 <= strict.throttle_ms <= 4000   # 8 owed at 2 a second
    permissive = q.mutation_quota("u", "admin", strict=False)
    assert permissive.admit(2) and 4900 <= permissive.throttle_ms <= 5000   # done, and the answer throttled
    assert q.mutation_quota("u", "other", strict=True).admit(10**6)          # no quota for that client id
