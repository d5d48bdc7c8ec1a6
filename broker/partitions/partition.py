"""Partition: one local replica of a topic partition, with what its leader knows of the followers.

Invariants:
* only the leader (``leader_id == broker_id``) appends as leader and moves the
  high watermark; a follower takes the leader's high watermark, capped at its
  own log end;
* the leader's high watermark is the minimum log end offset over the maximal
  ISR (the committed ISR plus a pending expansion), never beyond its own log
  end; a follower whose log end is unknown holds it back, as in Kafka, until
  its first fetch;
* at most one ISR change is in flight (``pending_isr``); until the controller
  accepts it the committed ISR stands.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbroker.storage.log import Log

READ_COMMITTED = 1


@dataclass(eq=False)
class ReplicaState:
    """The leader's view of one follower, from that follower's fetches.

    ``rest``: the follower's fetch session while it holds this partition at rest (broker/partitions/session_rest.py).
    Each of that session's rounds is then a fetch at the leader's end, caught up, noted once for the session
    (its ``round_ms``) rather than on each of its partitions: the times here are the later of their own and
    the session's last round (``caught_up_since`` reads both; ``fold`` writes the round's here)."""
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0
    rest: object = None

    def caught_up_since(self, since_ms: int) -> bool:
        rest = self.rest
        return self.last_caught_up_ms >= since_ms or (rest is not None and rest.round_ms >= since_ms)

    def fold(self) -> None:
        """Write the session's rounds at rest into the times here."""
        rest = self.rest
        if rest is not None and rest.round_ms > self.last_fetch_ms:
            self.last_caught_up_ms = self.last_fetch_ms = rest.round_ms


@dataclass
class Partition:
    topic: str
    index: int
    log: Log
    leader_id: int
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    broker_id: int = -1
    partition_epoch: int = 0
    followers: dict[int, ReplicaState] = field(default_factory=dict)
    pending_isr: list[int] | None = None
    topic_id: bytes = bytes(16)
    # The log end when this broker became leader in ``leader_epoch`` (Kafka's leaderEpochStartOffset):
    # until the high watermark reaches it, a client's ListOffsets gets OFFSET_NOT_AVAILABLE, so that a new
    # leader that has not yet learnt the committed end never shows an end below one already shown.
    leader_epoch_start_offset: int = 0

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def min_isr(self) -> int:
        """min.insync.replicas as Kafka 4 applies it: never more than the partition has replicas, so an acks=all
        write to a topic of fewer replicas than the broker's default is taken while all of them are in sync."""
        return min(self.log.config.min_insync_replicas, max(len(self.replicas), 1))

    @property
    def maximal_isr(self) -> list[int]:
        if self.pending_isr is None:
            return self.isr
        return self.isr + [r for r in self.pending_isr if r not in self.isr]

    def fetch_bound(self, replica_id: int, isolation_level: int = 0) -> int:
        """Where a fetch stops: followers (replica_id >= 0) read to the log end, consumers to the HW,
        read_committed consumers to the last stable offset."""
        if replica_id >= 0:
            return self.log.log_end_offset
        return self.log.last_stable_offset if isolation_level == READ_COMMITTED else self.log.high_watermark

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min log end offset over the maximal ISR; True if it moved."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        for replica in self.maximal_isr:
            if replica != self.broker_id:
                state = self.followers.get(replica)
                new_hw = min(new_hw, state.log_end_offset if state is not None else -1)
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            return True
        return False

    def update_follower(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """Record a follower's fetch: its log end, and whether it has caught up (Kafka's rule: it read to
        the leader's end now, or to where the leader's end was at its previous fetch). True if its log end
        moved."""
        state = self.followers.get(replica_id)
        if state is None:
            state = self.followers[replica_id] = ReplicaState()
        if state.rest is not None:
            state.fold()
        moved = state.log_end_offset != fetch_offset
        leader_leo = self.log.log_end_offset
        if fetch_offset >= leader_leo:
            state.last_caught_up_ms = now_ms
        elif fetch_offset >= state.last_fetch_leader_leo >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_leader_leo = leader_leo
        state.last_fetch_ms = now_ms
        return moved

    def reset_followers(self, now_ms: int) -> None:
        """On becoming leader: followers' ends are unknown; ISR members count as caught up now."""
        self.followers = {r: ReplicaState(last_caught_up_ms=now_ms if r in self.isr else 0)
                          for r in self.replicas if r != self.broker_id}
        self.pending_isr = None

    def out_of_sync(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """The ISR followers not caught up within ``max_lag_ms`` (one whose fetches of the partition are at rest
        in a session is caught up at that session's last round)."""
        since = now_ms - max_lag_ms
        return [r for r in self.isr
                if r != self.broker_id and not self.followers.get(r, _UNKNOWN).caught_up_since(since)]

    def can_join_isr(self, replica_id: int) -> bool:
        """A follower rejoins once it has everything up to the HW and this leader epoch's first offset."""
        state = self.followers.get(replica_id)
        if state is None or replica_id in self.maximal_isr or replica_id not in self.replicas:
            return False
        epoch_start = next((o for e, o in self.log.leader_epoch_cache.entries if e == self.leader_epoch), 0)
        return state.log_end_offset >= max(self.log.high_watermark, epoch_start)


_UNKNOWN = ReplicaState()   # (a follower this leader has no state of: never caught up)
