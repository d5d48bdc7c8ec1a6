"""The log cleaner on real segment files: latest value per key, tombstones, merging, crash safety."""

import asyncio
import os
import shutil

import pytest

from kbroker.protocol.records import build_batch, iter_records, validate_produce_records
from kbroker.storage import cleaner
from kbroker.storage.log import Log
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager

NOW = 10_000_000_000


class Clock:
    def __init__(self) -> None:
        self.ms = NOW

    def __call__(self) -> float:
        return self.ms / 1000


def config(**kw) -> LogConfig:
    return LogConfig(cleanup_policy="compact", segment_bytes=kw.pop("segment_bytes", 1 << 20),
                     min_cleanable_dirty_ratio=kw.pop("ratio", 0.01), delete_retention_ms=kw.pop("delete_ms", 1000),
                     **kw)


def put(log, pairs, ts=None, compression=0, **kw):
    data = build_batch([(k, v, [("h", b"x")]) for k, v in pairs], timestamp_ms=ts or log.clock.ms,
                       compression=compression, **kw)
    header = validate_produce_records(memoryview(data), 1 << 20)
    info = log.append_as_leader(memoryview(data), header, leader_epoch=0)
    log.high_watermark = log.log_end_offset
    return info


def contents(log):
    return [(r.offset, r.key, r.value, r.headers) for h, data in log.iter_batches(0) if not h.is_control
            for r in iter_records(data)]


def latest(log):
    out = {}
    for offset, key, value, _ in contents(log):
        out[key] = (offset, value)
    return out


@pytest.fixture
def log(tmp_path):
    lg = Log(str(tmp_path / "c-0"), "c", 0, config(), clock=Clock())
    yield lg
    lg.close()


def fill(log, rounds=5, keys=10, compression=0):
    for r in range(rounds):
        put(log, [(f"k{k}".encode(), f"v{r}-{k}".encode()) for k in range(keys)], compression=compression)
        log.roll()


@pytest.mark.parametrize("compression", [0, 1, 4])
def test_keeps_the_latest_value_of_each_key_at_its_offset(log, compression):
    fill(log, compression=compression)
    put(log, [(b"k0", b"active")])          # the active segment is never cleaned
    before = latest(log)
    result = cleaner.clean(log, 0, log.clock.ms)
    assert result.records_removed == 40
    after = contents(log)
    assert [o for o, *_ in after] == sorted({o for o, _ in before.values()} | {40})
    assert latest(log) == before
    assert all(h == [("h", b"x")] for *_, h in after)
    assert log.log_end_offset == 51 and log.read(0, 1 << 20, 51, True) is not None


def test_segments_merge_while_they_fit(tmp_path):
    lg = Log(str(tmp_path / "m-0"), "m", 0, config(), clock=Clock())
    fill(lg, rounds=6)
    assert len(lg.segments) == 7
    cleaner.clean(lg, 0, lg.clock.ms)
    assert len(lg.segments) == 2 and lg.segments[0].base_offset == 0
    assert sorted(n for n in os.listdir(lg.directory) if not n.endswith(".snapshot") and n != "leader-epoch-checkpoint") == ["00000000000000000000.index", "00000000000000000000.log",
                                                "00000000000000000000.timeindex", "00000000000000000060.index",
                                                "00000000000000000060.log", "00000000000000000060.timeindex"]
    lg.close()


def test_nothing_above_the_high_watermark_is_cleaned(log):
    fill(log, rounds=3)
    log.high_watermark = 10           # only the first segment is below it
    assert cleaner.first_uncleanable_offset(log, log.clock.ms) == 10
    cleaner.clean(log, 0, log.clock.ms)
    assert len(contents(log)) == 30


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path):
    lg = Log(str(tmp_path / "l-0"), "l", 0, config(min_compaction_lag_ms=60_000), clock=Clock())
    put(lg, [(b"a", b"old")], ts=NOW - 120_000)
    lg.roll()
    put(lg, [(b"a", b"young")], ts=NOW - 1_000)
    lg.roll()
    put(lg, [(b"a", b"newest")])
    assert cleaner.first_uncleanable_offset(lg, NOW) == 1
    cleaner.clean(lg, 0, NOW)
    assert [v for _, _, v, _ in contents(lg)] == [b"old", b"young", b"newest"]
    lg.close()


