"""Signed JWTs for SASL/OAUTHBEARER (KIP-768): Kafka's OAuthBearerValidatorCallbackHandler, the validator for
production, which a listener selects with ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class``.

A token is accepted only if, as Kafka's validator (jose4j underneath) decides:
- it is a JWS signed with RS256/384/512, PS256/384/512, ES256/384/512 or EdDSA (never ``none``) by a key of the
  JSON Web Key Set at ``sasl.oauthbearer.jwks.endpoint.url`` (an https, http or file URL): the key its ``kid``
  names, or without a ``kid`` any key of the set that verifies it;
- it carries ``exp`` and ``iat``, is not expired (``exp`` + ``sasl.oauthbearer.clock.skew.seconds``, 30 s),
  not before its ``nbf``, and expires no sooner than it was issued and became valid;
- its ``aud`` holds one of ``sasl.oauthbearer.expected.audience`` when that is set, and it has no ``aud`` at all
  when it is not; its ``iss`` is ``sasl.oauthbearer.expected.issuer`` when that is set;
- its ``sasl.oauthbearer.sub.claim.name`` claim (sub) is a non-blank string, which names the principal, and the
  scopes of ``sasl.oauthbearer.scope.claim.name`` (scope: one string, or a list of them) are non-blank.
Each of those settings may be set per listener and mechanism (``listener.name.<l>.oauthbearer.<key>``) or per
listener, as Kafka reads them.

The key set is read at start-up (a broker that cannot read it does not start) and again every
``sasl.oauthbearer.jwks.endpoint.refresh.ms`` in a thread of its own; a token naming a ``kid`` the set lacks is
refused and, as in Kafka, makes that thread read the set again at once, so that the client's next attempt finds
a key the provider has just added. Kafka reads it again at most once a minute per missing ``kid``; kbroker at
most every 10 s whatever the ``kid``, so that tokens naming made-up ids cannot make it ask the provider again
and again.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from kbroker.broker.security.oauthbearer import InvalidToken, Token, b64url, b64url_json, number_claim

_HASHES = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
_CURVES = {"P-256": ec.SECP256R1, "P-384": ec.SECP384R1, "P-521": ec.SECP521R1}
_KTY = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}
REFRESH_AT_MOST_EVERY_S = 10.0


def _b64int(text: str) -> int:
    return int.from_bytes(b64url(text), "big")


def public_key(jwk: dict):
    """The cryptography key of one JWK (RSA, EC or OKP Ed25519); ValueError for any other."""
    kty = jwk.get("kty")
    if kty == "RSA":
        return rsa.RSAPublicNumbers(_b64int(jwk["e"]), _b64int(jwk["n"])).public_key()
    if kty == "EC" and jwk.get("crv") in _CURVES:
        return ec.EllipticCurvePublicNumbers(_b64int(jwk["x"]), _b64int(jwk["y"]), _CURVES[jwk["crv"]]()).public_key()
    if kty == "OKP" and jwk.get("crv") == "Ed25519":
        return ed25519.Ed25519PublicKey.from_public_bytes(b64url(jwk["x"]))
    raise ValueError(f"unsupported key type {kty} {jwk.get('crv', '')}")


def verify(alg: str, key, signature: bytes, signed: bytes) -> bool:
    try:
        if alg == "EdDSA":
            key.verify(signature, signed)
        elif alg[:2] in ("RS", "PS"):
            digest = _HASHES[alg[2:]]()
            pad = padding.PKCS1v15() if alg[:2] == "RS" else \
                padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
            key.verify(signature, signed, pad, digest)
        else:   # ES*: the JWS signature is r || s, each the curve's size
            half = len(signature) // 2
            der = encode_dss_signature(int.from_bytes(signature[:half], "big"),
                                       int.from_bytes(signature[half:], "big"))
            key.verify(der, signed, ec.ECDSA(_HASHES[alg[2:]]()))
        return True
    except (InvalidSignature, ValueError, TypeError):
        return False


def read_key_set(url: str, timeout: float = 10.0) -> list[tuple[dict, object]]:
    """Every usable (JWK, key) of the set at ``url``; raises OSError or ValueError."""
    with urllib.request.urlopen(url, timeout=timeout) as answer:   # (file: URLs too)
        document = json.loads(answer.read())
    keys = []
    for jwk in document.get("keys", []) if isinstance(document, dict) else []:
        if jwk.get("use", "sig") != "sig":
            continue
        try:
            keys.append((jwk, public_key(jwk)))
        except (KeyError, ValueError):
            continue   # (a key of a kind kbroker does not verify with: the others still serve)
    return keys


class JwksValidator:
    def __init__(self, setting, clock=time.monotonic) -> None:
        """``setting(key)``: the listener's value of a ``sasl.oauthbearer.*`` key. Raises ValueError."""
        self.url = setting("sasl.oauthbearer.jwks.endpoint.url")
        if not self.url:
            raise ValueError("sasl.oauthbearer.jwks.endpoint.url is required by OAuthBearerValidatorCallbackHandler")
        self.audiences = set(setting("sasl.oauthbearer.expected.audience") or [])
        self.issuer = setting("sasl.oauthbearer.expected.issuer")
        self.sub_claim = setting("sasl.oauthbearer.sub.claim.name")
        self.scope_claim = setting("sasl.oauthbearer.scope.claim.name")
        self.skew_ms = setting("sasl.oauthbearer.clock.skew.seconds") * 1000
        self.refresh_s = setting("sasl.oauthbearer.jwks.endpoint.refresh.ms") / 1000
        self.clock = clock
        try:
            self.keys = read_key_set(self.url)
        except (OSError, ValueError) as exc:
            raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url {self.url}: {exc}") from None
        self._wake = threading.Event()
        self._stopped = False
        self._last_read = clock()
        self._thread = threading.Thread(target=self._refresh, name="jwks-refresh", daemon=True)
        self._thread.start()

    def _refresh(self) -> None:
        while not self._stopped:
            self._wake.wait(self.refresh_s)
            self._wake.clear()
            if self._stopped:
                return
            try:
                self.keys = read_key_set(self.url)   # (one assignment: a validation reads the old or the new)
            except (OSError, ValueError):
                pass   # the set keeps serving; the next refresh tries again
            self._last_read = self.clock()

    def close(self) -> None:
        self._stopped = True
        self._wake.set()

    def validate(self, value: str, now_ms: int) -> Token:
        parts = value.split(".")
        if len(parts) != 3 or not parts[2]:
            raise InvalidToken("not a signed JWS compact serialization")
        header, claims = b64url_json(parts[0], "header"), b64url_json(parts[1], "claims")
        alg = header.get("alg")
        if not isinstance(alg, str) or _KTY.get(alg[:2]) is None or (alg[:2] != "Ed" and alg[2:] not in _HASHES) \
                or (alg[:2] == "Ed" and alg != "EdDSA"):
            raise InvalidToken(f"algorithm {alg} is not allowed")
        kid = header.get("kid")
        candidates = [key for jwk, key in self.keys if jwk.get("kty") == _KTY[alg[:2]]
                      and (kid is None or jwk.get("kid") == kid) and jwk.get("alg", alg) == alg]
        if not candidates and kid is not None and self.clock() - self._last_read >= REFRESH_AT_MOST_EVERY_S:
            self._wake.set()   # a key the set did not have when last read: read it again
        signed = f"{parts[0]}.{parts[1]}".encode()
        try:
            signature = b64url(parts[2])
        except ValueError:
            raise InvalidToken("malformed signature") from None
        if not any(verify(alg, key, signature, signed) for key in candidates):
            raise InvalidToken("no key of the set verifies the signature")
        return self._checked(claims, now_ms)

    def _checked(self, claims: dict, now_ms: int) -> Token:
        for name in ("exp", "iat"):
            number_claim(claims, name, required=True)
        if now_ms >= claims["exp"] * 1000 + self.skew_ms:
            raise InvalidToken("expired")
        nbf = claims.get("nbf")
        if isinstance(nbf, (int, float)) and nbf * 1000 - self.skew_ms > now_ms:
            raise InvalidToken("not yet valid")
        if claims["exp"] < claims["iat"] or isinstance(nbf, (int, float)) and claims["exp"] < nbf:
            raise InvalidToken("expires before it was issued, or before it is valid")
        audience = claims.get("aud")
        audience = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else None
        if audience is not None and not self.audiences or self.audiences and not self.audiences & set(audience or []):
            raise InvalidToken("audience")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise InvalidToken("issuer")
        subject = claims.get(self.sub_claim)
        if not isinstance(subject, str) or not subject.strip():
            raise InvalidToken(f"no {self.sub_claim} claim")
        raw = claims.get(self.scope_claim)   # (a string is one scope here, a list many: Kafka's reading)
        scope = frozenset([raw] if isinstance(raw, str) else raw if isinstance(raw, list) else [])
        if any(not isinstance(s, str) or not s.strip() for s in scope):
            raise InvalidToken("a blank scope")
        return Token(subject.strip(), int(claims["exp"] * 1000), scope)
