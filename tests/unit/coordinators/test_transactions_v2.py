"""Transactions V2 (KIP-890 part 2) in the transaction coordinator, over real logs: EndTxn v5 ends each
transaction under the next epoch, its retries are recognised by the epoch they were sent with, an epoch that
runs out moves the producer to a new id, and a late write of the transaction before is fenced."""

from __future__ import annotations

import pytest

from kbroker.coordinators.transaction.metadata import MAX_EPOCH
from kbroker.coordinators.transaction.state import TransactionState
from kbroker.protocol.errors import ErrorCode as E
from tests.unit.coordinators.test_transaction_coordinator import Harness, settle

T = TransactionState


@pytest.fixture
def h(tmp_path):
    harness = Harness(str(tmp_path))
    yield harness
    harness.log_manager.shutdown()


def begin(h, txn="t"):
    c = h.coordinator
    _, pid, epoch = c.init_producer_id(txn, 10_000, -1, -1, 5)
    assert c.add_partitions(txn, pid, epoch, [("data", 0)], 5) == E.NONE
    assert h.produce(pid, epoch, 0) == E.NONE
    return c, pid, epoch


async def test_end_txn_v5_ends_the_transaction_under_the_next_epoch(h):
    c, pid, epoch = begin(h)
    assert c.end_transaction("t", pid, epoch, True, 5) == E.NONE
    assert c.producer_after_end("t") == (pid, epoch + 1)
    await settle()
    assert c.transactions["t"].state is T.COMPLETE_COMMIT
    assert [(m.producer_epoch, m.transaction_version) for m in h.markers] == [(epoch + 1, 2)]
    assert h.rm.get("data", 0).log.last_stable_offset == 2
    # the next transaction runs under the bumped epoch, its sequences from 0 again
    assert c.add_partitions("t", pid, epoch + 1, [("data", 0)], 5) == E.NONE
    assert h.produce(pid, epoch + 1, 0) == E.NONE
    assert c.end_transaction("t", pid, epoch + 1, False, 5) == E.NONE
    await settle()
    assert c.producer_after_end("t") == (pid, epoch + 2)


async def test_a_late_write_of_the_transaction_before_is_fenced(h):
    c, pid, epoch = begin(h)
    c.end_transaction("t", pid, epoch, True, 5)
    await settle()
    assert h.produce(pid, epoch, 1) == E.INVALID_PRODUCER_EPOCH
    assert c.add_partitions("t", pid, epoch, [("data", 1)], 5) == E.PRODUCER_FENCED


async def test_a_retried_end_txn_is_answered_as_the_first_was(h):
    c, pid, epoch = begin(h)
    assert c.end_transaction("t", pid, epoch, True, 5) == E.NONE
    # while the markers are written: the retry names the epoch it was sent with
    assert c.end_transaction("t", pid, epoch, True, 5) == E.CONCURRENT_TRANSACTIONS
    await settle()
    assert c.end_transaction("t", pid, epoch, True, 5) == E.NONE
    assert c.producer_after_end("t") == (pid, epoch + 1)
    assert c.end_transaction("t", pid, epoch, False, 5) == E.INVALID_TXN_STATE
    # once complete, the bumped epoch has nothing to commit, and any other epoch is fenced
    assert c.end_transaction("t", pid, epoch + 1, True, 5) == E.INVALID_TXN_STATE
    assert c.end_transaction("t", pid, epoch + 7, True, 5) == E.PRODUCER_FENCED


