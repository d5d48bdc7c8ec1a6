"""SCRAM (RFC 5802, RFC 7677) as Kafka uses it: the key derivations, the messages and the stored credential.

Pure functions over bytes and text, shared by the broker (the server side of
the exchange, the credentials it keeps) and ``client/`` (the client side).

Invariants:
* a stored credential holds the salt, the iteration count and the two keys
  derived from the salted password (StoredKey = H(ClientKey), ServerKey),
  never the password nor the salted password: whoever reads the store can
  verify a proof but not make one;
* its text form is Kafka's (``salt=<b64>,stored_key=<b64>,server_key=<b64>,
  iterations=<n>``), so a credential written by ``kafka-configs`` into
  ZooKeeper reads back here and the reverse;
* user names travel as RFC 5802 ``saslname``s (``,`` as ``=2C``, ``=`` as ``=3D``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

# Kafka's ScramMechanism: name -> (hash, type code in the SCRAM credential APIs).
MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
MECHANISM_BY_TYPE = {code: name for name, (_, code) in MECHANISMS.items()}
MIN_ITERATIONS = 4096     # Kafka's minimum for both mechanisms
MAX_ITERATIONS = 16384    # Kafka refuses more (an iteration count is a cost every authentication pays)


class ScramError(ValueError):
    """A malformed or unacceptable SCRAM message."""


def _hash(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism][0]
    except KeyError:
        raise ScramError(f"unknown SCRAM mechanism {mechanism}") from None


def hmac_digest(mechanism: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, _hash(mechanism)).digest()


def digest(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(_hash(mechanism), data).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) of RFC 5802 (PBKDF2 with the mechanism's HMAC)."""
    return hashlib.pbkdf2_hmac(_hash(mechanism), password.encode(), salt, iterations)


def client_key(mechanism: str, salted: bytes) -> bytes:
    return hmac_digest(mechanism, salted, b"Client Key")


def server_key(mechanism: str, salted: bytes) -> bytes:
    return hmac_digest(mechanism, salted, b"Server Key")


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise ScramError(f"invalid base64 {text!r}") from None


def encode_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def decode_name(text: str) -> str:
    if "=" in text.replace("=2C", "").replace("=3D", ""):
        raise ScramError(f"invalid saslname {text!r}")
    return text.replace("=2C", ",").replace("=3D", "=")


def attributes(message: str) -> dict[str, str]:
    """``a=x,b=y`` -> {"a": "x", "b": "y"} (values may hold ``=``; attribute names are single letters, but
    Kafka's extensions such as ``tokenauth`` are longer)."""
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ScramError(f"invalid SCRAM attribute {part!r}")
        out[key] = value
    return out


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted: bytes, iterations: int) -> "ScramCredential":
        return cls(salt, digest(mechanism, client_key(mechanism, salted)), server_key(mechanism, salted), iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, salt: bytes, iterations: int) -> "ScramCredential":
        return cls.from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                        iterations)

    def to_text(self) -> str:
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},server_key={b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> "ScramCredential":
        fields = attributes(text)
        try:
            return cls(unb64(fields["salt"]), unb64(fields["stored_key"]), unb64(fields["server_key"]),
                       int(fields["iterations"]))
        except (KeyError, ValueError):
            raise ScramError(f"invalid SCRAM credential {text!r}") from None


def client_proof(mechanism: str, salted: bytes, auth_message: bytes) -> bytes:
    key = client_key(mechanism, salted)
    return xor(key, hmac_digest(mechanism, digest(mechanism, key), auth_message))


def verify_proof(mechanism: str, credential: ScramCredential, auth_message: bytes, proof: bytes) -> bool:
    """RFC 5802 §3: ClientKey = proof XOR HMAC(StoredKey, AuthMessage); H(ClientKey) must be StoredKey."""
    signature = hmac_digest(mechanism, credential.stored_key, auth_message)
    if len(proof) != len(signature):
        return False
    return hmac.compare_digest(digest(mechanism, xor(proof, signature)), credential.stored_key)


def server_signature(mechanism: str, server_key_: bytes, auth_message: bytes) -> bytes:
    return hmac_digest(mechanism, server_key_, auth_message)
