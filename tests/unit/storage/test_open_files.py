"""The cache of open log files: descriptors opened on demand, the least recently used closed past capacity,
files that are unlinked or moved kept open until closed, and running out of descriptors met by giving the
cache's own back first."""

import errno
import os

import pytest

from kbroker.protocol.records import build_batch, iter_records, validate_produce_records
from kbroker.storage.log import Log
from kbroker.storage.log_config import LogConfig
from kbroker.storage.open_files import OPEN_FILES, CachedFile, OpenFiles, TooManyOpenFiles, with_room


class File(CachedFile):
    def __init__(self, path: str, cache: OpenFiles, fail: int = 0) -> None:
        self.path, self.cache, self.fail = path, cache, fail

    @property
    def fd(self) -> int:   # (this test's own cache, not the broker's)
        if self._fd >= 0:
            self._used = True
            return self._fd
        return self.cache.fd(self)

    def open_file(self) -> int:
        if self.fail:
            self.fail -= 1
            raise OSError(errno.EMFILE, "Too many open files")
        return os.open(self.path, os.O_RDWR | os.O_CREAT)


def test_past_capacity_the_file_unused_longest_is_closed_and_reopens_on_use(tmp_path):
    cache = OpenFiles(capacity=3)
    files = [File(str(tmp_path / f"f{i}"), cache) for i in range(5)]
    for f in files[:3]:
        os.write(f.fd, f.path.encode())
    files[0].fd                                   # used again: it gets a second chance
    files[3].fd
    assert len(cache) == 3 and files[0]._fd >= 0 and files[1]._fd < 0
    assert os.pread(files[1].fd, 100, 0) == files[1].path.encode()   # reopened on demand, same bytes
    assert len(cache) == 3


def test_running_out_gives_the_cache_back_first_then_says_so(tmp_path):
    cache = OpenFiles(capacity=10)
    held = [File(str(tmp_path / f"h{i}"), cache) for i in range(4)]
    for f in held:
        f.fd
    assert File(str(tmp_path / "x"), cache, fail=1).fd >= 0   # EMFILE once: room made, opened
    assert sum(f._fd >= 0 for f in held) == 0
    with pytest.raises(TooManyOpenFiles):
        File(str(tmp_path / "y"), cache, fail=2).fd
    assert cache.exhausted == 1


def test_with_room_retries_once_after_releasing(tmp_path):
    calls = []

    def opener():
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.EMFILE, "Too many open files")
        return "opened"

    log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig())   # something of the broker's cache to release
    assert with_room(opener) == "opened" and len(calls) == 2
    log.close()


def test_a_log_larger_than_the_cache_reads_every_segment(tmp_path):
    capacity = OPEN_FILES.capacity
    OPEN_FILES.capacity = 4
    try:
        log = Log(str(tmp_path / "t-0"), "t", 0, LogConfig(segment_bytes=300))
        for i in range(40):
            batch = build_batch([(b"k", b"%03d" % i + b"x" * 100, [])])
            log.append_as_leader(batch, validate_produce_records(batch, 1 << 20), 0)
        assert len(log.segments) > 10 and OPEN_FILES.cached <= 4
        values = [bytes(r.value[:3]) for _, data in log.iter_batches(0, log.log_end_offset)
                  for r in iter_records(data)]
        assert values == [b"%03d" % i for i in range(40)]
        old = log.segments.pop(0)
        old.unlink_files()                 # as retention does: the descriptor stays valid until closed
        assert os.pread(old.fd, 10, 0)
        old.close()
        log.close()
    finally:
        OPEN_FILES.capacity = capacity