def test_tombstones_survive_one_clean_then_go_after_delete_retention(log):
    put(log, [(b"a", b"1"), (b"b", b"1")])
    log.roll()
    put(log, [(b"a", None)])
    log.roll()
    first = cleaner.clean(log, 0, log.clock.ms)
    assert [(k, v) for _, k, v, _ in contents(log)] == [(b"b", b"1"), (b"a", None)]
    log.clock.ms += 500
    cleaner.clean(log, first.first_uncleanable, log.clock.ms)   # younger than delete.retention.ms: stays
    assert (b"a", None) in [(k, v) for _, k, v, _ in contents(log)]
    log.clock.ms += 1000
    put(log, [(b"c", b"1")])
    log.roll()
    cleaner.clean(log, first.first_uncleanable, log.clock.ms)
    assert [(k, v) for _, k, v, _ in contents(log)] == [(b"b", b"1"), (b"c", b"1")]


def test_emptied_batch_of_a_producers_latest_write_is_kept_as_a_header(log):
    put(log, [(b"a", b"1")], producer_id=7, producer_epoch=0, base_sequence=0)
    put(log, [(b"a", b"2")], producer_id=8, producer_epoch=0, base_sequence=0)
    put(log, [(b"b", b"x")], producer_id=7, producer_epoch=0, base_sequence=1)
    log.roll()
    put(log, [(b"a", b"3"), (b"b", b"y")])
    log.roll()
    cleaner.clean(log, 0, log.clock.ms)
    batches = [(h.base_offset, h.producer_id, h.records_count) for h, _ in log.iter_batches(0)]
    # pid 7's first batch goes (not its latest); pid 8's only batch stays empty; pid 7's latest stays empty.
    assert batches == [(1, 8, 0), (2, 7, 0), (3, -1, 2)]


def test_dirty_ratio_decides(tmp_path):
    lg = Log(str(tmp_path / "r-0"), "r", 0, config(ratio=0.5), clock=Clock())
    fill(lg, rounds=4)
    assert cleaner.needs_cleaning(lg, 0, NOW)
    result = cleaner.clean(lg, 0, NOW)
    assert not cleaner.needs_cleaning(lg, result.first_uncleanable, NOW)
    put(lg, [(b"k1", b"new")])
    lg.roll()
    # 1 dirty record against 10 clean ones: below the ratio.
    assert not cleaner.needs_cleaning(lg, result.first_uncleanable, NOW)
    lg.close()


def test_a_crash_before_the_swap_keeps_the_old_segments(tmp_path):
    lg = Log(str(tmp_path / "s-0"), "s", 0, config(), clock=Clock())
    fill(lg, rounds=3)
    original = contents(lg)
    lg.close()
    stray = os.path.join(lg.directory, "00000000000000000000.log.cleaned")
    with open(stray, "wb") as f:
        f.write(b"half written")
    reopened = Log(lg.directory, "s", 0, config(), clock=Clock())
    assert contents(reopened) == original and not os.path.exists(stray)
    reopened.close()


def test_a_crash_after_the_swap_file_is_written_completes_the_swap(tmp_path):
    lg = Log(str(tmp_path / "w-0"), "w", 0, config(), clock=Clock())
    fill(lg, rounds=3)
    copy = str(tmp_path / "copy")
    shutil.copytree(lg.directory, copy)
    cleaner.clean(lg, 0, lg.clock.ms)
    cleaned = contents(lg)
    lg.close()
    # Rebuild the moment between "renamed to .swap" and "old segments removed" from the copy.
    swap = os.path.join(copy, "00000000000000000000.log.swap")
    shutil.copyfile(os.path.join(lg.directory, "00000000000000000000.log"), swap)
    reopened = Log(copy, "w", 0, config(), clock=Clock())
    assert contents(reopened) == cleaned
    assert not [n for n in os.listdir(copy) if n.endswith(".swap")]
    reopened.close()


def test_log_manager_checkpoints_the_first_dirty_offset(tmp_path):
    clock = Clock()
    manager = LogManager([str(tmp_path)], clock=clock)
    lg = manager.get_or_create("compacted", 0, config())
    manager.get_or_create("plain", 0, LogConfig())
    fill(lg, rounds=3)
    assert manager.clean() == 1
    assert manager.clean() == 0   # nothing dirty since
    with open(tmp_path / "cleaner-offset-checkpoint") as f:
        assert f.read().split("\n")[2:3] == ["compacted 0 30"]
    manager.shutdown()


