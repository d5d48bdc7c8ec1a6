"""The append-only journal beside a snapshot: whole entries read back in order, a torn last line (a crash
mid-append) dropped and cut off the file so that the next entry reads whole, and a reset empties it."""

from __future__ import annotations

from kbroker.storage.journal import Journal


def test_entries_read_back_in_order_across_instances(tmp_path):
    path = str(tmp_path / "j")
    journal = Journal(path)
    assert journal.read() == [] and journal.entries == 0
    for i in range(3):
        journal.append({"n": i, "text": "é\n"})
    assert journal.entries == 3
    again = Journal(path)
    assert again.read() == [{"n": 0, "text": "é\n"}, {"n": 1, "text": "é\n"}, {"n": 2, "text": "é\n"}]
    assert again.entries == 3


def test_a_torn_last_line_is_dropped_and_cut_off_so_the_next_entry_reads_whole(tmp_path):
    path = str(tmp_path / "j")
    Journal(path).append({"n": 0})
    for torn in (b'{"n":1', b'{"n":1}'):   # cut mid-entry, or whole but before its newline: never acknowledged
        with open(path, "ab") as f:
            f.write(torn)
        journal = Journal(path)
        assert journal.read() == [{"n": 0}]
        assert open(path, "rb").read() == b'{"n":0}\n'
        journal.append({"n": 2})
        assert Journal(path).read() == [{"n": 0}, {"n": 2}]
        journal.reset()
        journal.append({"n": 0})


def test_a_reset_empties_it(tmp_path):
    path = str(tmp_path / "j")
    journal = Journal(path)
    journal.reset()   # (no file yet: nothing to do)
    journal.append({"n": 0})
    journal.reset()
    assert journal.entries == 0 and Journal(path).read() == []
    journal.append({"n": 1})
    assert Journal(path).read() == [{"n": 1}]
