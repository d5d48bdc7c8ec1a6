"""What each listener asks of a connection before serving it: its security protocol, TLS context and the
rules that name a client certificate's holder; and how this broker connects to the others."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from broker.config import ConfigError
from broker.security.principal import PrincipalError, parse_rules
from broker.security.tls import client_context, server_context

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass
class ListenerSecurity:
    name: str
    protocol: str
    tls: ssl.SSLContext | None = None
    principal_rules: list = field(default_factory=list)


def listener_security(config) -> dict[str, ListenerSecurity]:
    """Every listener's security, built at start-up so that a bad setting stops the broker with its name."""
    result = {}
    for name, _, _ in config.listeners:
        protocol = config.security_protocol(name)
        if protocol not in PROTOCOLS:
            raise ConfigError(f"listener {name}: unknown security protocol {protocol} ({', '.join(PROTOCOLS)})")
        if protocol.startswith("SASL"):
            raise ConfigError(f"listener {name}: {protocol} needs SASL, which this kbroker does not offer yet")
        try:
            rules = parse_rules(config.for_listener(name)("ssl.principal.mapping.rules") or "DEFAULT")
        except PrincipalError as exc:
            raise ConfigError(str(exc)) from None
        tls = server_context(config, name) if protocol.endswith("SSL") else None
        result[name] = ListenerSecurity(name, protocol, tls, rules)
    return result


def inter_broker_tls(config) -> ssl.SSLContext | None:
    """The TLS context brokers reach each other's inter-broker listener with (None over plaintext)."""
    name = config.inter_broker_listener
    return client_context(config, name) if config.security_protocol(name).endswith("SSL") else None
