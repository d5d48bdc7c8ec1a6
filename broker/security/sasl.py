"""The server side of SASL on one connection: the handshake, the mechanisms' exchanges, re-authentication.

A connection on a SASL_PLAINTEXT or SASL_SSL listener owns one ``SaslSession``:

* before authentication it admits ApiVersions and SaslHandshake, then only
  SaslAuthenticate (or, after a v0 handshake, bare size-prefixed tokens, the
  framing of clients older than SaslAuthenticate); anything else closes the
  connection, as Kafka's authenticator does, but a second SaslHandshake during
  the exchange is first answered ILLEGAL_SASL_STATE (Kafka's answer to it);
* a failed exchange is answered (SASL_AUTHENTICATION_FAILED and a message)
  and then the connection closes; it never becomes authenticated;
* once authenticated the principal is ``User:<name>``. With
  ``connections.max.reauth.ms`` set, or a credential that expires (an
  OAUTHBEARER token), the session expires after the shorter of the two
  (KIP-368): a SaslHandshake v1 on the open connection re-authenticates it,
  with the same mechanism and as the same principal; any other request after
  expiry closes the connection. Without it a SaslHandshake on the authenticated
  connection is refused ILLEGAL_SASL_STATE and the connection goes on as it was.
"""

from __future__ import annotations

import enum
import hmac
import secrets
import time

from kbroker.protocol import scram
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.headers import API_VERSIONS_KEY
from kbroker.protocol.messages.sasl_authenticate import SASL_AUTHENTICATE
from kbroker.protocol.messages.sasl_handshake import SASL_HANDSHAKE


class SaslFailure(Exception):
    """The exchange failed; ``error`` is what the client is told, the message included."""

    def __init__(self, message: str, error: ErrorCode = ErrorCode.SASL_AUTHENTICATION_FAILED) -> None:
        super().__init__(message)
        self.error = error


class State(enum.Enum):
    HANDSHAKE = "handshake"          # ApiVersions and SaslHandshake only
    AUTHENTICATE = "authenticate"    # the mechanism's exchange is under way
    AUTHENTICATED = "authenticated"
    FAILED = "failed"                # answered with an error; the connection closes


class PlainExchange:
    """RFC 4616: one message ``[authzid] NUL authcid NUL passwd`` checked against the listener's JAAS users."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.principal: str | None = None
        self.user: str | None = None   # who it claims to be (for the log of a failure)

    def step(self, token: bytes) -> bytes:
        parts = bytes(token).split(b"\0")
        if len(parts) != 3:
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        try:
            authzid, username, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        self.user = username
        if not username:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        if authzid and authzid != username:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is different "
                              "from username")
        expected = self.users.get(username)
        # compare_digest even for an unknown user, so timing does not tell which users exist
        if not hmac.compare_digest((expected or "\0").encode(), password.encode()) or expected is None:
            raise SaslFailure("Authentication failed: Invalid username or password")
        self.principal = "User:" + username
        return b""


class ScramExchange:
    """RFC 5802 server: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, lookup, token_lookup=None) -> None:
        """``lookup(user, mechanism)``: the user's ``ScramCredential`` or None; ``token_lookup(token id,
        mechanism)``: a delegation token's (credential, TokenInfo) or None (broker/security/delegation_tokens.py)."""
        self.mechanism = mechanism
        self.lookup = lookup
        self.token_lookup = token_lookup
        self.principal: str | None = None
        self.user: str | None = None
        self.token_authenticated = False   # the client presented a delegation token: it acts as its owner
        self.expires_ms: int | None = None   # (a token's expiry ends the session)
        self._first: tuple | None = None   # (client-first-bare, server-first, nonce, gs2 header, credential, user)

    def _failed(self) -> SaslFailure:
        return SaslFailure("Authentication failed during authentication due to invalid credentials with SASL "
                           f"mechanism {self.mechanism}")

    def step(self, token: bytes) -> bytes:
        try:
            message = bytes(token).decode()
        except UnicodeDecodeError:
            raise self._failed() from None
        try:
            return self._client_first(message) if self._first is None else self._client_final(message)
        except scram.ScramError:
            raise self._failed() from None

    def _client_first(self, message: str) -> bytes:
        flag, sep, rest = message.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not (sep and sep2) or flag not in ("n", "y"):
            raise scram.ScramError("channel binding is not supported")   # (p=... asks for it)
        fields = scram.attributes(bare)
        user = self.user = scram.decode_name(fields.get("n", ""))
        nonce = fields.get("r", "")
        if not user or not nonce:
            raise scram.ScramError("client-first message without user or nonce")
        if fields.get("tokenauth", "").lower() == "true":   # (Kafka's extension: the user is a token's id)
            found = self.token_lookup(user, self.mechanism) if self.token_lookup is not None else None
            if found is None:
                raise scram.ScramError("Token Authentication failed: Invalid tokenId")
            credential, token = found
            self.token_authenticated, self.expires_ms = True, token.expiry_ms
            principal = token.owner
        else:
            credential, principal = self.lookup(user, self.mechanism), "User:" + user
        if authzid and scram.decode_name(authzid.removeprefix("a=")) != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is different "
                              "from username")
        if credential is None:
            raise SaslFailure("Authentication failed: Invalid user credentials")
        combined = nonce + secrets.token_urlsafe(18)
        server_first = f"r={combined},s={scram.b64(credential.salt)},i={credential.iterations}"
        self._first = (bare, server_first, combined, f"{flag},{authzid},", credential, principal)
        return server_first.encode()

    def _client_final(self, message: str) -> bytes:
        bare, server_first, nonce, gs2_header, credential, principal = self._first
        without_proof, sep, proof = message.rpartition(",p=")
        if not sep:
            raise scram.ScramError("client-final message without proof")
        fields = scram.attributes(without_proof)
        if fields.get("r") != nonce:
            raise scram.ScramError("nonce mismatch")
        if scram.unb64(fields.get("c", "")) != gs2_header.encode():
            raise scram.ScramError("channel binding mismatch")
        auth_message = f"{bare},{server_first},{without_proof}".encode()
        if not scram.verify_proof(self.mechanism, credential, auth_message, scram.unb64(proof)):
            raise scram.ScramError("invalid proof")
        self.principal = principal
        return ("v=" + scram.b64(scram.server_signature(self.mechanism, credential.server_key, auth_message))).encode()


