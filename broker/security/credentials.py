"""The SCRAM credentials this broker verifies against: user -> mechanism -> ``ScramCredential``.

The metadata store is where they live (ZooKeeper ``/config/users/<user>`` in a
cluster, as Kafka keeps them, the local store otherwise), in Kafka's text form;
this cache is what authentication reads, kept current by the store's loads and
change notifications. It never holds a password.
"""

from __future__ import annotations

import structlog

from kbroker.protocol.scram import ScramCredential, ScramError

log = structlog.get_logger("broker.security.credentials")


class ScramCredentialCache:
    def __init__(self) -> None:
        self.users: dict[str, dict[str, ScramCredential]] = {}

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)

    def replace(self, user: str, texts: dict[str, str]) -> None:
        """The user's credentials are now ``texts`` (mechanism -> Kafka's credential text; empty: none)."""
        parsed = {}
        for mechanism, text in texts.items():
            try:
                parsed[mechanism] = ScramCredential.from_text(text)
            except ScramError as exc:   # written by hand into ZooKeeper, say: that one does not authenticate
                log.warning("scram_credential_unreadable", user=user, mechanism=mechanism, error=str(exc))
        if parsed:
            self.users[user] = parsed
        else:
            self.users.pop(user, None)

    def texts(self, user: str) -> dict[str, str]:
        return {mechanism: c.to_text() for mechanism, c in self.users.get(user, {}).items()}
