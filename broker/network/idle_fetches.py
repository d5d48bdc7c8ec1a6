"""A follower's idle fetch, held at the leader from its connection's callback (issue 30).

The leader's half of an idle round (the follower's half: broker/replication/idle_rounds.py). In a follower's
incremental fetch session (KIP-227) whose partitions are all at rest (broker/partitions/session_rest.py), a
fetch that names nothing is parked for its whole wait and then answered with nothing: the same answer every
round but for the correlation id. The request path (a task woken, the header and body decoded, the session's
checks, a DelayedFetch in the purgatory, the answer encoded) was most of what such a round cost the leader.
``IdleFetches``, the stream's ``intercept`` of a connection that has carried a follower's incremental fetch,
takes that fetch in the transport's callback instead, when the frame's bytes and the session alone say that
the request path would park it with nothing to read: the follower is noted caught up on every partition of
the session (as the request path notes it), the frame is held on a timer for its wait, and at the end the
session's epoch moves and the empty answer is written. The wait ends on its grid (the multiples of the wait on
the host's monotonic clock) when the grid is at most ``_EARLY_S`` (or a twentieth of the wait) before its end:
a follower's idle rounds drift onto the grid within a few waits, and a broker then wakes for all of a host's
idle rounds (and its periodic beats, on the same clock) at once, not for each in turn.

Whenever the answer could be other than empty, the frame goes to the request path as it came, its wait cut
by what it has already waited (``HeldFetch.hand_over``): an event on a partition of the session (an append,
a moved offset, a leadership or ISR change: the session's listener wakes it as it wakes a parked
DelayedFetch), another request on the connection (answers leave in request order), or the session gone or
moved on by the time the wait ends.

Invariants: a frame is held only when the request path would have parked it with nothing to read: a Fetch
v12 from a follower (replica id >= 0) naming nothing, with a wait, in an open session whose epoch it
carries and whose every partition is at rest and unmarked; on a connection whose task waits for a frame,
that owes no answer, is neither throttled nor stopping, and whose SASL session (if any) is authenticated
and current; on a broker without an authorizer or quotas (their checks are the request path's); after the
pause check that every request makes. A held fetch is answered no later than its wait and no earlier than
``_EARLY_S`` (or a twentieth of its wait) before. The session's epoch moves only when the empty answer is
written, so a frame handed over is the request the session expects. A connection holds at most one frame,
and none once it ends.
"""

from __future__ import annotations

import asyncio
import math
import struct
import time

from kbroker.broker.partitions.fetch_sessions import next_epoch
from kbroker.broker.replication.fetcher import FETCH, FETCH_VERSION as VERSION   # (the version held: followers')
from kbroker.broker.replication.idle_rounds import NOTHING_NAMED, empty_answer
from kbroker.protocol import schema

_HEAD = struct.pack(">hh", FETCH, VERSION)
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
# A v12 body after the header: replica id, max wait, min and max bytes, isolation level, session id and epoch,
# then topics, forgotten topics, rack and tagged fields, which name nothing in an idle round. (Were the
# followers' version raised, its sessions name topics by id (v13+), which are never held, and from v15 the
# replica id is a tagged field: such a fetch goes the request path until this layout follows it.)
_BODY = struct.Struct(">iiiibii")
_BODY_SIZE = _BODY.size + len(NOTHING_NAMED)
_WAIT_AT = 4   # (the max wait's place in the body)
# A held fetch may end this much before its wait (at most a twentieth of it), to land on its wait's grid.
_EARLY_S = 0.025
_EARLY_SHARE = 0.05
_HEADER_FIXED = 11   # api key, version, correlation id, client id's size; then the client id and one tag byte


def round_end(now: float, wait: float) -> float:
    """When a fetch held at ``now`` for ``wait`` seconds is answered: the last multiple of the wait before its
    end (on the loop's monotonic clock, which the host's processes share) if that is at most _EARLY_S (or
    _EARLY_SHARE of the wait) early, else that much early (the module's docstring says why).

    An end on a multiple is that multiple. The loop's clock counts whole milliseconds, so a fetch that arrives
    in the millisecond its round's grid point falls in ends exactly on the next one, and end / wait can fall a
    rounding error short of the whole number (one end in seven at 400 ms): flooring it gave the multiple a
    whole wait earlier, the round ended _EARLY_S early, and the rounds walked off the grid for a dozen waits."""
    end = now + wait
    grid = math.floor(end / wait + 1e-6) * wait
    return min(end, max(grid, end - min(wait * _EARLY_SHARE, _EARLY_S)))


