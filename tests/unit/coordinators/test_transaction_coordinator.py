"""The transaction coordinator on a manual clock over real logs: transitions, timeouts, fencing, replay."""

from __future__ import annotations

import asyncio

import pytest

from kbroker.broker.partitions.replica_manager import ReplicaManager
from kbroker.coordinators.internal_topic import InternalTopicStore
from kbroker.coordinators.scheduler import ManualScheduler
from kbroker.coordinators.transaction.coordinator import TransactionConfig, TransactionCoordinator
from kbroker.coordinators.transaction.state import IllegalTransactionTransition, TransactionState
from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.records import build_batch, build_marker_batch
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager

T = TransactionState


class Harness:
    """Real __transaction_state and data logs; markers appended to the data logs as WriteTxnMarkers does."""

    def __init__(self, directory: str) -> None:
        self.scheduler = ManualScheduler()
        self.log_manager = LogManager([directory], clock=lambda: self.scheduler.now_ms() / 1000)
        self.rm = ReplicaManager(0, self.log_manager)
        for i in range(3):
            self.rm.make_leader("__transaction_state", i, LogConfig(cleanup_policy="compact"))
        for i in range(2):
            self.rm.make_leader("data", i, LogConfig())
        self.store = InternalTopicStore(self.rm, "__transaction_state", lambda: self.scheduler.now_ms() / 1000)
        self.next_pid = 100
        self.markers = []
        self.markers_at_once = []
        self.coordinator = self.make()

    def make(self, markers_now: set | None = None, state_replicated=None) -> TransactionCoordinator:
        """``markers_now``: the partitions whose markers the broker can append at once (those it leads with no
        follower in the ISR); the coordinator sends the others as WriteTxnMarkers. ``state_replicated``: the
        broker's answer to "is the state partition's log on its ISR?" (None: yes, else what to await)."""
        at_once = None if markers_now is None else lambda marker: self.write_markers_at_once(marker, markers_now)
        return TransactionCoordinator(TransactionConfig(state_partitions=3, max_timeout_ms=60_000), self.scheduler,
                                      self.store.append, self.new_pid, self.write_markers, at_once,
                                      state_replicated)

    def write_markers_at_once(self, marker, local: set) -> list:
        batch = build_marker_batch(marker.producer_id, marker.producer_epoch, marker.commit, 0, 1)
        for tp in marker.partitions:
            if tp in local:
                assert self.rm.append_records(*tp, memoryview(batch), -1, from_coordinator=True).error == 0
                self.markers_at_once.append((marker.commit, tp))
        return [tp for tp in marker.partitions if tp not in local]

    def new_pid(self) -> int:
        self.next_pid += 1
        return self.next_pid

    async def write_markers(self, marker) -> None:
        self.markers.append(marker)
        batch = build_marker_batch(marker.producer_id, marker.producer_epoch, marker.commit, 0, 1)
        for topic, p in marker.partitions:
            assert self.rm.append_records(topic, p, memoryview(batch), -1, from_coordinator=True).error == 0

    def reload(self) -> TransactionCoordinator:
        fresh = self.make()
        for i in range(3):
            for stored in self.store.records(i):
                if stored.key is not None:
                    fresh.replay(stored.key, stored.value)
        return fresh

    def produce(self, pid, epoch, seq, partition=0):
        batch = build_batch([(None, b"x", [])], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                            transactional=True)
        return self.rm.append_records("data", partition, memoryview(batch), -1).error


@pytest.fixture
def h(tmp_path):
    harness = Harness(str(tmp_path))
    yield harness
    harness.log_manager.shutdown()


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


async def test_commit_goes_through_prepare_markers_and_complete(h):
    c = h.coordinator
    error, pid, epoch = c.init_producer_id("t", 10_000, -1, -1, 4)
    assert (error, epoch) == (E.NONE, 0)
    assert c.add_partitions("t", pid, epoch, [("data", 0), ("data", 1)], 3) == E.NONE
    assert h.produce(pid, epoch, 0) == E.NONE
    assert h.rm.get("data", 0).log.last_stable_offset == 0
    assert c.end_transaction("t", pid, epoch, True, 3) == E.NONE
    assert c.transactions["t"].state is T.PREPARE_COMMIT
    assert c.init_producer_id("t", 10_000, -1, -1, 4)[0] == E.CONCURRENT_TRANSACTIONS
    await settle()
    assert c.transactions["t"].state is T.COMPLETE_COMMIT
    assert [(m.commit, m.partitions) for m in h.markers] == [(True, [("data", 0), ("data", 1)])]
    assert h.rm.get("data", 0).log.last_stable_offset == 2


