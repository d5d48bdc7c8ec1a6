"""Transactions in the log: open transactions hold the LSO back; abort markers land in .txnindex."""

import os

from kbroker.protocol.records import build_batch, build_marker_batch, validate_produce_records
from kbroker.storage.log import Log
from kbroker.storage.log_config import LogConfig
from kbroker.storage.open_files import OPEN_FILES
from kbroker.storage.transaction_index import AbortedTxn


def append(log, batch: bytes):
    header = validate_produce_records(memoryview(batch), 1 << 20, allow_control=True)
    info = log.append_as_leader(memoryview(batch), header, leader_epoch=0)
    log.high_watermark = log.log_end_offset
    return info


def txn_data(log, pid, seq, values, epoch=0):
    return append(log, build_batch([(None, v, []) for v in values], producer_id=pid, producer_epoch=epoch,
                                   base_sequence=seq, transactional=True))


def marker(log, pid, commit, epoch=0):
    return append(log, build_marker_batch(pid, epoch, commit, coordinator_epoch=0, timestamp_ms=1))


def plain(log, values):
    return append(log, build_batch([(None, v, []) for v in values]))


def test_lso_stops_at_the_oldest_open_transaction(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    plain(log, [b"a"])                                   # 0
    txn_data(log, 1, 0, [b"t1", b"t1"])                  # 1-2
    plain(log, [b"b"])                                   # 3
    txn_data(log, 2, 0, [b"t2"])                         # 4
    assert log.high_watermark == 5 and log.last_stable_offset == 1
    marker(log, 1, commit=True)                          # 5
    assert log.last_stable_offset == 4
    marker(log, 2, commit=False)                         # 6
    assert log.last_stable_offset == 7
    assert log.aborted_transactions(0, 7) == [AbortedTxn(2, 4, 6, 7)]
    assert log.aborted_transactions(7, 10) == []
    log.close()


def test_aborted_index_is_rebuilt_from_the_markers_after_a_crash(tmp_path):
    directory = str(tmp_path / "t-0")
    log = Log(directory, "t", 0, LogConfig(segment_bytes=200))
    txn_data(log, 7, 0, [b"x" * 50])
    marker(log, 7, commit=False)
    txn_data(log, 7, 1, [b"y" * 50])
    txn_data(log, 8, 0, [b"open"])
    marker(log, 7, commit=False)
    expected = log.aborted_transactions(0, log.log_end_offset)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in expected] == [(7, 0, 1), (7, 2, 4)]
    assert any(n.endswith(".txnindex") for n in os.listdir(directory))
    for segment in log.segments:
        OPEN_FILES.close(segment)   # no clean shutdown: the next open recovers
    reopened = Log(directory, "t", 0, LogConfig(segment_bytes=200), high_watermark=5)
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == expected
    assert reopened.last_stable_offset == 3    # producer 8's transaction is still open
    reopened.close()


