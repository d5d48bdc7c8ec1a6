"""Share sessions (KIP-932): which share partitions a member fetches from a broker, with an epoch per request.

A member opens its session with epoch 0 (the request names every partition), continues it with epochs
1, 2, ... (each request adds partitions or forgets them) and closes it with -1; the end of the connection that
opened it closes it too, as in Kafka 4.1+ (what the member held goes back to the others at once). A request whose epoch is not
the one expected is INVALID_SHARE_SESSION_EPOCH; a continuing request without a session is
SHARE_SESSION_NOT_FOUND. ShareAcknowledge continues or closes a session but never opens one. A broker holds at
most ``group.share.max.share.sessions``: a new one past them is SHARE_SESSION_LIMIT_REACHED (a member opening
its session again replaces its own).

Invariant: a session's expected epoch grows by one per accepted request (after 2^31-1 it comes back to 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbroker.protocol.errors import ErrorCode

MAX_EPOCH = 2**31 - 1
FINAL_EPOCH = -1


@dataclass
class ShareSession:
    group: str
    member: str
    epoch: int = 1                                   # the epoch the next request must carry
    partitions: dict[tuple[bytes, int], None] = field(default_factory=dict)   # (topic id, partition), in order
    opened_on: object = field(default=None, repr=False, compare=False)   # the connection whose end closes it


class ShareSessions:
    def __init__(self, limit: int = 2000) -> None:
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.limit = limit

    def begin(self, group: str, member: str, epoch: int, acknowledge_only: bool = False
              ) -> tuple[ErrorCode, ShareSession | None]:
        """The session this request belongs to (a new one for epoch 0), its epoch checked and moved on."""
        key = (group, member)
        if epoch == 0:
            if acknowledge_only:
                return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
            self.sessions.pop(key, None)
            if len(self.sessions) >= self.limit:
                return ErrorCode.SHARE_SESSION_LIMIT_REACHED, None
            session = self.sessions[key] = ShareSession(group, member)
            return ErrorCode.NONE, session
        session = self.sessions.get(key)
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch == FINAL_EPOCH:
            return ErrorCode.NONE, session
        if epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        session.epoch = session.epoch + 1 if session.epoch < MAX_EPOCH else 1
        return ErrorCode.NONE, session

    def close(self, session: ShareSession) -> None:
        if self.sessions.get((session.group, session.member)) is session:
            del self.sessions[(session.group, session.member)]