def txn(log, pid, seq, pairs, commit=None, epoch=0):
    from kbroker.protocol.records import build_marker_batch

    if pairs:
        put(log, pairs, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)
    if commit is not None:
        data = build_marker_batch(pid, epoch, commit, 0, log.clock.ms)
        header = validate_produce_records(memoryview(data), 1 << 20, allow_control=True)
        log.append_as_leader(memoryview(data), header, leader_epoch=0)
        log.high_watermark = log.log_end_offset


def test_aborted_transactions_go_and_empty_markers_go_after_delete_retention(log):
    txn(log, 7, 0, [(b"a", b"committed")], commit=True)          # 0-1
    txn(log, 8, 0, [(b"b", b"aborted")], commit=False)           # 2-3
    txn(log, 7, 1, [(b"a", b"superseded-later")], commit=True)   # 4-5
    log.roll()
    put(log, [(b"a", b"plain")])                                  # 6: supersedes both values of a
    log.roll()
    first = cleaner.clean(log, 0, log.clock.ms)
    kinds = [(h.base_offset, h.is_control, h.records_count) for h, _ in log.iter_batches(0)]
    # The aborted batch is gone; markers stay until they have been through a clean and aged.
    assert (2, False, 1) not in kinds and all(o in [k[0] for k in kinds] for o in (1, 3, 5))
    assert latest(log)[b"a"] == (6, b"plain") and b"b" not in latest(log)
    log.clock.ms += 2000
    put(log, [(b"c", b"x")])
    log.roll()
    cleaner.clean(log, first.first_uncleanable, log.clock.ms)
    assert not [h for h, _ in log.iter_batches(0) if h.is_control]   # nothing of their transactions is left
    assert latest(log) == {b"a": (6, b"plain"), b"c": (7, b"x")}


# ---------------------------------------------------------------- in slices on the event loop

async def test_a_pass_in_slices_lets_the_event_loop_run_and_cleans_as_in_one_go(tmp_path):
    """The broker's pass yields to the loop between slices; the outcome is the one-go pass's, and the
    cleaned segment is indexed from what the cleaner wrote (a lookup lands where a rebuilt index would)."""
    clock = Clock()
    manager = LogManager([str(tmp_path)], clock=clock)
    lg = manager.get_or_create("compacted", 0, config())
    fill(lg, rounds=40, keys=300)
    before = latest(lg)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    other = asyncio.ensure_future(ticker())
    assert await manager.clean_in_slices(slice_s=0.0005) == 1
    other.cancel()
    assert ticks > 10   # the loop ran other work while the pass went on
    assert latest(lg) == before and len(contents(lg)) == 300
    cleaned = lg.segments[0]
    indexed = list(zip(cleaned.offset_index.keys, cleaned.offset_index.values))
    cleaned.recover()
    assert list(zip(cleaned.offset_index.keys, cleaned.offset_index.values)) == indexed
    assert not [n for n in os.listdir(lg.directory) if n.endswith((".cleaned", ".swap"))]
    manager.shutdown()


async def test_a_pass_whose_log_changed_while_paused_gives_up_and_the_next_one_cleans(tmp_path):
    """Retention, truncation or a move may change the segments between two slices: the pass drops its work
    (no swap, no .cleaned file, the log as it was) and leaves the log to the next pass."""
    clock = Clock()
    manager = LogManager([str(tmp_path)], clock=clock)
    lg = manager.get_or_create("compacted", 0, config())
    fill(lg, rounds=40, keys=300)
    before = contents(lg)
    changed = False

    async def meddle():
        nonlocal changed
        await asyncio.sleep(0)
        lg.segments_changed += 1   # as a segment deleted by retention would
        changed = True

    meddler = asyncio.ensure_future(meddle())
    assert await manager.clean_in_slices(slice_s=0) == 0
    await meddler
    assert changed and contents(lg) == before
    assert not [n for n in os.listdir(lg.directory) if n.endswith((".cleaned", ".swap"))]
    assert await manager.clean_in_slices(slice_s=0) == 1
    assert len(contents(lg)) == 300
    manager.shutdown()


async def test_a_pass_cancelled_midway_leaves_the_log_as_it_was(tmp_path):
    clock = Clock()
    manager = LogManager([str(tmp_path)], clock=clock)
    lg = manager.get_or_create("compacted", 0, config())
    fill(lg, rounds=40, keys=300)
    before = contents(lg)
    task = asyncio.ensure_future(manager.clean_in_slices(slice_s=0))
    for _ in range(20):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert contents(lg) == before
    assert not [n for n in os.listdir(lg.directory) if n.endswith((".cleaned", ".swap"))]
    manager.shutdown()
