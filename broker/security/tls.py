"""TLS for SSL and SASL_SSL listeners, and for brokers reaching each other over one, with Kafka's PEM settings.

Every key may be given per listener as ``listener.name.<listener lower case>.<key>``, which wins over the
plain key (``BrokerConfig.for_listener``). Keys: ``ssl.keystore.type`` (PEM only), ``ssl.keystore.location``
(a PEM file with the private key and certificate chain) or ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``
inline, ``ssl.key.password``, ``ssl.truststore.location`` or ``ssl.truststore.certificates`` (the CAs trusted for
peers' certificates), ``ssl.client.auth`` (none, requested, required), ``ssl.enabled.protocols``,
``ssl.cipher.suites``, ``ssl.endpoint.identification.algorithm`` (``https``: a broker connecting to another
checks its host name; empty: it does not).

The cryptography is Python's ``ssl`` module (OpenSSL); nothing here does more than configure it.
"""

from __future__ import annotations

import os
import ssl
import tempfile

from kbroker.broker.configuration.config import ConfigError

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(config, listener: str) -> ssl.SSLContext:
    """The context an SSL / SASL_SSL listener accepts with: its own certificate, and the client
    certificates it asks for (``ssl.client.auth``) checked against the truststore."""
    get = config.for_listener(listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(context, get("ssl.enabled.protocols"))
    _ciphers(context, get("ssl.cipher.suites"))
    if not _load_keystore(context, get):
        raise ConfigError(f"listener {listener} uses TLS but has no ssl.keystore.location "
                          f"(or ssl.keystore.key and ssl.keystore.certificate.chain)")
    auth = (get("ssl.client.auth") or "none").lower()
    if auth not in _CLIENT_AUTH:
        raise ConfigError(f"invalid value {auth!r} for ssl.client.auth (none, requested, required)")
    context.verify_mode = _CLIENT_AUTH[auth]
    if auth != "none":
        if not _load_truststore(context, get):
            raise ConfigError(f"ssl.client.auth={auth} on listener {listener} needs ssl.truststore.location")
    return context


def client_context(config, listener: str) -> ssl.SSLContext:
    """The context a broker connects to another's ``listener`` with (inter-broker traffic): the truststore
    checks the other's certificate; the keystore, if any, is this broker's client certificate."""
    get = config.for_listener(listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(context, get("ssl.enabled.protocols"))
    _ciphers(context, get("ssl.cipher.suites"))
    if not _load_truststore(context, get):
        context.load_default_certs()
    _load_keystore(context, get)
    context.check_hostname = (get("ssl.endpoint.identification.algorithm") or "").lower() == "https"
    return context


def _versions(context: ssl.SSLContext, enabled) -> None:
    names = enabled or ["TLSv1.2", "TLSv1.3"]
    unknown = [n for n in names if n not in _VERSIONS]
    if unknown:
        raise ConfigError(f"ssl.enabled.protocols: unsupported {unknown} (TLSv1.2, TLSv1.3)")
    versions = sorted(_VERSIONS[n] for n in names)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]


def _ciphers(context: ssl.SSLContext, suites) -> None:
    if suites:
        try:
            context.set_ciphers(":".join(suites))
        except ssl.SSLError as exc:
            raise ConfigError(f"ssl.cipher.suites: {exc}") from None


def _load_keystore(context: ssl.SSLContext, get) -> bool:
    kind = (get("ssl.keystore.type") or "PEM").upper()
    location, key, chain = get("ssl.keystore.location"), get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
    if not (location or (key and chain)):
        return False
    if kind != "PEM":
        raise ConfigError(f"ssl.keystore.type={kind}: kbroker reads PEM keystores only")
    password = get("ssl.key.password")
    try:
        if location:
            context.load_cert_chain(location, password=password)
        else:
            with _pem_file(chain + "\n" + key) as path:   # ssl loads key material from files only
                context.load_cert_chain(path, password=password)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the keystore {location or '(inline)'}: {exc}") from None
    return True


def _load_truststore(context: ssl.SSLContext, get) -> bool:
    kind = (get("ssl.truststore.type") or "PEM").upper()
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if not (location or inline):
        return False
    if kind != "PEM":
        raise ConfigError(f"ssl.truststore.type={kind}: kbroker reads PEM truststores only")
    try:
        if location:
            context.load_verify_locations(cafile=location)
        else:
            context.load_verify_locations(cadata=inline)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the truststore {location or '(inline)'}: {exc}") from None
    return True


class _pem_file:
    """A private temporary file holding key material for as long as ``ssl`` reads it."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __enter__(self) -> str:
        fd, self.path = tempfile.mkstemp(suffix=".pem")   # created 0600
        with os.fdopen(fd, "w") as f:
            f.write(self.text)
        return self.path

    def __exit__(self, *exc) -> None:
        os.unlink(self.path)
