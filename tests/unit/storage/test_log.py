"""Log: offsets, reads, idempotent dedup, crash recovery and retention on real files."""

import os

import pytest

from kbroker.protocol.records import BatchHeader, InvalidBatch, build_batch, iter_records, validate_produce_records
from kbroker.storage.log import Log, OffsetOutOfRange
from kbroker.storage.log_config import LogConfig


def append(log, values, **kw):
    data = build_batch([(None, v, []) for v in values], **kw)
    header = validate_produce_records(memoryview(data), 1 << 20)
    return log.append_as_leader(memoryview(data), header, leader_epoch=0)


def read_values(log, offset=0, max_bytes=1 << 20):
    sl = log.read(offset, max_bytes, log.log_end_offset, True)
    if sl is None:
        return []
    data = os.pread(sl.segment.fd, sl.length, sl.position)
    out, pos = [], 0
    while pos < len(data):
        h = BatchHeader.parse(data, pos)
        out += [(r.offset, r.value) for r in iter_records(data, pos)]
        pos += h.size
    return out


def test_appends_get_consecutive_offsets_and_read_back(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    assert append(log, [b"a", b"b"]).first_offset == 0
    info = append(log, [b"c"])
    assert (info.first_offset, info.last_offset) == (2, 2)
    assert log.log_end_offset == 3
    assert read_values(log) == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert read_values(log, 2) == [(2, b"c")]


def test_read_outside_the_log_is_out_of_range(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    append(log, [b"a"])
    with pytest.raises(OffsetOutOfRange):
        log.read(5, 100, log.log_end_offset, True)
    assert log.read(1, 100, log.log_end_offset, True) is None


def test_segments_roll_by_size_and_reads_cross_them(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig(segment_bytes=200))
    for i in range(10):
        append(log, [b"x" * 50 + bytes([i])])
    assert len(log.segments) == 10
    assert sorted(os.listdir(tmp_path / "t-0"))[0] == "00000000000000000000.index"
    assert [o for o, _ in read_values(log, 7)][:1] == [7]


def test_idempotent_retry_is_acknowledged_with_original_offsets(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    append(log, [b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
    dup = append(log, [b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
    assert dup.duplicate and dup.first_offset == 0 and log.log_end_offset == 2
    with pytest.raises(InvalidBatch) as gap:
        append(log, [b"c"], producer_id=7, producer_epoch=0, base_sequence=5)
    assert gap.value.error == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    append(log, [b"c"], producer_id=7, producer_epoch=1, base_sequence=0)
    with pytest.raises(InvalidBatch) as stale:
        append(log, [b"d"], producer_id=7, producer_epoch=0, base_sequence=3)
    assert stale.value.error == "INVALID_PRODUCER_EPOCH"


def test_producer_state_is_rebuilt_from_the_log(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    append(log, [b"a"], producer_id=9, producer_epoch=2, base_sequence=0)
    log.close()
    reopened = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    assert append(reopened, [b"a"], producer_id=9, producer_epoch=2, base_sequence=0).duplicate
    with pytest.raises(InvalidBatch):
        append(reopened, [b"b"], producer_id=9, producer_epoch=2, base_sequence=2)


def test_recovery_truncates_a_torn_tail_and_rebuilds_indexes(tmp_path):
    d = tmp_path / "t-0"
    log = Log(str(d), "t", 0, LogConfig())
    for i in range(5):
        append(log, [bytes([i]) * 10])
    size = log.active_segment.size
    log.close()
    path = d / "00000000000000000000.log"
    with open(path, "r+b") as f:
        f.truncate(size - 7)          # a torn last batch
    os.unlink(d / "00000000000000000000.index")
    recovered = Log(str(d), "t", 0, LogConfig())
    assert recovered.log_end_offset == 4
    assert [o for o, _ in read_values(recovered)] == [0, 1, 2, 3]
    assert append(recovered, [b"z"]).first_offset == 4


def test_recovery_cuts_at_a_corrupt_batch(tmp_path):
    d = tmp_path / "t-0"
    log = Log(str(d), "t", 0, LogConfig())
    for i in range(3):
        append(log, [bytes([i]) * 10])
    second = log.active_segment.find_batch(1)[0]
    log.close()
    with open(d / "00000000000000000000.log", "r+b") as f:
        f.seek(second + 70)
        f.write(b"\xff")
    assert Log(str(d), "t", 0, LogConfig()).log_end_offset == 1


def test_recovery_rewrites_a_wrong_index_and_leaves_a_right_one_untouched(tmp_path):
    d = tmp_path / "t-0"
    log = Log(str(d), "t", 0, LogConfig(index_interval_bytes=1))
    for i in range(4):
        append(log, [bytes([i]) * 10], timestamp_ms=1000 + i)
    log.close()
    index, time_index = d / "00000000000000000000.index", d / "00000000000000000000.timeindex"
    right = (index.read_bytes(), time_index.read_bytes())
    assert len(right[0]) == 4 * 8 and len(right[1]) == 4 * 12
    written = (index.stat().st_mtime_ns, time_index.stat().st_mtime_ns, index.stat().st_ctime_ns)
    Log(str(d), "t", 0, LogConfig(index_interval_bytes=1)).close()   # unclean: the active segment recovered
    assert (index.read_bytes(), time_index.read_bytes()) == right
    assert (index.stat().st_mtime_ns, time_index.stat().st_mtime_ns, index.stat().st_ctime_ns) == written
    index.write_bytes(right[0][:8] + right[0][16:])   # an entry lost, and one past the log's end
    with open(time_index, "ab") as f:
        f.write((5000).to_bytes(8, "big") + (9).to_bytes(4, "big"))
    recovered = Log(str(d), "t", 0, LogConfig(index_interval_bytes=1))
    assert (index.read_bytes(), time_index.read_bytes()) == right
    assert [o for o, _ in read_values(recovered, 2)] == [2, 3]
    assert recovered.offset_for_timestamp(1002)[0] == 2


def test_size_retention_deletes_old_segments_and_advances_log_start(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig(segment_bytes=200, retention_bytes=300, file_delete_delay_ms=0))
    for i in range(10):
        append(log, [b"x" * 60])
    log.high_watermark = log.log_end_offset
    assert log.delete_old_segments() > 0
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert log.size_in_bytes - log.segments[0].size < 300


def test_time_retention_uses_record_timestamps(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig(segment_bytes=150, retention_ms=1000))
    append(log, [b"old" * 20], timestamp_ms=1000)
    append(log, [b"new" * 20])
    log.high_watermark = log.log_end_offset
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == 1


def test_offset_for_timestamp(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    for i, ts in enumerate([1000, 2000, 3000]):
        append(log, [b"v"], timestamp_ms=ts)
    assert log.offset_for_timestamp(1500) == (1, 2000)
    assert log.offset_for_timestamp(3000) == (2, 3000)
    assert log.offset_for_timestamp(3001) is None
    assert log.max_timestamp_offset() == (2, 3000)


def test_rolled_segments_are_flushed_and_advance_the_recovery_point(tmp_path):
    from kbroker.storage import log as log_module

    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig(segment_bytes=200))
    for _ in range(3):
        append(log, [b"x" * 100])
    log_module._FLUSHER.submit(lambda: None).result()   # the flusher thread has caught up
    assert log.recovery_point == log.active_segment.base_offset == 2


def test_clean_shutdown_skips_recovery_but_unclean_recovers(tmp_path):
    d = tmp_path / "t-0"
    log = Log(str(d), "t", 0, LogConfig())
    append(log, [b"a"])
    append(log, [b"b"])
    size = log.active_segment.size
    log.close()
    with open(d / "00000000000000000000.log", "ab") as f:
        f.write(b"\x00" * 30)           # junk after the last batch, as a torn write leaves
    clean = Log(str(d), "t", 0, LogConfig(), recovery_point=2, clean_shutdown=True)
    assert clean.log_end_offset == 2 and clean.active_segment.size == size + 30
    clean.close()
    unclean = Log(str(d), "t", 0, LogConfig(), recovery_point=2)
    assert unclean.log_end_offset == 2 and unclean.active_segment.size == size


def test_fetch_slices_end_at_whole_batches(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())
    sizes = [append(log, [b"x" * 200]) and log.active_segment.size for _ in range(5)]
    batch = sizes[0]
    sl = log.read(0, int(batch * 2.5), log.log_end_offset, min_one_batch=True)
    assert (sl.position, sl.length) == (0, 2 * batch), "no partial third batch"
    sl = log.read(1, batch // 2, log.log_end_offset, min_one_batch=True)
    assert (sl.position, sl.length) == (batch, batch), "the first batch goes whole (KIP-74)"
    assert log.read(1, batch // 2, log.log_end_offset, min_one_batch=False) is None, \
        "an incomplete first batch is answered with no records (Kafka, Fetch v3+)"
    sl = log.read(0, 10 * batch, 3, min_one_batch=True)
    assert sl.length == 3 * batch, "never past the high watermark"


def test_flush_interval_messages_advances_the_recovery_point(tmp_path):
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig(flush_messages=3))
    append(log, [b"a", b"b"])
    assert log.recovery_point == 0 and log.unflushed_messages == 2
    append(log, [b"c"])
    assert log.recovery_point == 3 and log.unflushed_messages == 0


def test_segments_roll_by_age_on_the_injected_clock(tmp_path):
    now = [1000.0]
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig(segment_ms=60_000), clock=lambda: now[0])
    append(log, [b"a"], timestamp_ms=1_000_000)
    now[0] += 30
    append(log, [b"b"], timestamp_ms=1_030_000)
    assert len(log.segments) == 1
    now[0] += 61
    append(log, [b"c"], timestamp_ms=1_091_000)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_segment_jitter_rolls_each_segment_a_random_part_of_it_earlier(tmp_path):
    """segment.jitter.ms: each segment rolls at segment.ms less its own draw below the jitter (Kafka's
    randomSegmentJitter), so partitions made together spread their rolls."""
    now = [1000.0]
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig(segment_ms=60_000, segment_jitter_ms=50_000),
              clock=lambda: now[0])
    append(log, [b"a"], timestamp_ms=1_000_000)
    append(log, [b"b"], timestamp_ms=1_000_000)   # (the first roll check draws the segment's jitter)
    jitter = log.active_segment.roll_jitter_ms
    assert 0 <= jitter < 50_000
    now[0] += (60_000 - jitter) / 1000 - 0.5   # just before its roll time: still one segment
    append(log, [b"c"], timestamp_ms=int(now[0] * 1000))
    assert len(log.segments) == 1
    now[0] += 1.5
    append(log, [b"d"], timestamp_ms=int(now[0] * 1000))
    assert [s.base_offset for s in log.segments] == [0, 3]
    drawn = set()
    for i in range(20):   # draws differ from segment to segment
        other = Log(str(tmp_path / f"u-{i}"), "u", i, LogConfig(segment_ms=60_000, segment_jitter_ms=50_000))
        append(other, [b"a"])
        append(other, [b"b"])
        drawn.add(other.active_segment.roll_jitter_ms)
        other.close()
    assert len(drawn) > 1


def test_sparse_time_index_still_finds_every_timestamp_and_survives_a_restart(tmp_path):
    """Time entries come every index.interval.bytes, as Kafka's: lookups scan from the entry before."""
    directory = str(tmp_path / "t-0")
    config = LogConfig(index_interval_bytes=300, segment_bytes=4000)
    log = Log(directory, "t", 0, config)
    for i in range(200):
        append(log, [b"x" * 20], timestamp_ms=10_000 + 10 * i - (5 if i % 7 == 0 else 0))
    assert all(len(s.time_index) < 20 for s in log.segments)   # far fewer entries than batches
    for target in (10_000, 10_004, 10_455, 11_990):
        expected = next((i, 10_000 + 10 * i - (5 if i % 7 == 0 else 0)) for i in range(200)
                        if 10_000 + 10 * i - (5 if i % 7 == 0 else 0) >= target)
        assert log.offset_for_timestamp(target) == expected
    largest = [s.largest_timestamp() for s in log.segments]
    log.close()
    reopened = Log(directory, "t", 0, config, clean_shutdown=True)
    assert [s.largest_timestamp() for s in reopened.segments] == largest
    reopened.close()


def test_time_retention_takes_the_active_segment_when_all_of_it_is_past(tmp_path):
    """As Kafka: every record older than retention.ms leaves the log empty, its start at its end, with a new
    active segment there; an empty active segment, or one above the high watermark, stays."""
    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig(retention_ms=1000, file_delete_delay_ms=0))
    append(log, [b"old"] * 3, timestamp_ms=1000)
    assert log.delete_old_segments() == 0   # (not below the high watermark yet)
    log.high_watermark = log.log_end_offset
    assert log.delete_old_segments() == 1
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (3, 3, 1)
    assert log.active_segment.base_offset == 3 and log.active_segment.size == 0
    assert log.delete_old_segments() == 0
    assert append(log, [b"next"]).first_offset == 3
