"""A client's security settings in Kafka's client config names -> ``KafkaConnection.open``'s arguments.

``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); TLS from
``ssl.truststore.location`` or ``ssl.ca.location`` (PEM), a client
certificate from ``ssl.keystore.location`` (PEM holding certificate and key)
or ``ssl.certificate.location`` + ``ssl.key.location``; SASL from
``sasl.mechanism`` and ``sasl.jaas.config`` (``username=".." password=".."``)
or librdkafka's ``sasl.username`` / ``sasl.password``. What the console tools'
``--command-config`` file holds, as ``kafka-topics --command-config`` reads it.
"""

from __future__ import annotations

import ssl

from kbroker.client.jaas import parse_jaas
from kbroker.client.sasl import MECHANISMS, SaslCredentials


class SecurityConfigError(ValueError):
    pass


def connect_options(properties: dict[str, str]) -> dict:
    protocol = properties.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise SecurityConfigError(f"security.protocol {protocol} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, "
                                  "SASL_SSL")
    options: dict = {"ssl": None, "sasl": None}
    if protocol.endswith("SSL"):
        context = ssl.create_default_context(
            cafile=properties.get("ssl.truststore.location") or properties.get("ssl.ca.location"))
        if properties.get("ssl.endpoint.identification.algorithm", "https") == "":
            context.check_hostname = False
        cert = properties.get("ssl.keystore.location") or properties.get("ssl.certificate.location")
        if cert:
            context.load_cert_chain(cert, properties.get("ssl.key.location"),
                                    properties.get("ssl.key.password"))
        options["ssl"] = context
    if protocol.startswith("SASL"):
        mechanism = properties.get("sasl.mechanism", "GSSAPI")
        jaas = parse_jaas(properties["sasl.jaas.config"]) if properties.get("sasl.jaas.config") else {}
        username = jaas.get("username", properties.get("sasl.username"))
        password = jaas.get("password", properties.get("sasl.password"))
        if mechanism not in MECHANISMS or username is None or password is None:
            raise SecurityConfigError("SASL needs sasl.mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 and a "
                                      "username and password (sasl.jaas.config, or sasl.username/sasl.password)")
        options["sasl"] = SaslCredentials(mechanism, username, password)
    return options
