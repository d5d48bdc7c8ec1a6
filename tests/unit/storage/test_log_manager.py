"""LogManager with several log dirs: a replica's future log replacing it, what a crash during the swap
leaves, and a failed dir going offline while the others keep their logs."""

import os

import pytest

from kbroker.storage.log_config import LogConfig
from kbroker.storage.checkpoint import read_checkpoint
from kbroker.storage.log_manager import RECOVERY_POINT, REPLICATION, KafkaStorageError, LogManager
from tests.unit.storage.test_replica_log import lead, offsets, raw

CONFIG = LogConfig(file_delete_delay_ms=0)


def _manager(tmp_path):
    return LogManager([str(tmp_path / "a"), str(tmp_path / "b")])


def _copy(current, future):
    future.append_as_follower(raw(current, future.log_end_offset))


def test_future_log_replaces_the_current_one_with_its_state(tmp_path):
    lm = _manager(tmp_path)
    current = lm.get_or_create("t", 0, CONFIG)
    assert current.parent_dir == lm.log_dirs[0]
    lead(current, [b"a", b"b"], 3, producer_id=7, producer_epoch=0, base_sequence=0)
    current.leader_epoch_cache.assign(4, current.log_end_offset)   # a leader epoch with no batch yet
    current.high_watermark = 2
    future = lm.create_future(("t", 0), lm.log_dirs[1])
    _copy(current, future)
    moved = lm.promote_future(("t", 0), future)
    assert lm.get("t", 0) is moved and moved.parent_dir == lm.log_dirs[1]
    assert offsets(moved) == [0, 1] and moved.high_watermark == 2
    assert moved.leader_epoch_cache.entries == [(3, 0), (4, 2)]
    assert moved.producer_state.producers[7].last_seq == 1
    old = [n for n in os.listdir(lm.log_dirs[0]) if n.startswith("t-0")]
    assert len(old) == 1 and old[0].endswith("-delete")   # deleted when due, not while fetches may read it
    lm.flush_by_time()
    assert not [n for n in os.listdir(lm.log_dirs[0]) if n.startswith("t-0")]


def test_a_crash_between_the_renames_promotes_the_future_log_at_start(tmp_path):
    lm = _manager(tmp_path)
    current = lm.get_or_create("t", 0, CONFIG)
    lead(current, [b"a", b"b", b"c"], 0)
    future = lm.create_future(("t", 0), lm.log_dirs[1])
    _copy(current, future)
    future.close()
    current.close()
    os.rename(current.directory, current.directory + ".0123456789abcdef0123456789abcdef-delete")  # then the crash
    stale = os.path.join(lm.log_dirs[1], "u-0.00000000000000000000000000000000-future")
    os.makedirs(stale)   # and a move of another partition that had only begun
    restarted = _manager(tmp_path)
    restarted.load_all(lambda topic: CONFIG)
    (name,) = [n for n in os.listdir(lm.log_dirs[1]) if n.startswith("t-")] + \
        [n for n in os.listdir(lm.log_dirs[1]) if n.startswith("u-")]   # (the stale copy of u-0 is gone)
    assert name == "t-0" and offsets(restarted.get("t", 0)) == [0, 1, 2]
    assert not [n for n in os.listdir(lm.log_dirs[0]) if n.startswith("t-0")]


def test_a_move_cut_short_is_found_at_start_with_its_copy(tmp_path):
    """A future log beside its partition's current log (a stop during the copy) is opened at start-up with
    what it had copied, for the move to go on; a future whose partition has no log here any more is removed."""
    lm = _manager(tmp_path)
    current = lm.get_or_create("t", 0, CONFIG)
    lead(current, [b"a", b"b", b"c"], 0)
    lead(current, [b"d"], 0)
    future = lm.create_future(("t", 0), lm.log_dirs[1])
    first = current.read(0, 1, current.log_end_offset, True)   # the first batch only, then the stop
    future.append_as_follower(os.pread(first.segment.fd, first.length, first.position))
    future.close()
    current.close()
    orphan = os.path.join(lm.log_dirs[1], "u-0.00000000000000000000000000000000-future")
    os.makedirs(orphan)
    restarted = _manager(tmp_path)
    restarted.load_all(lambda topic: CONFIG)
    assert offsets(restarted.get("t", 0)) == [0, 1, 2, 3]
    found = restarted.take_future(("t", 0))
    assert found.parent_dir == lm.log_dirs[1] and offsets(found) == [0, 1, 2]
    assert restarted.take_future(("t", 0)) is None   # handed over once
    assert not os.path.exists(orphan)