async def test_markers_written_at_once_complete_the_transaction_inside_end_txn(h):
    """A single broker leads every partition with no follower: EndTxn returns with the transaction complete,
    no task and no event-loop turn in between (the producer's next transaction never meets
    CONCURRENT_TRANSACTIONS)."""
    c = h.make(markers_now={("data", 0), ("data", 1)})
    _, pid, epoch = c.init_producer_id("t", 10_000, -1, -1, 4)
    c.add_partitions("t", pid, epoch, [("data", 0), ("data", 1)], 3)
    h.produce(pid, epoch, 0)
    assert c.end_transaction("t", pid, epoch, True, 3) == E.NONE
    assert c.transactions["t"].state is T.COMPLETE_COMMIT and c.completion("t") is None
    assert h.markers_at_once == [(True, ("data", 0)), (True, ("data", 1))] and h.markers == []
    assert h.rm.get("data", 0).log.last_stable_offset == 2
    assert h.reload().transactions["t"].state is T.COMPLETE_COMMIT   # the Complete state is in the log


async def test_markers_written_at_once_can_follow_the_answer(h):
    """With the request's ``run_after_response``, EndTxn returns once the Prepare state is written (Kafka's
    answer point) and hands over one action that writes the markers and the Complete state, no task."""
    c = h.make(markers_now={("data", 0)})
    _, pid, epoch = c.init_producer_id("t", 10_000, -1, -1, 4)
    c.add_partitions("t", pid, epoch, [("data", 0)], 3)
    h.produce(pid, epoch, 0)
    after = []
    assert c.end_transaction("t", pid, epoch, True, 3, after.append) == E.NONE
    assert c.transactions["t"].state is T.PREPARE_COMMIT and c.completion("t") is None
    assert h.markers_at_once == [] and len(after) == 1
    assert h.reload().transactions["t"].state is T.PREPARE_COMMIT   # decided: a restart would complete it
    after[0]()
    assert c.transactions["t"].state is T.COMPLETE_COMMIT and c.completion("t") is None
    assert h.markers_at_once == [(True, ("data", 0))] and h.markers == []
    assert h.rm.get("data", 0).log.last_stable_offset == 2
    assert h.reload().transactions["t"].state is T.COMPLETE_COMMIT


async def test_markers_that_cannot_be_written_at_once_are_sent_before_the_complete_state(h):
    c = h.make(markers_now={("data", 0)})   # data-1's leader is elsewhere (or has followers to wait for)
    _, pid, epoch = c.init_producer_id("t", 10_000, -1, -1, 4)
    c.add_partitions("t", pid, epoch, [("data", 0), ("data", 1)], 3)
    assert c.end_transaction("t", pid, epoch, False, 3) == E.NONE
    assert c.transactions["t"].state is T.PREPARE_ABORT and c.completion("t") is not None
    await settle()
    assert c.transactions["t"].state is T.COMPLETE_ABORT
    assert h.markers_at_once == [(False, ("data", 0))]
    assert [(m.commit, m.partitions) for m in h.markers] == [(False, [("data", 1)])]


class StateIsr:
    """The state partition's ISR as the coordinator sees it: each question is a future the test answers."""

    def __init__(self) -> None:
        self.asked: list[asyncio.Future] = []

    def __call__(self, partition: int):
        self.asked.append(asyncio.get_running_loop().create_future())
        return lambda future=self.asked[-1]: future


