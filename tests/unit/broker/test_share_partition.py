"""One share partition's record states (KIP-932): acquisition under locks, acknowledgements, releases, the
delivery limit and the start offset, driven without a broker or a clock."""

from __future__ import annotations

from kbroker.broker.shares.partition import (
    ACCEPT, ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, GAP, RECORD_LIMIT, REJECT, RELEASE, RENEW, SharePartition)
from kbroker.broker.shares.sessions import ShareSessions
from kbroker.protocol.errors import ErrorCode as E

LOCK = 1000


def test_records_are_acquired_once_until_released_then_delivered_again_with_a_higher_count():
    sp = SharePartition(0)
    lock, ranges = sp.acquire("a", [(0, 4, False)], 100, now_ms=0, lock_ms=LOCK)
    assert ranges == [(0, 4, 1)]
    assert sp.acquire("b", [(0, 4, False)], 100, 0, LOCK)[1] == []          # all held by a
    assert sp.acknowledge("a", [(0, 1, [ACCEPT]), (2, 2, [RELEASE]), (3, 4, [REJECT])]) == E.NONE
    assert sp.start == 2                                                     # 0 and 1 are done
    assert sp.acquire("b", [(0, 4, False)], 100, 0, LOCK)[1] == [(2, 2, 2)]
    assert sp.acknowledge("b", [(2, 2, [ACCEPT])]) == E.NONE
    assert (sp.start, sp.records) == (5, {})


def test_acquired_ranges_end_at_a_log_batch_once_they_hold_batch_size_records():
    """As Kafka groups them (tests/reference checks it against Kafka): a log batch is never split, and a range
    ends at the end of the log batch that brought it to BatchSize."""
    singles = [(o, o, False) for o in range(10)]
    threes = [(0, 2, False), (3, 5, False), (6, 8, False), (9, 9, False)]
    assert SharePartition(0).acquire("a", singles, 100, 0, LOCK, batch_size=4)[1] == [
        (0, 3, 1), (4, 7, 1), (8, 9, 1)]
    assert SharePartition(0).acquire("a", threes, 100, 0, LOCK, batch_size=4)[1] == [(0, 5, 1), (6, 9, 1)]
    assert SharePartition(0).acquire("a", [(0, 9, False)], 100, 0, LOCK, batch_size=2)[1] == [(0, 9, 1)]
    assert SharePartition(0).acquire("a", singles, 3, 0, LOCK, batch_size=2)[1] == [(0, 1, 1), (2, 2, 1)]
    assert SharePartition(0).acquire("a", singles, 100, 0, LOCK)[1] == [(0, 9, 1)]   # (no BatchSize)


def test_only_the_holder_acknowledges_and_an_invalid_batch_changes_nothing():
    sp = SharePartition(0)
    sp.acquire("a", [(0, 2, False)], 100, 0, LOCK)
    assert sp.acknowledge("b", [(0, 0, [ACCEPT])]) == E.INVALID_RECORD_STATE
    assert sp.acknowledge("a", [(0, 0, [ACCEPT]), (5, 5, [ACCEPT])]) == E.INVALID_REQUEST   # past what is in flight
    assert sp.acknowledge("a", [(1, 3, [ACCEPT])]) == E.INVALID_REQUEST
    assert sp.acknowledge("a", [(0, 1, [ACCEPT]), (1, 2, [ACCEPT])]) == E.INVALID_REQUEST   # overlapping
    assert sp.acknowledge("a", [(2, 2, [ACCEPT]), (0, 0, [ACCEPT])]) == E.INVALID_REQUEST   # out of order
    assert sp.acknowledge("a", [(0, 1, [ACCEPT, 9])]) == E.INVALID_REQUEST
    assert sp.acknowledge("a", [(0, 2, [ACCEPT, ACCEPT])]) == E.INVALID_REQUEST   # types neither 1 nor per record
    assert [r.state for r in sp.records.values()] == [ACQUIRED] * 3
    assert sp.acknowledge("a", [(0, 2, [ACCEPT, RELEASE, ACCEPT])]) == E.NONE
    assert sp.records[1].state == AVAILABLE and sp.start == 1


def test_an_expired_lock_releases_only_what_is_still_held_and_not_renewed():
    sp = SharePartition(0)
    lock, _ = sp.acquire("a", [(0, 3, False)], 100, 0, LOCK)
    sp.acknowledge("a", [(0, 0, [ACCEPT]), (1, 1, [RENEW])], now_ms=500, lock_ms=LOCK)
    assert sp.expire(lock, now_ms=LOCK) == 2                                  # 2 and 3; 1 was renewed to 1500
    assert sp.next_deadline(lock) == 1500
    assert sp.expire(lock, now_ms=1500) == 1
    assert [(o, r.state, r.delivery_count) for o, r in sorted(sp.records.items())] == [
        (1, AVAILABLE, 1), (2, AVAILABLE, 1), (3, AVAILABLE, 1)]