def test_a_failed_dir_takes_its_logs_offline_and_nothing_else(tmp_path):
    lm = _manager(tmp_path)
    failed = []
    lm.on_dir_failure = lambda log_dir, lost: failed.append((log_dir, lost))
    a0 = lm.get_or_create("t", 0, CONFIG)
    b1 = lm.get_or_create("t", 1, CONFIG)
    assert (a0.parent_dir, b1.parent_dir) == tuple(lm.log_dirs)
    os.rename(lm.log_dirs[1], str(tmp_path / "gone"))
    open(lm.log_dirs[1], "w").close()   # the dir is a file now: the next checkpoint there fails
    lm.checkpoint()
    assert failed == [(lm.log_dirs[1], [("t", 1)])] and lm.offline_dirs == {lm.log_dirs[1]}
    assert lm.get("t", 1) is None and lm.dir_of_offline(("t", 1)) == lm.log_dirs[1]
    with pytest.raises(KafkaStorageError):
        lm.get_or_create("t", 1, CONFIG)
    with pytest.raises(KafkaStorageError):   # it may have been in the failed dir: no empty log in its place
        lm.get_or_create("t", 2, CONFIG, is_new=False)
    assert lm.get_or_create("t", 3, CONFIG).parent_dir == lm.log_dirs[0]
    lead(a0, [b"still"], 0)
    lm.checkpoint()
    lm.shutdown()
    assert failed == [(lm.log_dirs[1], [("t", 1)])]


def test_the_passes_lists_follow_logs_coming_going_and_changing_config(tmp_path):
    """The compacted logs and those flushed by time, which the periodic passes walk instead of every log: a
    log made, a config assigned, a log deleted, a dir failed, a log moved to another dir, each shows at once."""
    from dataclasses import replace

    manager = _manager(tmp_path)
    compacted = lambda: sorted(tp for tp, _ in manager.logs.where("compacted", lambda lg: lg.config.compact))  # noqa
    timed = lambda: sorted(tp for tp, _ in manager.logs.where("timed", lambda lg: lg.config.flush_ms < 1000))  # noqa
    for p in range(4):
        manager.preferred_dirs[("t", p)] = manager.log_dirs[p % 2]
        manager.get_or_create("t", p, replace(CONFIG, cleanup_policy="compact" if p == 0 else "delete"))
    assert compacted() == [("t", 0)] and timed() == []
    manager.get("t", 1).config = replace(CONFIG, cleanup_policy="compact", flush_ms=10)
    assert compacted() == [("t", 0), ("t", 1)] and timed() == [("t", 1)]
    lead(manager.get("t", 1), [b"x"], 0)
    assert manager.get("t", 1).unflushed_messages
    manager.get("t", 1).last_flush_ms = 0   # (its flush.ms long past)
    manager.flush_by_time()
    assert not manager.get("t", 1).unflushed_messages   # (found by the pass through the list)
    manager.delete("t", 0)
    assert compacted() == [("t", 1)]
    manager.get_or_create("t", 5, replace(CONFIG, cleanup_policy="compact"))
    assert compacted() == [("t", 1), ("t", 5)]
    manager.fail_dir(manager.get("t", 1).parent_dir)
    assert compacted() == [("t", 5)] and timed() == []
    future = manager.create_future(("t", 5), [d for d in manager.online_dirs if d != manager.get("t", 5).parent_dir][0]
                                   if len(manager.online_dirs) > 1 else manager.online_dirs[0])
    moved = manager.promote_future(("t", 5), future)
    assert manager.logs.where("compacted", lambda lg: lg.config.compact) == [(("t", 5), moved)]


def test_checkpoints_are_written_at_every_interval_and_follow_offsets_and_moves(tmp_path):
    """Each checkpoint writes every file again (that write is what finds a failed dir under idle partitions),
    its text made anew only when a partition or an offset changed; a log moved to another dir is listed there."""
    lm = _manager(tmp_path)
    a0 = lm.get_or_create("t", 0, CONFIG)
    lm.get_or_create("t", 1, CONFIG)
    lm.checkpoint()
    a_hws, b_hws = (os.path.join(d, REPLICATION) for d in lm.log_dirs)
    assert read_checkpoint(a_hws) == {("t", 0): 0} and read_checkpoint(b_hws) == {("t", 1): 0}
    written = os.stat(a_hws).st_ino
    lm.checkpoint()
    assert os.stat(a_hws).st_ino != written and read_checkpoint(a_hws) == {("t", 0): 0}

    lead(a0, [b"a", b"b"], 0)
    a0.high_watermark = 2
    lm.checkpoint()
    assert read_checkpoint(a_hws) == {("t", 0): 2}
    future = lm.create_future(("t", 0), lm.log_dirs[1])
    _copy(a0, future)
    lm.promote_future(("t", 0), future)
    lm.checkpoint()
    assert read_checkpoint(a_hws) == {} and read_checkpoint(b_hws) == {("t", 0): 2, ("t", 1): 0}
    assert read_checkpoint(os.path.join(lm.log_dirs[1], RECOVERY_POINT)).keys() == {("t", 0), ("t", 1)}

    failed = []
    lm.on_dir_failure = lambda log_dir, lost: failed.append((log_dir, lost))
    os.rename(lm.log_dirs[0], str(tmp_path / "gone"))
    open(lm.log_dirs[0], "w").close()   # nothing changed in it since the last checkpoint, which still fails
    lm.checkpoint()
    assert failed == [(lm.log_dirs[0], [])] and lm.offline_dirs == {lm.log_dirs[0]}
    lm.shutdown()