class IdleFetches:
    """The intercept of a follower's fetch connection (``Connection.hold_idle_fetches``)."""

    def __init__(self, conn) -> None:
        self.conn = conn
        self._answer = (0, b"")   # (a session id, the empty answer in it after the correlation id)

    def __call__(self, frame) -> bool:
        conn = self.conn
        if conn.held is not None:
            conn.held.hand_over()   # (answers leave in request order: the held fetch is answered first)
            return False
        if frame[:4] != _HEAD or frame[-4:] != NOTHING_NAMED or len(frame) < _HEADER_FIXED + _BODY_SIZE:
            return False
        body_at = _HEADER_FIXED + max(_INT16.unpack_from(frame, 8)[0], 0)
        if len(frame) != body_at + _BODY_SIZE or frame[body_at - 1] != 0:
            return False   # (tagged fields, or not the shape of an idle fetch: the request path decodes it)
        replica_id, wait_ms, _, _, _, session_id, epoch = _BODY.unpack_from(frame, body_at)
        if replica_id < 0 or wait_ms <= 0 or session_id == 0 or epoch <= 0 or not _open(conn):
            return False
        broker = conn.broker
        if broker.cluster is not None:
            broker.cluster.check_paused()   # (first, as on every request: a long pause fences leaderships)
        session = broker.fetch_sessions.get(session_id)
        if session is None or session.epoch != epoch or session.uses_topic_ids or not session.partitions:
            return False
        rest = session.rest
        if rest is None or (rest.parked is not None and not rest.parked.completed):
            return False
        now_ms = broker.replica_manager.now_ms()
        rest.begin_round(now_ms)
        if rest.all_quiet(len(session.partitions), now_ms) is None:   # (notes the follower caught up on each)
            return False
        conn.held = HeldFetch(self, frame if type(frame) is bytes else bytes(frame), body_at, session, wait_ms)
        conn.last_active = time.monotonic()
        return True

    def answer(self, correlation_id, session_id: int) -> bytes:
        """The empty answer's frame, made once per session."""
        if self._answer[0] != session_id:
            self._answer = (session_id, empty_answer(FETCH, VERSION, session_id))
        body = self._answer[1]
        return _INT32.pack(4 + len(body)) + correlation_id + body


def _open(conn) -> bool:
    """Nothing of the connection's or the broker's stands in the way of answering without the request path. (The
    connection's task waiting for a frame is what says no earlier request is still being handled: one whose
    handler is still running, or whose answer is still being written, owes an answer that nothing records.)"""
    sasl, broker = conn.sasl, conn.broker
    return conn.stream.reader_waiting and conn.owes_nothing() and not conn.stopping and \
        conn.muted_until <= time.monotonic() and \
        (sasl is None or (not sasl.raw_tokens and sasl.admits(FETCH))) and \
        broker.authorizer is None and not broker.quotas.enabled


class HeldFetch:
    """One idle fetch on its wait's timer. While held it is its session's ``rest.parked``, so that an event on a
    partition of the session hands it over (``try_complete_on``, as the session's listener calls it)."""

    __slots__ = ("fetches", "frame", "body_at", "session", "epoch", "deadline", "timer", "read_at", "completed")

    def __init__(self, fetches: IdleFetches, frame: bytes, body_at: int, session, wait_ms: int) -> None:
        self.fetches, self.frame, self.body_at, self.session = fetches, frame, body_at, session
        self.epoch = session.epoch
        loop = asyncio.get_running_loop()
        self.deadline = round_end(loop.time(), wait_ms / 1000)
        self.timer = loop.call_at(self.deadline, self._expire)
        self.read_at = time.perf_counter() if fetches.conn.timed else 0.0
        self.completed = False
        session.rest.parked = self

    def try_complete(self) -> bool:
        self.hand_over()
        return True

    def try_complete_on(self, _key) -> bool:
        """(The session's listener tells which partition moved; any move hands the fetch over.)"""
        return self.try_complete()

    def hand_over(self) -> None:
        """The frame goes to the request path, its wait cut by what it has waited here."""
        if self._finish():
            frame = bytearray(self.frame)
            left = self.deadline - asyncio.get_running_loop().time()
            _INT32.pack_into(frame, self.body_at + _WAIT_AT, max(0, math.ceil(left * 1000)))
            self.fetches.conn.stream.queue_frame(bytes(frame))

    def release(self, answer: bool) -> None:
        """The connection ends: answered now (a broker that stops answers what it has read) or dropped."""
        if answer:
            self._expire()
        else:
            self._finish()

    def _expire(self) -> None:
        if self.completed:
            return
        session, conn = self.session, self.fetches.conn
        broker = conn.broker
        if broker.fetch_sessions.sessions.get(session.session_id) is not session or session.epoch != self.epoch \
                or session.rest.marked:
            self.hand_over()   # (the session closed or moved meanwhile: the request path answers as it does)
            return
        self._finish()
        session.epoch = next_epoch(self.epoch)
        ready = time.perf_counter() if self.read_at else 0.0
        try:
            conn.stream.write(self.fetches.answer(self.frame[4:8], session.session_id))
        except ConnectionError:
            conn.end()
            return
        conn.last_active = time.monotonic()
        metrics = broker.metrics
        metrics.idle_fetches_held += 1
        if self.read_at:
            metrics.request_done(schema.REGISTRY[FETCH].name, VERSION, self.read_at, self.read_at, self.read_at, ready,
                                 time.perf_counter())

    def _finish(self) -> bool:
        """Whether the fetch was still held; it is not any more."""
        if self.completed:
            return False
        self.completed = True
        self.timer.cancel()
        conn = self.fetches.conn
        if conn.held is self:
            conn.held = None
        rest = self.session.rest
        if rest is not None and rest.parked is self:
            rest.parked = None
        return True
