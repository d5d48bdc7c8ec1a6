"""Delegation tokens (KIP-48): what this broker knows of every token, and the SCRAM credentials a client
authenticates with when it presents one.

A token is its id, owner, requester, renewers and three instants (issued, expires, may live until at most).
Its HMAC is HMAC-SHA512 of the id under ``delegation.token.secret.key``: every broker of a cluster computes the
same one from the same key, so the HMAC is never stored. A client that holds a token authenticates with SCRAM
(either mechanism) as user ``<token id>`` with password ``base64(HMAC)`` and the ``tokenauth=true`` extension;
it then acts as the token's owner until the token expires (its session ends with the token). This cache is
what those authentications and the four token APIs read; the metadata store (ZooKeeper's
``/delegation_token/tokens/<id>`` in a cluster, as ZooKeeper-mode Kafka kept them) is where tokens live.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field

from kbroker.protocol.scram import MECHANISMS, MIN_ITERATIONS, ScramCredential


@dataclass
class TokenInfo:
    token_id: str
    owner: str        # a principal, "User:alice"
    requester: str
    renewers: list[str] = field(default_factory=list)
    issue_ms: int = 0
    max_ms: int = 0
    expiry_ms: int = 0

    def owner_or_renewer(self, principal: str) -> bool:
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_ms < now_ms or self.expiry_ms < now_ms

    def to_json(self) -> bytes:
        """ZooKeeper-mode Kafka's znode (version 3)."""
        return json.dumps({"version": 3, "owner": self.owner, "tokenRequester": self.requester,
                           "renewers": self.renewers, "issueTimestamp": self.issue_ms, "maxTimestamp": self.max_ms,
                           "expiryTimestamp": self.expiry_ms, "tokenId": self.token_id}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "TokenInfo":
        value = json.loads(data)
        return cls(value["tokenId"], value["owner"], value.get("tokenRequester", value["owner"]),
                   list(value.get("renewers", [])), value["issueTimestamp"], value["maxTimestamp"],
                   value["expiryTimestamp"])


def token_hmac(secret: str, token_id: str) -> bytes:
    return hmac.new(secret.encode(), token_id.encode(), hashlib.sha512).digest()


class DelegationTokenCache:
    def __init__(self, secret: str | None) -> None:
        """``secret``: ``delegation.token.secret.key``; None: tokens are off (DELEGATION_TOKEN_AUTH_DISABLED)."""
        self.secret = secret
        self.tokens: dict[str, TokenInfo] = {}
        self._hmacs: dict[str, bytes] = {}      # token id -> its HMAC, computed once
        self._by_hmac: dict[bytes, str] = {}
        self._credentials: dict[str, dict[str, ScramCredential]] = {}

    @property
    def enabled(self) -> bool:
        return self.secret is not None

    def hmac(self, token_id: str) -> bytes:
        return self._hmacs.get(token_id) or token_hmac(self.secret, token_id)

    def replace(self, token_id: str, info: TokenInfo | None) -> None:
        """The token is now ``info`` (None: gone); a renewal or an expiry keeps its HMAC and credentials."""
        if info is None or not self.enabled:
            self.tokens.pop(token_id, None)
            self._by_hmac.pop(self._hmacs.pop(token_id, b""), None)
            self._credentials.pop(token_id, None)
            return
        if token_id not in self._hmacs:
            self._hmacs[token_id] = digest = token_hmac(self.secret, token_id)
            self._by_hmac[digest] = token_id
        self.tokens[token_id] = info

    def for_hmac(self, digest: bytes) -> TokenInfo | None:
        token_id = self._by_hmac.get(bytes(digest))
        return self.tokens.get(token_id) if token_id is not None else None

    def lookup(self, token_id: str, mechanism: str) -> tuple[ScramCredential, TokenInfo] | None:
        """What a SCRAM exchange with ``tokenauth=true`` checks the client against: the token's credential and
        the token (its owner acts; its expiry ends the session). The credentials are derived at a token's first
        login on this broker, with a salt of its own (a client learns it in the exchange), not at start-up or at
        each change: 4,096 iterations for each mechanism is work only a login needs."""
        info = self.tokens.get(token_id)
        if info is None or mechanism not in MECHANISMS:
            return None
        held = self._credentials.setdefault(token_id, {})
        if mechanism not in held:
            password = base64.b64encode(self._hmacs[token_id]).decode()
            held[mechanism] = ScramCredential.from_password(mechanism, password, secrets.token_bytes(16),
                                                            MIN_ITERATIONS)
        return held[mechanism], info