async def test_an_abort_of_a_transaction_that_added_nothing_bumps_the_epoch(h):
    """The client aborts a transaction whose first write may not have reached its leader yet: with nothing
    to mark, the end still moves the epoch on, which fences that write wherever it lands."""
    c, pid, epoch = begin(h)
    c.end_transaction("t", pid, epoch, True, 5)
    await settle()
    assert c.end_transaction("t", pid, epoch + 1, False, 5) == E.NONE
    await settle()
    assert (c.transactions["t"].state, c.producer_after_end("t")) == (T.COMPLETE_ABORT, (pid, epoch + 2))
    assert len(h.markers) == 1   # (the commit's; the abort had no partition to mark)
    # (a late write of epoch + 1 is refused where its leader asks to add the partition)
    assert c.add_partitions("t", pid, epoch + 1, [("data", 0)], 5) == E.PRODUCER_FENCED
    assert c.end_transaction("t", pid, epoch + 1, False, 5) == E.NONE   # its retry
    # a fresh producer's first transaction, aborted before anything was added, too
    _, pid2, epoch2 = c.init_producer_id("fresh", 10_000, -1, -1, 5)
    assert c.end_transaction("fresh", pid2, epoch2, False, 5) == E.NONE
    await settle()
    assert c.producer_after_end("fresh") == (pid2, epoch2 + 1)
    assert c.end_transaction("fresh", pid2, epoch2 + 1, True, 5) == E.INVALID_TXN_STATE
    # (v4 is version 1's end, whatever the transaction was: its abort of a complete abort is a retry, no bump)
    assert c.end_transaction("fresh", pid2, epoch2 + 1, False, 4) == E.NONE
    assert c.producer_after_end("fresh") == (pid2, epoch2 + 1)


async def test_an_epoch_that_runs_out_moves_to_a_new_producer_id(h):
    c, pid, _ = begin(h)
    meta = c.transactions["t"]
    # (as if this producer had ended 32,766 transactions: its epoch is the last a producer may use)
    assert c._write(meta, T.ONGOING, producer_id=pid, epoch=MAX_EPOCH, partitions={("data", 1)},
                    start_ms=0) == E.NONE
    assert h.produce(pid, MAX_EPOCH, 0, partition=1) == E.NONE
    assert c.end_transaction("t", pid, MAX_EPOCH, True, 5) == E.NONE
    new_pid, new_epoch = c.producer_after_end("t")
    assert new_pid != pid and new_epoch == 0
    # the new id is refused as busy (retriable) until the transaction is complete
    assert c.add_partitions("t", new_pid, 0, [("data", 0)], 5) == E.CONCURRENT_TRANSACTIONS
    await settle()
    assert h.markers[-1].producer_epoch == MAX_EPOCH + 1 and h.markers[-1].producer_id == pid
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (new_pid, 0, T.COMPLETE_COMMIT)
    assert c.end_transaction("t", pid, MAX_EPOCH, True, 5) == E.NONE   # a retry with the old id
    assert c.producer_after_end("t") == (new_pid, 0)
    assert c.add_partitions("t", new_pid, 0, [("data", 0)], 5) == E.NONE
    # the state log holds it all: a coordinator that takes over knows the new id and the old one
    fresh = h.reload().transactions["t"]
    assert (fresh.producer_id, fresh.last_producer_id, fresh.client_version) == (new_pid, pid, 2)


async def test_a_coordinator_that_takes_over_finishes_a_version_2_end_under_the_bumped_epoch(h):
    c, pid, epoch = begin(h)
    c.end_transaction("t", pid, epoch, True, 5)
    c.shutdown()   # crashed before any marker
    await settle()
    fresh = h.reload()
    assert (fresh.transactions["t"].state, fresh.transactions["t"].producer_epoch) == (T.PREPARE_COMMIT, epoch + 1)
    fresh.loaded()
    await settle()
    assert [(m.producer_epoch, m.transaction_version) for m in h.markers] == [(epoch + 1, 2)]
    assert fresh.end_transaction("t", pid, epoch, True, 5) == E.NONE   # the client's retry, to the new one


async def test_end_txn_v4_keeps_the_epoch(h):
    c, pid, epoch = begin(h)
    assert c.end_transaction("t", pid, epoch, True, 4) == E.NONE
    await settle()
    assert c.producer_after_end("t") == (pid, epoch)
    assert [m.transaction_version for m in h.markers] == [0]
    assert c.add_partitions("t", pid, epoch, [("data", 0)], 3) == E.NONE


async def test_a_write_under_the_next_epoch_waits_for_the_marker_of_the_open_transaction(h):
    """The partition refuses a batch of the producer's next transaction while the marker of its open one is
    not in (appended, that marker would decide the new transaction's records too)."""
    c, pid, epoch = begin(h)
    assert h.produce(pid, epoch + 1, 0) == E.INVALID_TXN_STATE
    c.end_transaction("t", pid, epoch, True, 5)
    await settle()
    assert h.produce(pid, epoch + 1, 0) == E.NONE
