"""The replication side of a Log: leader epochs, copying a leader's batches, truncating a divergent tail."""

import os

import pytest

from kbroker.protocol.records import InvalidBatch, build_batch, split_batches, validate_produce_records
from kbroker.storage.leader_epoch import LeaderEpochFileCache
from kbroker.storage.log import Log
from kbroker.storage.log_config import LogConfig
from tests.unit.storage.test_log import read_values


def lead(log, values, epoch, **kw):
    data = build_batch([(None, v, []) for v in values], **kw)
    return log.append_as_leader(memoryview(data), validate_produce_records(memoryview(data), 1 << 20), epoch)


def raw(log, start=0):
    """The log's bytes from ``start`` to the end, as a follower's fetches get them (one segment a read)."""
    out = b""
    while start < log.log_end_offset:
        sl = log.read(start, 1 << 30, log.log_end_offset, True)
        chunk = os.pread(sl.segment.fd, sl.length, sl.position)
        out += chunk
        start = max(h.next_offset for _, h in split_batches(chunk))
    return out


def offsets(log):
    values = read_values(log)
    while values and values[-1][0] + 1 < log.log_end_offset:
        values += read_values(log, values[-1][0] + 1)
    return [o for o, _ in values]


def test_epoch_cache_answers_end_offsets_as_kafka(tmp_path):
    cache = LeaderEpochFileCache(str(tmp_path))
    cache.assign(0, 0)
    cache.assign(2, 10)
    cache.assign(5, 30)
    assert not cache.assign(4, 40), "an older epoch never enters"
    assert cache.end_offset_for(5, 42) == (5, 42)      # the latest ends at the log end
    assert cache.end_offset_for(2, 42) == (2, 30)
    assert cache.end_offset_for(3, 42) == (2, 30)      # unknown epoch: the one below it, ending where 5 starts
    assert cache.end_offset_for(6, 42) == (-1, -1)
    assert LeaderEpochFileCache(str(tmp_path)).entries == [(0, 0), (2, 10), (5, 30)], "persisted"
    cache.truncate_from_end(30)
    assert LeaderEpochFileCache(str(tmp_path)).entries == [(0, 0), (2, 10)]


def test_follower_copies_batches_byte_for_byte_with_offsets_and_epochs(tmp_path):
    leader = Log(str(tmp_path / "l" / "t-0"), "t", 0, LogConfig(segment_bytes=300))
    for i in range(10):
        lead(leader, [b"v%d" % i] * 3, epoch=1 if i < 5 else 3)
    follower = Log(str(tmp_path / "f" / "t-0"), "t", 0, LogConfig(segment_bytes=300))
    assert follower.append_as_follower(raw(leader)) == 30
    assert follower.log_end_offset == leader.log_end_offset == 30
    assert raw(follower) == raw(leader)
    assert follower.leader_epoch_cache.entries == [(1, 0), (3, 15)] == leader.leader_epoch_cache.entries
    with pytest.raises(InvalidBatch):
        follower.append_as_follower(raw(leader, 27))   # below its log end: truncation was skipped


def test_follower_rebuilds_producer_state_so_a_retry_is_deduplicated(tmp_path):
    leader = Log(str(tmp_path / "l" / "t-0"), "t", 0, LogConfig())
    lead(leader, [b"a", b"b"], 0, producer_id=7, producer_epoch=0, base_sequence=0)
    follower = Log(str(tmp_path / "f" / "t-0"), "t", 0, LogConfig())
    follower.append_as_follower(raw(leader))
    retry = build_batch([(None, b"a", []), (None, b"b", [])], producer_id=7, producer_epoch=0, base_sequence=0)
    info = follower.append_as_leader(memoryview(retry), validate_produce_records(memoryview(retry), 1 << 20), 1)
    assert info.duplicate and (info.first_offset, info.last_offset) == (0, 1)


def test_truncation_cuts_the_tail_and_everything_derived_from_it(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig(segment_bytes=300))
    for i in range(12):
        lead(log, [b"x%d" % i, b"y"], epoch=0 if i < 6 else 2, producer_id=9, producer_epoch=0, base_sequence=2 * i)
    log.high_watermark = 24
    assert log.truncate_to(12)
    assert log.log_end_offset == 12 and log.high_watermark == 12
    assert offsets(log) == list(range(12))
    assert log.leader_epoch_cache.entries == [(0, 0)]
    assert log.producer_state.producers[9].last_seq == 11
    lead(log, [b"new"], epoch=4)
    assert read_values(log, 12) == [(12, b"new")]
    reopened = Log(str(tmp_path / "t-0"), "t", 0, LogConfig(segment_bytes=300))
    assert reopened.log_end_offset == 13 and reopened.leader_epoch_cache.entries == [(0, 0), (4, 12)]


def test_truncation_inside_a_batch_removes_the_whole_batch(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    lead(log, [b"a", b"b"], 0)
    lead(log, [b"c", b"d"], 0)
    log.truncate_to(3)
    assert log.log_end_offset == 2


def test_truncate_fully_starts_an_empty_log_at_the_leaders_start(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    lead(log, [b"a"], 0)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    assert Log(str(tmp_path / "t-0"), "t", 0, LogConfig()).log_end_offset == 500


def test_a_missing_or_damaged_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path):
    d = tmp_path / "t-0"
    log = Log(str(d), "t", 0, LogConfig())
    log.leader_epoch_cache.assign(0, 0, save=False)   # as a single broker's new partition keeps it: in memory
    lead(log, [b"a"], 0)
    lead(log, [b"b"], 0)
    checkpoint = d / "leader-epoch-checkpoint"
    assert not checkpoint.exists()
    log.close()   # a clean stop writes what it kept in memory
    assert checkpoint.read_text() == "0\n1\n0 0\n"
    log = Log(str(d), "t", 0, LogConfig())
    lead(log, [b"c"], 2)
    log.close()
    assert checkpoint.read_text() == "0\n2\n0 0\n2 2\n"
    for damaged in ("", "0\n2\n0 0\n"):   # left empty, or cut short, by a crash before it reached the disk
        checkpoint.write_text(damaged)
        reopened = Log(str(d), "t", 0, LogConfig())
        assert reopened.leader_epoch_cache.entries == [(0, 0), (2, 2)]
        assert reopened.leader_epoch_cache.end_offset_for(0, reopened.log_end_offset) == (0, 2)
        reopened.close()
        assert checkpoint.read_text() == "0\n2\n0 0\n2 2\n"