async def test_no_marker_is_written_before_the_prepare_state_is_on_the_isr(h):
    """Kafka's order: a marker outliving a Prepare that a dying coordinator never replicated would decide a
    transaction that the next coordinator still knows as open. A failed wait is asked again."""
    isr = StateIsr()
    c = h.make(markers_now={("data", 0)}, state_replicated=isr)
    _, pid, epoch = c.init_producer_id("t", 10_000, -1, -1, 4)
    c.add_partitions("t", pid, epoch, [("data", 0)], 3)
    h.produce(pid, epoch, 0)
    assert c.end_transaction("t", pid, epoch, True, 3) == E.NONE
    await settle()
    assert c.transactions["t"].state is T.PREPARE_COMMIT and h.markers_at_once == [] and h.markers == []
    isr.asked[0].set_result(E.REQUEST_TIMED_OUT)   # the followers did not catch up in time: wait again
    await asyncio.sleep(0.15)                       # (the retry's pause is on the event loop's clock)
    assert len(isr.asked) == 2 and h.markers == [] and c.transactions["t"].state is T.PREPARE_COMMIT
    isr.asked[1].set_result(E.NONE)
    await settle()
    assert [(m.commit, m.partitions) for m in h.markers] == [(True, [("data", 0)])]
    assert c.transactions["t"].state is T.COMPLETE_COMMIT and h.rm.get("data", 0).log.last_stable_offset == 2


async def test_a_coordinator_whose_shard_moved_before_its_prepare_replicated_writes_no_marker(h):
    isr = StateIsr()
    c = h.make(state_replicated=isr)
    _, pid, epoch = c.init_producer_id("t", 10_000, -1, -1, 4)
    c.add_partitions("t", pid, epoch, [("data", 0)], 3)
    assert c.end_transaction("t", pid, epoch, False, 3) == E.NONE
    isr.asked[0].set_result(E.NOT_LEADER_OR_FOLLOWER)
    await settle()
    assert h.markers == [] and c.completion("t") is None
    assert c.transactions["t"].state is T.PREPARE_ABORT   # the next coordinator finishes it from its log


async def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(h):
    c = h.coordinator
    _, pid, epoch = c.init_producer_id("slow", 5_000, -1, -1, 4)
    c.add_partitions("slow", pid, epoch, [("data", 0)], 3)
    h.produce(pid, epoch, 0)
    h.scheduler.advance(4_999)
    assert c.transactions["slow"].state is T.ONGOING
    h.scheduler.advance(1)
    await settle()
    meta = c.transactions["slow"]
    assert meta.state is T.COMPLETE_ABORT and meta.producer_epoch == epoch + 1
    assert h.markers[-1].producer_epoch == epoch + 1 and not h.markers[-1].commit
    # The old producer is fenced everywhere: at the coordinator and on the partition.
    assert c.end_transaction("slow", pid, epoch, True, 3) == E.PRODUCER_FENCED
    assert c.add_partitions("slow", pid, epoch, [("data", 0)], 1) == E.INVALID_PRODUCER_EPOCH
    assert h.produce(pid, epoch, 1) == E.INVALID_PRODUCER_EPOCH
    assert h.rm.get("data", 0).log.aborted_transactions(0, 10)[0].producer_id == pid


async def test_the_periodic_sweep_aborts_what_the_timer_missed(h):
    c = h.coordinator
    _, pid, epoch = c.init_producer_id("swept", 1_000, -1, -1, 4)
    c.add_partitions("swept", pid, epoch, [("data", 1)], 3)
    h.scheduler.cancel(("txn-timeout", "swept"))
    h.scheduler.advance(1_001)
    assert c.abort_timed_out() == 1
    await settle()
    assert c.transactions["swept"].state is T.COMPLETE_ABORT


async def test_replay_finishes_a_prepared_commit(h):
    c = h.coordinator
    _, pid, epoch = c.init_producer_id("crash", 10_000, -1, -1, 4)
    c.add_partitions("crash", pid, epoch, [("data", 0)], 3)
    h.produce(pid, epoch, 0)
    c.end_transaction("crash", pid, epoch, True, 3)
    c.shutdown()          # the coordinator "crashes" before writing markers
    await settle()
    assert h.markers == []
    fresh = h.reload()
    assert fresh.transactions["crash"].state is T.PREPARE_COMMIT
    fresh.loaded()
    await settle()
    assert fresh.transactions["crash"].state is T.COMPLETE_COMMIT and h.markers[0].commit
    assert h.reload().transactions["crash"].state is T.COMPLETE_COMMIT


