"""A follower's idle fetch rounds, sent again from its connection's callback (issue 30).

In an incremental fetch session (KIP-227) an idle follower's round is the
same exchange every time: a fetch that names no partition (the leader's
session holds them all at their positions) and an answer that names none
(nothing moved at the leader). Only the session epoch and the correlation id
change. Each such round woke the fetcher's task, decoded the answer, looked
for what had changed, built and encoded the next fetch and armed a timer:
most of what an idle replicated cluster costs a follower. ``IdleRounds`` is
the fetcher connection's ``repeater`` (client/connection.py): given the
empty answer to a fetch that named nothing, while nothing here may have
moved since that fetch was built (``ReplicaFetcher.at_rest``: no partition
touched or backing off, the periodic full look not due, no replication
quota), it sends that fetch again at the session's next epoch at once. The
fetcher's task still waits for the first answer that says something, as if
its fetch had just been answered.

Invariants: only a fetch built as naming nothing in an open session is
repeated (a SASL re-authentication on the same connection is never taken
for it), and only on the answer that names nothing, has no error and no
throttle, and carries that session's id; the fetcher's ``session_epoch`` is
always the epoch of the fetch that is out, as its task expects; anything
else (another answer, a partition added, removed, answered or out of
backoff, the revisit due) reaches the task as before.
"""

from __future__ import annotations

import struct

from kbroker.broker.partitions.fetch_sessions import next_epoch
from kbroker.protocol import schema
from kbroker.protocol.headers import response_header

_INT32 = struct.Struct(">i")
# An incremental fetch (v12) naming nothing ends: session epoch, no topics, nothing forgotten, no rack, no tags.
NOTHING_NAMED = b"\x01\x01\x01\x00"


def empty_answer(api_key: int, version: int, session_id: int) -> bytes:
    """A fetch response's bytes after its correlation id when it names no partition, with no error or throttle."""
    body, _ = schema.encode(schema.struct_for(api_key, version, False),
                            {"throttle_time_ms": 0, "error_code": 0, "session_id": session_id, "responses": []})
    return response_header(0, api_key, schema.REGISTRY[api_key].is_flexible(version))[4:] + body.getvalue()


class IdleRounds:
    def __init__(self, fetcher, api_key: int, version: int) -> None:
        self.fetcher = fetcher
        self.api_key, self.version = api_key, version
        self._request_head = struct.pack(">hh", api_key, version)   # (a request's, after its size)
        self.armed = False   # the fetch out names nothing, in an open session
        self._answer = b""   # the empty answer in that session (after the correlation id)
        self._session_id = 0
        self.repeated = 0    # rounds sent from here (a count for tests and the bench)

    def sent(self, body: dict) -> None:
        """The fetcher is about to send ``body``."""
        self.armed = body["session_epoch"] > 0 and not body["topics"] and not body["forgotten_topics_data"]
        if self.armed and body["session_id"] != self._session_id:
            self._session_id = body["session_id"]
            self._answer = empty_answer(self.api_key, self.version, self._session_id)

    def __call__(self, response, request: bytearray) -> bool:
        fetcher = self.fetcher
        if not self.armed or response[4:] != self._answer or request[4:8] != self._request_head or \
                request[-4:] != NOTHING_NAMED or not fetcher.at_rest():
            return False
        if _INT32.unpack_from(request, len(request) - 8)[0] != fetcher.session_epoch:
            return False   # (not the fetch this session's epoch says is out)
        fetcher.session_epoch = next_epoch(fetcher.session_epoch)
        _INT32.pack_into(request, len(request) - 8, fetcher.session_epoch)
        self.repeated += 1
        return True
