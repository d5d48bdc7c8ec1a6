"""Kafka and kbroker with SASL/PLAIN listeners and ACLs on, side by side (the ``secured`` fixture): the users
both know, and the listener settings both take."""

from __future__ import annotations

from kbroker.client.sasl import SaslCredentials
from tests.brokerproc import BrokerProcess
from tests.reference.apache_kafka import SINGLE_NODE, KafkaNode
from tests.reference.differential import Target

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule required"
USERS = {"admin": "admin-secret", "alice": "alice-secret"}


def sasl_settings(port: int) -> dict[str, str]:
    users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    return {"sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                f'{PLAIN_MODULE} username="admin" password="admin-secret" {users};',
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}"}


def secured_pair(tmp_path_factory, extra: dict[str, str] | None = None):
    """Kafka and kbroker with SASL/PLAIN listeners and ACLs on, admin a super user (and ``extra`` settings on
    both): yields their targets."""
    admin = SaslCredentials("PLAIN", "admin", USERS["admin"])
    node = KafkaNode(str(tmp_path_factory.mktemp("secured-kafka")), sasl=admin)
    node.overrides = {
        **SINGLE_NODE, **sasl_settings(node.port),
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{node.port}",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        # (the controller listener is PLAINTEXT inside the one process: its principal is ANONYMOUS)
        "super.users": "User:admin;User:ANONYMOUS", **(extra or {})}
    node.start()
    broker = BrokerProcess(str(tmp_path_factory.mktemp("secured-kbroker") / "data"), {
        **SINGLE_NODE, **sasl_settings(0), "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin", **(extra or {})}, test_overrides=False).start()
    yield [Target("kafka", node.port), Target("kbroker", broker.port)]
    node.stop()
    broker.stop()
