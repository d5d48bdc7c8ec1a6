"""The client side of SASL: PLAIN and SCRAM-SHA-256/512 over SaslHandshake v1 and SaslAuthenticate.

``authenticate(conn, credentials)`` runs the whole exchange on an open
``KafkaConnection`` and returns the session lifetime the broker granted
(milliseconds, 0 for none: KIP-368); the connection re-authenticates before
it ends (``KafkaConnection`` calls this again).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from kbroker.protocol import scram
from kbroker.protocol.messages.sasl_authenticate import SASL_AUTHENTICATE
from kbroker.protocol.messages.sasl_handshake import SASL_HANDSHAKE

MECHANISMS = ("PLAIN", *scram.MECHANISMS)   # what kbroker speaks, on both ends


class SaslAuthenticationError(ConnectionError):
    """The broker refused the mechanism or the credentials (its message included)."""


@dataclass(frozen=True)
class SaslCredentials:
    mechanism: str   # PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    username: str
    password: str
    token: bool = False   # a delegation token (SCRAM only): username its id, password its HMAC in base64


class _ScramClient:
    def __init__(self, credentials: SaslCredentials) -> None:
        self.credentials = credentials
        self.nonce = secrets.token_urlsafe(24)
        self.first_bare = f"n={scram.encode_name(credentials.username)},r={self.nonce}" + \
            (",tokenauth=true" if credentials.token else "")   # (Kafka's extension for a delegation token)
        self.expected_signature = b""

    def first(self) -> bytes:
        return ("n,," + self.first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        mechanism = self.credentials.mechanism
        text = bytes(server_first).decode()
        fields = scram.attributes(text)
        nonce, salt, iterations = fields["r"], scram.unb64(fields["s"]), int(fields["i"])
        if not nonce.startswith(self.nonce) or iterations < scram.MIN_ITERATIONS:
            raise SaslAuthenticationError("SCRAM: the broker's first message is not acceptable")
        without_proof = f"c={scram.b64(b'n,,')},r={nonce}"
        auth_message = f"{self.first_bare},{text},{without_proof}".encode()
        salted = scram.salted_password(mechanism, self.credentials.password, salt, iterations)
        proof = scram.client_proof(mechanism, salted, auth_message)
        self.expected_signature = scram.server_signature(mechanism, scram.server_key(mechanism, salted),
                                                         auth_message)
        return f"{without_proof},p={scram.b64(proof)}".encode()

    def check(self, server_final: bytes) -> None:
        fields = scram.attributes(bytes(server_final).decode())
        if "e" in fields or scram.unb64(fields.get("v", "")) != self.expected_signature:
            raise SaslAuthenticationError("SCRAM: the broker's signature does not verify")


async def authenticate(conn, credentials: SaslCredentials, timeout: float = 30.0) -> int:
    handshake = await conn.request_unchecked(SASL_HANDSHAKE.key, 1, {"mechanism": credentials.mechanism},
                                             timeout=timeout)
    if handshake.error_code:
        raise SaslAuthenticationError(f"SaslHandshake for {credentials.mechanism}: error {handshake.error_code}, "
                                      f"the broker offers {handshake.mechanisms}")

    async def step(token: bytes):
        response = await conn.request_unchecked(SASL_AUTHENTICATE.key, 2, {"auth_bytes": token}, timeout=timeout)
        if response.error_code:
            raise SaslAuthenticationError(f"SaslAuthenticate: error {response.error_code}: {response.error_message}")
        return response

    if credentials.mechanism == "PLAIN":
        response = await step(f"\0{credentials.username}\0{credentials.password}".encode())
    else:
        client = _ScramClient(credentials)
        server_first = (await step(client.first())).auth_bytes
        response = await step(client.final(server_first))
        client.check(response.auth_bytes)
    return response.session_lifetime_ms
