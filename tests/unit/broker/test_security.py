"""Principals from certificates (RFC 2253 names, Kafka's mapping rules) and the listener security settings."""

import pytest

from kbroker.broker.configuration.config import BrokerConfig, ConfigError
from kbroker.broker.security.listeners import inter_broker_tls, listener_security
from kbroker.broker.security.principal import (ANONYMOUS, PrincipalError, apply_rules, distinguished_name, parse_rules,
                                       tls_principal)
from tests.tls import make_pki

# getpeercert()'s subject lists the RDNs least specific first.
ALICE = {"subject": ((("countryName", "US"),), (("organizationName", "acme"),),
                     (("organizationalUnitName", "eng"),), (("commonName", "alice"),))}


def test_the_name_is_rfc_2253_most_specific_first_with_special_characters_escaped():
    assert distinguished_name(ALICE) == "CN=alice,OU=eng,O=acme,C=US"
    odd = {"subject": ((("organizationName", "Smith, Jones + Co"),), (("commonName", " #lead"),))}
    assert distinguished_name(odd) == "CN=\\ #lead,O=Smith\\, Jones \\+ Co"
    multi = {"subject": ((("commonName", "a"), ("userId", "7")),)}
    assert distinguished_name(multi) == "CN=a+UID=7"


@pytest.mark.parametrize("rules, expected", [
    ("DEFAULT", "CN=alice,OU=eng,O=acme,C=US"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=alice,OU=eng,O=acme,C=US"),   # no match: DEFAULT
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/U", "ALICE@ENG"),
    ("RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L", "alice"),
    ("RULE:^CN=(.*?),OU=eng.*$/$1/, RULE:^CN=(.*?),.*$/other-$1/", "alice"),          # the first match wins
    ("RULE:^CN=([^,]*),.*$/svc\\/$1/", "svc/alice"),                                    # an escaped slash
])
def test_mapping_rules_as_kafka_documents_them(rules, expected):
    assert apply_rules(parse_rules(rules), distinguished_name(ALICE)) == expected


def test_a_name_no_rule_matches_is_refused_and_a_malformed_rule_is_an_error():
    with pytest.raises(PrincipalError):
        apply_rules(parse_rules("RULE:^CN=bob,.*$/bob/"), distinguished_name(ALICE))
    with pytest.raises(PrincipalError):
        parse_rules("RULE:^CN=(.*)$/$1/,NONSENSE")


def test_no_certificate_is_the_anonymous_user():
    assert tls_principal(None, parse_rules("DEFAULT")) == ANONYMOUS == "User:ANONYMOUS"
    assert tls_principal(ALICE, parse_rules("DEFAULT")) == "User:CN=alice,OU=eng,O=acme,C=US"


def test_per_listener_settings_win_and_list_defaults_are_lists():
    config = BrokerConfig.from_dict({"ssl.client.auth": "none", "listener.name.internal.ssl.client.auth": "required"})
    assert config.for_listener("INTERNAL")("ssl.client.auth") == "required"
    assert config.for_listener("EXTERNAL")("ssl.client.auth") == "none"
    assert config.get("ssl.enabled.protocols") == ["TLSv1.2", "TLSv1.3"]
    assert config.security_protocol("SASL_SSL") == "SASL_SSL"


def test_listener_security_is_checked_at_start(tmp_path):
    pki = make_pki(str(tmp_path))
    ok = BrokerConfig.from_dict({"listeners": "PLAIN://:0,SECURE://:0",
                                 "listener.security.protocol.map": "PLAIN:PLAINTEXT,SECURE:SSL",
                                 "inter.broker.listener.name": "SECURE",
                                 "listener.name.secure.ssl.keystore.location": pki.broker,
                                 "ssl.truststore.location": pki.ca})
    security = listener_security(ok)
    assert security["PLAIN"].tls is None and security["SECURE"].tls is not None
    assert inter_broker_tls(ok).check_hostname
    for bad, message in [
        ({"listeners": "SSL://:0"}, "no ssl.keystore.location"),
        ({"listeners": "SSL://:0", "ssl.keystore.location": str(tmp_path / "missing.pem")}, "cannot load"),
        ({"listeners": "SSL://:0", "ssl.keystore.location": pki.broker, "ssl.keystore.type": "JKS"}, "PEM"),
        ({"listeners": "SSL://:0", "ssl.keystore.location": pki.broker, "ssl.client.auth": "maybe"}, "client.auth"),
        ({"listeners": "SSL://:0", "ssl.keystore.location": pki.broker, "ssl.enabled.protocols": "SSLv3"},
         "unsupported"),
        ({"listeners": "OTHER://:0"}, "listener.security.protocol.map"),
        ({"listeners": "SASL_PLAINTEXT://:0"}, "SASL"),
    ]:
        with pytest.raises(ConfigError, match=message):
            listener_security(BrokerConfig.from_dict(bad))
