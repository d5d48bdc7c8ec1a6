"""What each listener asks of a connection before serving it: its security protocol, TLS context, the rules
that name a client certificate's holder and the SASL mechanisms it offers; and how this broker connects to
the others (TLS context and SASL credentials on the inter-broker listener)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from functools import partial

from kbroker.broker.configuration.config import ConfigError, parse_value
from kbroker.broker.security.jwks import JwksValidator
from kbroker.broker.security.oauthbearer import OAuthBearerExchange, UnsecuredValidator
from kbroker.broker.security.principal import PrincipalError, parse_rules
from kbroker.broker.security.sasl import SaslSession
from kbroker.broker.security.tls import client_context, server_context
from kbroker.client.jaas import JaasError, parse_jaas, plain_users
from kbroker.client.sasl import MECHANISMS, SaslCredentials

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


# What a listener may offer: kbroker's own mechanisms (it speaks them to other brokers too) and OAUTHBEARER.
SERVER_MECHANISMS = (*MECHANISMS, "OAUTHBEARER")
VALIDATOR_CLASSES = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                     "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")


@dataclass
class ListenerSasl:
    mechanisms: list[str]
    plain_users: dict[str, str]
    reauth_ms: int
    oauth_validator: object = None   # UnsecuredValidator or JwksValidator, where OAUTHBEARER is offered


@dataclass
class ListenerSecurity:
    name: str
    protocol: str
    tls: ssl.SSLContext | None = None
    principal_rules: list = field(default_factory=list)
    sasl: ListenerSasl | None = None

    def close(self) -> None:
        if self.sasl is not None and hasattr(self.sasl.oauth_validator, "close"):
            self.sasl.oauth_validator.close()

    def sasl_session(self, broker) -> SaslSession:
        return SaslSession(self.sasl.mechanisms, self.sasl.plain_users, broker.credentials.lookup,
                           self.sasl.reauth_ms, oauthbearer=partial(OAuthBearerExchange, self.sasl.oauth_validator),
                           token_lookup=broker.tokens.lookup)


def listener_security(config) -> dict[str, ListenerSecurity]:
    """Every listener's security, built at start-up so that a bad setting stops the broker with its name."""
    result = {}
    for name, _, _ in config.listeners:
        protocol = config.security_protocol(name)
        if protocol not in PROTOCOLS:
            raise ConfigError(f"listener {name}: unknown security protocol {protocol} ({', '.join(PROTOCOLS)})")
        try:
            rules = parse_rules(config.for_listener(name)("ssl.principal.mapping.rules") or "DEFAULT")
        except PrincipalError as exc:
            raise ConfigError(str(exc)) from None
        tls = server_context(config, name) if protocol.endswith("SSL") else None
        sasl = _listener_sasl(config, name) if protocol.startswith("SASL") else None
        result[name] = ListenerSecurity(name, protocol, tls, rules, sasl)
    return result


def _listener_sasl(config, name: str) -> ListenerSasl:
    get = config.for_listener(name)
    mechanisms = get("sasl.enabled.mechanisms")
    unknown = [m for m in mechanisms if m not in SERVER_MECHANISMS]
    if unknown or not mechanisms:
        raise ConfigError(f"listener {name}: sasl.enabled.mechanisms {','.join(mechanisms) or '(empty)'}: kbroker "
                          f"offers {', '.join(SERVER_MECHANISMS)}")
    users = plain_users(jaas_options(config, name, "PLAIN", required=True)) if "PLAIN" in mechanisms else {}
    validator = oauth_validator(config, name) if "OAUTHBEARER" in mechanisms else None
    return ListenerSasl(list(mechanisms), users, get("connections.max.reauth.ms"), validator)


def oauth_validator(config, listener: str):
    """The listener's OAUTHBEARER validator: Kafka's default unsecured one (its options from the listener's
    JAAS entry, which Kafka requires), or the JWKS one that
    ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`` names."""
    options = jaas_options(config, listener, "OAUTHBEARER", required=True)
    prefix = f"listener.name.{listener.lower()}."
    handler = config.values.get(prefix + "oauthbearer.sasl.server.callback.handler.class")
    try:
        if handler is None:
            return UnsecuredValidator(options)
        if handler not in VALIDATOR_CLASSES:
            raise ValueError(f"{prefix}oauthbearer.sasl.server.callback.handler.class {handler}: kbroker offers "
                             f"Kafka's {VALIDATOR_CLASSES[0]} or, without the setting, the unsecured validator")

        per_listener = config.for_listener(listener)

        def setting(key: str):   # (Kafka's order: per listener and mechanism, per listener, the broker's)
            value = config.values.get(prefix + "oauthbearer." + key)   # (kept as text: no definition names it)
            return parse_value(key, value) if value is not None else per_listener(key)
        return JwksValidator(setting)
    except ValueError as exc:
        raise ConfigError(f"listener {listener}: OAUTHBEARER: {exc}") from None


def jaas_options(config, listener: str, mechanism: str, required: bool) -> dict[str, str]:
    """The options of ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (Kafka's broker-side key)."""
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = config.values.get(key)
    if text is None:
        if required:
            raise ConfigError(f"listener {listener}: {mechanism} needs {key}")
        return {}
    try:
        return parse_jaas(text)
    except JaasError as exc:
        raise ConfigError(f"{key}: {exc}") from None


def inter_broker_tls(config) -> ssl.SSLContext | None:
    """The TLS context brokers reach each other's inter-broker listener with (None over plaintext)."""
    name = config.inter_broker_listener
    return client_context(config, name) if config.security_protocol(name).endswith("SSL") else None


def inter_broker_sasl(config) -> SaslCredentials | None:
    """What this broker authenticates with on the inter-broker listener: ``sasl.mechanism.inter.broker.protocol``
    and the username and password of that listener's JAAS config for it (None unless the listener is SASL)."""
    name = config.inter_broker_listener
    if not config.security_protocol(name).startswith("SASL"):
        return None
    mechanism = config["sasl.mechanism.inter.broker.protocol"]
    if mechanism not in MECHANISMS:
        raise ConfigError(f"the inter-broker listener {name} is {config.security_protocol(name)}: set "
                          f"sasl.mechanism.inter.broker.protocol (now {mechanism}) to one of {', '.join(MECHANISMS)}")
    options = jaas_options(config, name, mechanism, required=True)
    if "username" not in options or "password" not in options:
        raise ConfigError(f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config: the inter-broker "
                          "listener's entry needs username and password (what this broker logs in with)")
    return SaslCredentials(mechanism, options["username"], options["password"])