def test_a_record_released_at_the_delivery_limit_is_archived():
    sp = SharePartition(0, delivery_limit=3)
    for delivery in range(1, 4):
        lock, ranges = sp.acquire("a", [(0, 0, False)], 100, 0, LOCK)
        assert ranges == [(0, 0, delivery)]
        sp.expire(lock, now_ms=LOCK)
    assert sp.start == 1 and sp.acquire("a", [(0, 0, False)], 100, 0, LOCK)[1] == []


def test_max_records_stops_at_a_batch_boundary_or_exactly_in_record_limit_mode():
    batches = [(0, 4, False), (5, 9, False)]
    assert SharePartition(0).acquire("a", batches, 3, 0, LOCK)[1] == [(0, 4, 1)]
    assert SharePartition(0).acquire("a", batches, 3, 0, LOCK, RECORD_LIMIT)[1] == [(0, 2, 1)]


def test_markers_gaps_and_the_in_flight_limit():
    sp = SharePartition(0, max_in_flight=6)
    _, ranges = sp.acquire("a", [(0, 1, False), (2, 2, True), (5, 9, False)], 100, 0, LOCK)
    assert ranges == [(0, 1, 1), (5, 5, 1)]                                   # 2 a marker, 3-4 compacted away
    assert sp.records[2].state == sp.records[3].state == ARCHIVED
    assert sp.acknowledge("a", [(0, 1, [ACCEPT]), (5, 5, [GAP])]) == E.NONE
    assert sp.start == 6


def test_a_snapshot_restores_every_state_and_hands_acquired_records_out_again():
    sp = SharePartition(10)
    sp.acquire("a", [(10, 14, False)], 100, 0, LOCK)
    sp.acknowledge("a", [(11, 11, [ACCEPT]), (12, 12, [RELEASE]), (13, 13, [REJECT])])
    snapshot = sp.snapshot()
    assert snapshot == [(10, 10, AVAILABLE, 1), (11, 11, ACKNOWLEDGED, 1), (12, 12, AVAILABLE, 1),
                        (13, 13, ARCHIVED, 1), (14, 14, AVAILABLE, 1)]
    again = SharePartition.restore(sp.start, snapshot)
    _, ranges = again.acquire("b", [(10, 14, False)], 100, 0, LOCK)
    assert ranges == [(10, 10, 2), (12, 12, 2), (14, 14, 2)]
    assert again.next_fetch_offset() == 15


def test_share_session_epochs():
    sessions = ShareSessions()
    assert sessions.begin("g", "m", 1)[0] == E.SHARE_SESSION_NOT_FOUND
    assert sessions.begin("g", "m", 0, acknowledge_only=True)[0] == E.INVALID_SHARE_SESSION_EPOCH
    error, session = sessions.begin("g", "m", 0)
    assert error == E.NONE and session.epoch == 1
    assert sessions.begin("g", "m", 2)[0] == E.INVALID_SHARE_SESSION_EPOCH
    assert sessions.begin("g", "m", 1)[0] == E.NONE and session.epoch == 2
    assert sessions.begin("g", "m", -1) == (E.NONE, session)
    sessions.close(session)
    assert sessions.begin("g", "m", -1)[0] == E.SHARE_SESSION_NOT_FOUND


def test_a_new_session_past_the_limit_is_refused_and_a_member_reopening_replaces_its_own():
    sessions = ShareSessions(limit=2)
    assert sessions.begin("g", "a", 0)[0] == E.NONE and sessions.begin("g", "b", 0)[0] == E.NONE
    assert sessions.begin("g", "c", 0) == (E.SHARE_SESSION_LIMIT_REACHED, None)
    error, session = sessions.begin("g", "a", 0)   # (its own old session makes room)
    assert error == E.NONE and sessions.sessions[("g", "a")] is session
    sessions.close(session)
    assert sessions.begin("g", "c", 0)[0] == E.NONE