def lifetime_of_session(credential_expires_ms: int | None, reauth_ms: int, now_ms: int) -> int | None:
    """How long an authenticated session lasts, as Kafka's authenticator decides (None: for ever): until the
    credential expires (an OAUTHBEARER token's ``exp``), or ``connections.max.reauth.ms``, whichever is sooner."""
    if credential_expires_ms is None:
        return reauth_ms if reauth_ms > 0 else None
    left = max(0, credential_expires_ms - now_ms)
    return min(left, reauth_ms) if reauth_ms > 0 else left


class SaslSession:
    def __init__(self, mechanisms: list[str], plain_users: dict[str, str], scram_lookup,
                 reauth_ms: int = 0, clock=time.monotonic, oauthbearer=None,
                 wall_ms=lambda: int(time.time() * 1000), token_lookup=None) -> None:
        """``oauthbearer(wall_ms)``: a new OAUTHBEARER exchange (broker/security/oauthbearer.py) reading the
        session's clock, where the mechanism is enabled;
        ``token_lookup``: delegation tokens for SCRAM (``ScramExchange``)."""
        self.token_lookup = token_lookup
        self.token_authenticated = False
        self.mechanisms = mechanisms
        self.plain_users = plain_users
        self.scram_lookup = scram_lookup
        self.reauth_ms = reauth_ms
        self.clock = clock
        self.oauthbearer = oauthbearer
        self.wall_ms = wall_ms
        self.lifetime_ms: int | None = None
        self.state = State.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.raw_tokens = False        # a v0 handshake: tokens come as bare size-prefixed frames
        self.reauthenticating = False
        self.expires_at: float | None = None
        self._exchange = None

    def admits(self, api_key: int) -> bool:
        """May a request of ``api_key`` be served now? (No: the connection closes.)"""
        if self.state is State.AUTHENTICATED:
            return api_key == SASL_HANDSHAKE.key or not self.expired()
        if self.state is State.HANDSHAKE:
            return api_key in (API_VERSIONS_KEY, SASL_HANDSHAKE.key)
        return self.state is State.AUTHENTICATE and api_key in (SASL_AUTHENTICATE.key, SASL_HANDSHAKE.key)

    def expired(self) -> bool:
        return self.expires_at is not None and self.clock() >= self.expires_at

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        if self.state is State.AUTHENTICATED:
            if self.expires_at is None:
                return ErrorCode.ILLEGAL_SASL_STATE   # no session lifetime: nothing to re-authenticate
            if version == 0 or mechanism != self.mechanism:
                self.state = State.FAILED   # re-authentication needs v1 and the mechanism of the session
                return ErrorCode.ILLEGAL_SASL_STATE
            self.reauthenticating = True
        elif self.state is not State.HANDSHAKE:
            self.state = State.FAILED
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in self.mechanisms:
            self.state = State.FAILED
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._exchange = PlainExchange(self.plain_users)
        elif mechanism == "OAUTHBEARER":
            self._exchange = self.oauthbearer(self.wall_ms)
        else:
            self._exchange = ScramExchange(mechanism, self.scram_lookup, self.token_lookup)
        self.state = State.AUTHENTICATE
        self.raw_tokens = version == 0
        return ErrorCode.NONE

    def authenticate(self, token: bytes) -> bytes:
        """One step of the exchange; the server's answer. Raises ``SaslFailure`` (the session is then FAILED)."""
        if self.state is not State.AUTHENTICATE:
            state, self.state = self.state, State.FAILED
            raise SaslFailure(f"Unexpected SaslAuthenticate request in state {state.value}",
                              ErrorCode.ILLEGAL_SASL_STATE)
        try:
            response = self._exchange.step(token)
        except SaslFailure:
            self.state = State.FAILED
            raise
        principal = self._exchange.principal
        if principal is not None:
            if self.reauthenticating and principal != self.principal:
                self.state = State.FAILED
                # (Kafka names each principal type.name here)
                raise SaslFailure("Cannot change principals during re-authentication from "
                                  f"{self.principal.replace(':', '.', 1)}: {principal.replace(':', '.', 1)}")
            self.principal = principal
            self.token_authenticated = getattr(self._exchange, "token_authenticated", False)
            self.state = State.AUTHENTICATED
            self.reauthenticating = False
            self.raw_tokens = False
            self.lifetime_ms = lifetime_of_session(getattr(self._exchange, "expires_ms", None), self.reauth_ms,
                                                   self.wall_ms())
            self.expires_at = self.clock() + self.lifetime_ms / 1000 if self.lifetime_ms is not None else None
        return response

    @property
    def attempted_user(self) -> str | None:
        return getattr(self._exchange, "user", None)

    @property
    def session_lifetime_ms(self) -> int:
        """What SaslAuthenticate v1+ tells the client once authenticated (0: no re-authentication needed)."""
        return self.lifetime_ms or 0 if self.state is State.AUTHENTICATED else 0