def test_a_marker_without_an_open_transaction_changes_nothing(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    plain(log, [b"a"])
    marker(log, 3, commit=False)
    assert log.aborted_transactions(0, 2) == [] and log.last_stable_offset == 2
    log.close()


def idempotent(log, pid, seq, value=b"v", epoch=0):
    return append(log, build_batch([(None, value, [])], producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def state_of(log):
    return ({pid: (e.epoch, [(b.first_seq, b.last_offset) for b in e.batches])
             for pid, e in log.producer_state.producers.items()}, dict(log.producer_state.ongoing))


def test_snapshots_at_roll_and_close_replace_the_scan(tmp_path, monkeypatch):
    directory = str(tmp_path / "t-0")
    config = LogConfig(segment_bytes=300)
    log = Log(directory, "t", 0, config)
    for seq in range(12):
        idempotent(log, 5, seq, b"x" * 60)
    txn_data(log, 9, 0, [b"open"])
    assert len(log.segments) > 3
    assert sorted(n for n in os.listdir(directory) if n.endswith(".snapshot"))   # written at each roll
    expected = state_of(log)
    log.close()
    from kbroker.storage.segment import LogSegment

    scanned = []
    original = LogSegment.iter_headers
    monkeypatch.setattr(LogSegment, "iter_headers",
                        lambda self, position=0: scanned.append(self.base_offset) or original(self, position))
    reopened = Log(directory, "t", 0, config, high_watermark=log.log_end_offset, clean_shutdown=True)
    assert state_of(reopened) == expected
    assert scanned == [reopened.segments[-1].base_offset]   # only the last segment, for the log end offset
    assert idempotent(reopened, 5, 11, b"x" * 60).duplicate          # dedup survives the restart
    assert reopened.last_stable_offset == expected[1][9]
    reopened.close()


def test_a_corrupt_snapshot_falls_back_to_the_log(tmp_path):
    directory = str(tmp_path / "t-0")
    log = Log(directory, "t", 0, LogConfig())
    for seq in range(3):
        idempotent(log, 5, seq)
    expected = state_of(log)
    log.close()
    [snapshot] = [n for n in os.listdir(directory) if n.endswith(".snapshot")]
    with open(os.path.join(directory, snapshot), "r+b") as f:
        f.seek(10)
        f.write(b"\xff\xff")
    reopened = Log(directory, "t", 0, LogConfig(), clean_shutdown=True)
    assert state_of(reopened) == expected
    assert snapshot not in os.listdir(directory)   # dropped, not trusted
    reopened.close()


def test_idle_producers_expire_but_not_with_an_open_transaction(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    append(log, build_batch([(None, b"a", [])], producer_id=1, producer_epoch=0, base_sequence=0, timestamp_ms=1000))
    append(log, build_batch([(None, b"b", [])], producer_id=2, producer_epoch=0, base_sequence=0, timestamp_ms=1000,
                            transactional=True))
    assert log.producer_state.expire(now_ms=100_000, expiration_ms=50_000) == 1
    assert set(log.producer_state.producers) == {2}
    log.close()


def test_a_verified_transaction_holds_later_sequences_back_until_its_first_write(tmp_path):
    """KIP-890's verification state: while a producer's first transactional write here is being verified, a
    batch past the lowest sequence verified is OUT_OF_ORDER_SEQUENCE_NUMBER; its write ends the verification."""
    import pytest
    from kbroker.protocol.records import InvalidBatch
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    state = log.producer_state
    state.start_verification(5, 0, 0, supports_epoch_bump=False, now_ms=1_000)
    state.start_verification(5, 3, 0, supports_epoch_bump=False, now_ms=1_000)   # (the lowest seen is kept)
    with pytest.raises(InvalidBatch) as refused:
        txn_data(log, 5, 3, [b"x"])
    assert refused.value.error == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    txn_data(log, 5, 0, [b"a"])
    assert 5 not in state.verifications
    # transactions V2: a producer unknown here starts at 0; a marker of the verified epoch keeps the verification
    state.start_verification(6, 4, 1, supports_epoch_bump=True, now_ms=1_000)
    with pytest.raises(InvalidBatch) as refused:
        txn_data(log, 6, 4, [b"y"], epoch=1)
    assert refused.value.error == "OUT_OF_ORDER_SEQUENCE_NUMBER" and "start at sequence 0" in str(refused.value)
    marker(log, 6, True, epoch=1)
    assert 6 in state.verifications
    # one that never led to a write goes with idle producers
    state.expire(now_ms=1_000 + 60_000, expiration_ms=50_000)
    assert not state.verifications
    log.close()


def test_a_producers_coordinator_epoch_fences_older_markers_and_survives_a_restart(tmp_path):
    """The marker's coordinator epoch is kept per producer; an older one is refused (nothing appended); the
    snapshot keeps it, and a snapshot in kbroker 0.1's own layout still loads, with it."""
    import struct

    import crc32c
    import pytest

    from kbroker.protocol.records import InvalidBatch
    from kbroker.storage.producer_state import _SNAP_BATCH_KBROKER_01, _SNAP_PRODUCER_KBROKER_01, decode_snapshot

    directory = str(tmp_path / "t-0")
    log = Log(directory, "t", 0, LogConfig())
    txn_data(log, 9, 0, [b"a"])
    append(log, build_marker_batch(9, 0, True, coordinator_epoch=4, timestamp_ms=1))
    txn_data(log, 9, 1, [b"b"])
    end = log.log_end_offset
    with pytest.raises(InvalidBatch) as refused:
        append(log, build_marker_batch(9, 0, False, coordinator_epoch=3, timestamp_ms=1))
    assert refused.value.error == "TRANSACTION_COORDINATOR_FENCED" and log.log_end_offset == end
    log.close()
    reopened = Log(directory, "t", 0, LogConfig(), high_watermark=end, clean_shutdown=True)
    assert reopened.producer_state.producers[9].coordinator_epoch == 4
    reopened.close()

    payload = struct.pack(">i", 1) + _SNAP_PRODUCER_KBROKER_01.pack(9, 2, 100, 7, 1, 4) + \
        _SNAP_BATCH_KBROKER_01.pack(3, 5, 7, 9, 100)
    old = struct.pack(">h", 2) + struct.pack(">I", crc32c.crc32c(payload)) + payload
    state = reopened.producer_state
    decode_snapshot(old, state)
    assert state.producers[9].epoch == 2 and state.producers[9].coordinator_epoch == 4
    assert [(b.first_seq, b.last_offset) for b in state.producers[9].batches] == [(3, 9)] and state.ongoing == {9: 7}


def test_a_snapshot_has_kafkas_layout_with_an_entry_per_batch_kept(tmp_path):
    """ProducerSnapshot v1 as Kafka writes it (kafka-dump-log reads it); each kept batch is an entry of its own,
    oldest first, so Kafka's loader (the last entry of a producer wins) gets the last batch, and kbroker all five;
    a batch whose sequences wrapped past Integer.MAX_VALUE comes back whole."""
    import struct

    import crc32c

    from kbroker.storage.producer_state import INT32_MAX, decode_snapshot, encode_snapshot

    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    for seq in range(6):
        idempotent(log, 5, seq)
    txn_data(log, 9, 0, [b"open"])
    state = log.producer_state
    data = encode_snapshot(state)
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, crc) == (1, crc32c.crc32c(data[6:])) and count == 5 + 1 and len(data) == 10 + 46 * count
    entries = [struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i) for i in range(count)]
    assert [(e[0], e[2], e[3]) for e in entries[:5]] == [(5, seq, seq) for seq in range(1, 6)]   # the last five
    assert entries[5][0] == 9 and entries[5][7] == log.producer_state.ongoing[9]
    expected = state_of(log)
    decode_snapshot(data, state)
    assert state_of(log) == expected
    log.close()

    wrapped = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 7, 0, 1, 100, 3, 50, -1, -1)
    decode_snapshot(struct.pack(">hI", 1, crc32c.crc32c(wrapped)) + wrapped, state)
    [batch] = state.producers[7].batches
    assert (batch.first_seq, batch.last_seq, batch.first_offset, batch.last_offset) == (INT32_MAX - 1, 1, 97, 100)