def test_markers_and_only_the_aborted_transactions_batches_are_hidden(tmp_path):
    """A producer's aborted transaction is hidden from its first offset to its marker; the same producer's
    next, committed transaction is not."""
    from kbroker.broker.shares.manager import log_batches
    from kbroker.protocol.records import build_batch
    from kbroker.protocol.types import FileRegion
    from kbroker.storage.transaction_index import AbortedTxn

    marker = lambda base: build_batch([(b"\0\0\0\0", b"\0\0\0\0\0\0", [])], base_offset=base, producer_id=7,   # noqa
                                      producer_epoch=0, transactional=True, control=True)
    data = b"".join([
        build_batch([(None, b"a", []), (None, b"b", [])], base_offset=0, producer_id=7, producer_epoch=0,
                    transactional=True),
        marker(2),
        build_batch([(None, b"c", []), (None, b"d", [])], base_offset=3, producer_id=7, producer_epoch=0,
                    transactional=True),
        marker(5)])
    path = tmp_path / "segment"
    path.write_bytes(data + b"\0\0")   # and a torn tail
    with open(path, "rb") as f:
        batches = list(log_batches(FileRegion(f, 0, len(data) + 2), [AbortedTxn(7, 0, 2, 0)]))
    assert batches[-1][4] == len(data)
    assert [b[:3] for b in batches] == [(0, 1, True), (2, 2, True), (3, 4, False), (5, 5, True)]
    assert all(b[3] == a[4] for a, b in zip(batches, batches[1:]))


def test_a_fetch_reads_from_the_first_available_record_within_the_in_flight_limit():
    sp = SharePartition(0, max_in_flight=3)
    assert sp.fetch_offset(10) == 0 and sp.fetch_offset(0) is None          # nothing below the watermark
    sp.acquire("a", [(0, 2, False)], 100, 0, LOCK)
    assert sp.fetch_offset(10) is None                                       # three in flight, none available
    sp.acknowledge("a", [(1, 1, [RELEASE])])
    assert sp.fetch_offset(10) == 1 and sp.fetch_offset(1) is None
    sp.acknowledge("a", [(0, 0, [ACCEPT])])
    assert sp.start == 1 and sp.fetch_offset(10) == 1


def _first_available(sp: SharePartition) -> int:
    """The next offset to fetch, searched from the start offset every time (what the kept bound saves)."""
    return next((o for o in range(sp.start, sp.end) if o not in sp.records or sp.records[o].state == AVAILABLE),
                sp.end)


def test_the_next_offset_to_fetch_and_a_locks_records_are_found_as_by_a_walk_of_every_record():
    """The search for an available record starts where the last one ended (a member waiting at the in-flight
    limit is asked again at every write), and a lock's timer looks only at the ranges its acquisition took:
    through acquisitions, acknowledgements of every type (renewals too), expired locks, members leaving, the
    log's start moving and the delivery limit, both find what a walk of every record in flight finds."""
    import random

    for seed in range(200):
        rng = random.Random(seed)
        sp, now, log_end, locks = SharePartition(0, delivery_limit=3, max_in_flight=12), 0, 0, []
        for _ in range(60):
            step = rng.randrange(7)
            if step == 0:
                log_end += rng.randint(1, 6)
            elif step == 1 and (offset := sp.fetch_offset(log_end)) is not None:
                batches, base = [], offset
                while base < log_end:
                    last = min(log_end - 1, base + rng.randint(0, 3))
                    batches.append((base, last, rng.random() < 0.1))
                    base = last + 1
                member = rng.choice("ab")
                lock, _ = sp.acquire(member, batches, rng.randint(1, 10), now, 100,
                                     rng.choice([0, RECORD_LIMIT]))
                locks.append(lock)
            elif step == 2:
                held = sorted(o for o, r in sp.records.items() if r.state == ACQUIRED)
                if held:
                    first = rng.choice(held)
                    last = min(first + rng.randint(0, 3), sp.end - 1)
                    member = sp.records[first].member
                    sp.acknowledge(member, [(first, last, [rng.choice([ACCEPT, RELEASE, REJECT, RENEW])])], now, 100)
            elif step == 3 and locks:
                now += rng.randint(0, 150)
                lock = rng.choice(locks)
                under = [r for r in sp.records.values() if r.state == ACQUIRED and r.lock == lock]
                assert sp.expire(lock, now) == sum(1 for r in under if r.deadline_ms <= now), seed
                kept = [r.deadline_ms for r in under if r.deadline_ms > now]
                assert sp.next_deadline(lock) == (max(kept) if kept else None), seed
            elif step == 4:
                sp.release_member(rng.choice("ab"))
            elif step == 5 and rng.random() < 0.3:
                sp.move_start(min(log_end, sp.start + rng.randint(0, 4)))
            assert sp.next_fetch_offset() == _first_available(sp), seed
            assert sp.can_acquire() == (sp.end - sp.start < sp.max_in_flight or _first_available(sp) < sp.end)
        for lock in locks:   # every lock's timer runs out: nothing is left acquired, and no lock is remembered
            sp.expire(lock, now + 1000)
            assert sp.next_deadline(lock) is None
        assert not any(r.state == ACQUIRED for r in sp.records.values()) and not sp._held, seed
