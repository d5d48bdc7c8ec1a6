"""What a handler sees of one request: the broker's components, the header and a bound logger."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from broker.server import Broker


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


# A handler returns a response dict, a future of one (it parked in a purgatory
# after its state change), a coroutine (awaited before the next request of the
# connection is read), or one of these:
NO_RESPONSE = _Marker("NO_RESPONSE")          # acks=0 produce: the client expects nothing
CLOSE_CONNECTION = _Marker("CLOSE_CONNECTION")  # acks=0 produce that failed: Kafka closes the socket


@dataclass(slots=True)
class RequestContext:
    broker: "Broker"
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    log: Any
    peer: str
    listener: str = ""   # the listener the request came in on (Metadata answers with its endpoints)
    connection: Any = None   # the broker.connection.Connection (its principal, its SASL session)
