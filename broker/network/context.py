"""What a handler sees of one request: the broker's components, the header and a bound logger."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kbroker.protocol.acls import CLUSTER, CLUSTER_NAME, OPERATIONS

if TYPE_CHECKING:
    from kbroker.broker.server import Broker


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


# A handler returns a response dict, a future of one (it parked in a purgatory
# after its state change), a coroutine (awaited before the next request of the
# connection is read), an EncodedBody, or one of these:
NO_RESPONSE = _Marker("NO_RESPONSE")          # acks=0 produce: the client expects nothing
CLOSE_CONNECTION = _Marker("CLOSE_CONNECTION")  # acks=0 produce that failed: Kafka closes the socket


class EncodedBody(bytes):
    """A response body already encoded for the request's version: the connection adds the header and sends it
    as it is. For an answer that is the same for everyone who asks the same way (ApiVersions), which its handler
    encodes once instead of on every request."""


@dataclass(slots=True)
class RequestContext:
    broker: "Broker"
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    connection_log: Any   # the connection's logger; ``log`` adds this request's fields to it
    peer: str
    listener: str = ""   # the listener the request came in on (Metadata answers with its endpoints)
    connection: Any = None   # the broker.connection.Connection (its principal, its SASL session)
    api_name: str = ""
    _log: Any = None

    @property
    def log(self):
        """The connection's logger bound to this request (api, correlation id, client id). Bound on first use:
        most requests log nothing, and binding costs more than the rest of a small request's bookkeeping."""
        if self._log is None:
            self._log = self.connection_log.bind(api=self.api_name, correlation_id=self.correlation_id,
                                                 client_id=self.client_id)
        return self._log

    def run_after_response(self, action) -> None:
        """Run ``action()`` once the handler is done and its response written to the socket (or queued behind
        earlier ones, or none is due), before the connection reads its next request, as Kafka's request handler
        completes its queued actions after ``handle`` answered: for work the answer need not wait for but the
        client's next request must find done (a transaction's markers after EndTxn). Runs even if the
        connection fails."""
        self.connection.after_response.append(action)

    def authorized(self, operation: int, resource_type: int, name: str, log_denied: bool = True) -> bool:
        """May this request's principal do ``operation`` on the resource (always, without an authorizer)?
        ``log_denied``: False where a refusal is not the answer (a fallback follows, or a listing filters)."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        conn = self.connection
        return authorizer.authorize(conn.principal, conn.ip, operation, resource_type, name,
                                    self.log if log_denied else None)

    def cluster_authorized(self, operation: int, log_denied: bool = True) -> bool:
        return self.authorized(operation, CLUSTER, CLUSTER_NAME, log_denied)

    def needs(self, operation: int) -> str:
        """Kafka's words when the request needs a cluster permission its principal lacks (the message of its
        ClusterAuthorizationException): the request, then the permission, ``... needs ALTER permission.``. Kafka
        names the request by its internals (processor, session object, buffer); kbroker by what identifies it
        to an operator."""
        conn = self.connection
        who = getattr(conn, "principal", None)
        return (f"Request Request(api={self.api_name}, correlationId={self.correlation_id}, principal={who}, "
                f"peer={self.peer}, listenerName=ListenerName({self.listener})) needs "
                f"{re.sub('(?<=[a-z])(?=[A-Z])', '_', OPERATIONS[operation]).upper()} permission.")

    def authorized_operations(self, resource_type: int, name: str, operations) -> int:
        """Kafka's ``*_authorized_operations`` field: bit ``code`` set for each of ``operations`` allowed."""
        return sum(1 << op for op in operations if self.authorized(op, resource_type, name, log_denied=False))

    def authorized_any(self, operation: int, resource_type: int) -> bool:
        """May it do ``operation`` on some resource of the type (Kafka's authorizeByResourceType)?"""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        conn = self.connection
        return authorizer.authorize_any(conn.principal, conn.ip, operation, resource_type)