async def test_init_with_an_open_transaction_aborts_it_first(h):
    c = h.coordinator
    _, pid, epoch = c.init_producer_id("reopen", 10_000, -1, -1, 4)
    c.add_partitions("reopen", pid, epoch, [("data", 0)], 3)
    assert c.init_producer_id("reopen", 10_000, -1, -1, 4)[0] == E.CONCURRENT_TRANSACTIONS
    await settle()
    error, pid2, epoch2 = c.init_producer_id("reopen", 10_000, -1, -1, 4)
    assert (error, pid2, epoch2) == (E.NONE, pid, epoch + 2)   # one bump to fence, one for the new instance
    assert not h.markers[-1].commit


async def test_errors(h):
    c = h.coordinator
    assert c.init_producer_id("", 1000, -1, -1, 4)[0] == E.INVALID_REQUEST
    assert c.init_producer_id("t", 60_001, -1, -1, 4)[0] == E.INVALID_TRANSACTION_TIMEOUT
    _, pid, epoch = c.init_producer_id("t", 1000, -1, -1, 4)
    assert c.end_transaction("t", pid, epoch, True, 3) == E.INVALID_TXN_STATE
    assert c.add_partitions("t", pid + 1, epoch, [("data", 0)], 3) == E.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("unknown", pid, epoch, [("data", 0)], 3) == E.INVALID_PRODUCER_ID_MAPPING
    assert c.verify_partitions("t", pid, epoch, [("data", 0)]) == {("data", 0): E.TRANSACTION_ABORTABLE}
    c.add_partitions("t", pid, epoch, [("data", 0)], 3)
    assert c.verify_partitions("t", pid, epoch, [("data", 0), ("data", 1)]) == {
        ("data", 0): E.NONE, ("data", 1): E.TRANSACTION_ABORTABLE}
    meta = c.transactions["t"]
    with pytest.raises(IllegalTransactionTransition):
        meta.transition_to(T.COMPLETE_COMMIT)
    assert meta.state is T.ONGOING   # an illegal transition changes nothing


def test_state_ids_and_predecessors_match_kafka():
    assert [s.id for s in T] == [0, 1, 2, 3, 4, 5, 6, 7]
    # (transactions V2 abort from a state with no open transaction too)
    assert T.PREPARE_ABORT.valid_previous == {T.ONGOING, T.PREPARE_EPOCH_FENCE, T.EMPTY, T.COMPLETE_COMMIT,
                                              T.COMPLETE_ABORT}
    assert T.DEAD.valid_previous == {T.EMPTY, T.COMPLETE_COMMIT, T.COMPLETE_ABORT}


async def test_a_shard_unloads_and_the_next_coordinator_finishes_its_prepared_transaction(h):
    """Leadership of a __transaction_state partition moves: this coordinator forgets the shard (its
    timers stop); the one that loads it finds PrepareCommit in the log and writes the markers, carrying
    the partition's new leader epoch as coordinator epoch."""
    c = h.coordinator
    _, pid, epoch = c.init_producer_id("moving", 10_000, -1, -1, 4)
    c.add_partitions("moving", pid, epoch, [("data", 0)], 3)
    _, other_pid, other_epoch = c.init_producer_id("kept", 10_000, -1, -1, 4)
    c.add_partitions("kept", other_pid, other_epoch, [("data", 1)], 3)
    partition = c.partition_for("moving")
    assert c.partition_for("kept") != partition   # the two ids live on different shards
    c.send_markers = _never   # the old coordinator's marker writes do not get through before it moves
    assert c.end_transaction("moving", pid, epoch, True, 3) == E.NONE
    assert c.unload_partition(partition) == 1
    assert "moving" not in c.transactions and "kept" in c.transactions
    await settle()
    assert h.markers == []

    successor = h.make()
    for stored in h.store.records(partition):
        if stored.key is not None:
            successor.replay(stored.key, stored.value)
    successor.loaded(partition, coordinator_epoch=7)
    await settle()
    assert successor.transactions["moving"].state is T.COMPLETE_COMMIT
    assert [(m.commit, m.coordinator_epoch) for m in h.markers] == [(True, 7)]


async def _never(marker) -> None:
    await asyncio.Event().wait()
