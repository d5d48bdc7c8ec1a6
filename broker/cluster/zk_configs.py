"""The ``/config`` znodes of Kafka's ZooKeeper layout (and ``/feature``, ``/delegation_token``): each entity's
dynamic configs as ``{"version":1,"config":{...}}``, and the change notifications every broker watches.

    /config/topics/<topic>, /config/brokers/<id> or <default>, /config/users/<user>[/clients/<client>],
    /config/clients/<client>, /config/ips/<ip>, /config/groups/<group>, /config/client-metrics/<name>
    /config/changes/config_change_<seq>               {"version":2,"entity_path":"<kind>/<name>"}
    /feature                                          {"version":1,"features":{...}}
    /delegation_token/tokens/<id>                     a delegation token (ZooKeeper-mode Kafka's JSON)

A write that others must apply is followed by a sequential ``config_change_`` notification naming the entity;
notifications older than Kafka's 15 minutes are purged (every broker has applied them by then). Mixed into
``KafkaZkClient``, whose ``zk`` and ``path`` it uses; blocking kazoo calls, run off the event loop.
"""

from __future__ import annotations

import json
import time

from kazoo.exceptions import NoNodeError

from kbroker.broker.configuration.quotas import QUOTA_KEYS

NOTIFICATION_EXPIRY_S = 15 * 60   # Kafka's changeExpirationMs


def parse_json(data: bytes | None):
    return json.loads(data.decode()) if data else None


def dump_json(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class ZkConfigs:
    def topic_config(self, topic: str) -> dict[str, str]:
        return self._entity_config("topics", topic)

    def set_topic_config(self, topic: str, configs: dict[str, str], notify: bool = True) -> None:
        self._set_entity_config("topics", topic, configs, notify)

    def user_names(self) -> list[str]:
        return sorted(self.zk.get_children(self.path("/config/users")))

    def user_config(self, user: str) -> dict[str, str]:
        """What ``/config/users/<user>`` holds: SCRAM credentials (``SCRAM-SHA-256`` ...) and quota overrides."""
        return self._entity_config("users", user)

    def set_user_scram_credentials(self, user: str, credentials: dict[str, str]) -> None:
        """Replace the user's SCRAM credentials (mechanism -> Kafka's credential text), keeping its other
        configs (quotas), and notify every broker."""
        configs = {k: v for k, v in self.user_config(user).items() if not k.startswith("SCRAM-")}
        self._set_entity_config("users", user, {**configs, **credentials}, notify=True)

    def quota_entities(self) -> list[tuple[tuple, dict[str, str]]]:
        """Every (user, client id, IP) entity with configs: ``/config/users/<u>``, ``/config/users/<u>/clients/<c>``,
        ``/config/clients/<c>`` and ``/config/ips/<ip>`` (``<default>`` names the defaults)."""
        found = [((user, None, None), self.user_config(user)) for user in self.user_names()]
        for user in self.user_names():
            try:
                clients = self.zk.get_children(self.path(f"/config/users/{user}/clients"))
            except NoNodeError:
                continue
            found += [((user, c, None), self._entity_config("users", f"{user}/clients/{c}")) for c in clients]
        found += [((None, c, None), self._entity_config("clients", c))
                  for c in self.zk.get_children(self.path("/config/clients"))]
        try:   # (a cluster made before IP quotas has no /config/ips)
            found += [((None, None, ip), self._entity_config("ips", ip))
                      for ip in self.zk.get_children(self.path("/config/ips"))]
        except NoNodeError:
            pass
        return found

    @staticmethod
    def quota_entity_path(entity: tuple) -> tuple[str, str]:
        user, client, ip = entity
        if ip is not None:
            return "ips", ip
        if user is None:
            return "clients", client
        return ("users", user) if client is None else ("users", f"{user}/clients/{client}")

    def quota_config(self, entity: tuple) -> dict[str, str]:
        return self._entity_config(*self.quota_entity_path(entity))

    def set_quota_config(self, entity: tuple, values: dict[str, str]) -> None:
        """Replace the entity's quota keys, keeping its other configs (a user's SCRAM credentials), and notify."""
        kind, name = self.quota_entity_path(entity)
        kept = {k: v for k, v in self._entity_config(kind, name).items() if k not in QUOTA_KEYS}
        self._set_entity_config(kind, name, {**kept, **values}, notify=True)

    def broker_config(self, entity: str) -> dict[str, str]:
        """``/config/brokers/<id>`` or ``/config/brokers/<default>``: dynamic broker configs."""
        return self._entity_config("brokers", entity)

    def set_broker_config(self, entity: str, configs: dict[str, str]) -> None:
        self._set_entity_config("brokers", entity, configs, notify=True)

    def group_config(self, group: str) -> dict[str, str]:
        """``/config/groups/<group>``: a group's configs (KIP-848/932 GROUP resource)."""
        return self._entity_config("groups", group)

    def group_configs(self) -> dict[str, dict[str, str]]:
        return self.entity_configs("groups")

    def set_group_config(self, group: str, configs: dict[str, str]) -> None:
        self._set_entity_config("groups", group, configs, notify=True)

    def client_metrics(self, name: str) -> dict[str, str]:
        """``/config/client-metrics/<name>``: a client metrics subscription (KIP-714 CLIENT_METRICS resource)."""
        return self._entity_config("client-metrics", name)

    def set_client_metrics(self, name: str, configs: dict[str, str]) -> None:
        self._set_entity_config("client-metrics", name, configs, notify=True)

    def features(self) -> tuple[dict[str, int], int]:
        """``/feature``: the levels UpdateFeatures set, and the node's version as their epoch."""
        try:
            data, stat = self.zk.get(self.path("/feature"))
        except NoNodeError:
            return {}, 0
        return {name: int(level) for name, level in parse_json(data).get("features", {}).items()}, stat.version + 1

    def set_features(self, levels: dict[str, int]) -> None:
        self._write(self.path("/feature"), dump_json({"version": 1, "features": levels}))
        self._announce("feature")

    def entity_configs(self, kind: str) -> dict[str, dict[str, str]]:
        """Every entity of ``/config/<kind>`` with its configs."""
        try:
            names = self.zk.get_children(self.path(f"/config/{kind}"))
        except NoNodeError:
            return {}
        return {name: self._entity_config(kind, name) for name in names}

    def _entity_config(self, kind: str, name: str) -> dict[str, str]:
        try:
            return dict(parse_json(self.zk.get(self.path(f"/config/{kind}/{name}"))[0])["config"])
        except NoNodeError:
            return {}

    def _set_entity_config(self, kind: str, name: str, configs: dict[str, str], notify: bool) -> None:
        self._write(self.path(f"/config/{kind}/{name}"), dump_json({"version": 1, "config": configs}))
        if notify:
            self._announce(f"{kind}/{name}")

    def _write(self, path: str, data: bytes) -> None:
        """``path`` holds ``data`` now, created (with its parents) if it was not there."""
        try:
            self.zk.set(path, data)
        except NoNodeError:
            self.zk.create(path, data, makepath=True)

    def _announce(self, entity_path: str) -> None:
        """The notification every broker applies: a sequential ``config_change_`` naming what changed."""
        self.zk.create(self.path("/config/changes/config_change_"),
                       dump_json({"version": 2, "entity_path": entity_path}), sequence=True)

    def token_ids(self) -> list[str]:
        try:
            return sorted(self.zk.get_children(self.path("/delegation_token/tokens")))
        except NoNodeError:
            return []

    def token(self, token_id: str) -> bytes | None:
        """``/delegation_token/tokens/<id>``: the token's JSON, as ZooKeeper-mode Kafka kept it (None: gone)."""
        try:
            return self.zk.get(self.path(f"/delegation_token/tokens/{token_id}"))[0]
        except NoNodeError:
            return None

    def set_token(self, token_id: str, data: bytes | None) -> None:
        """Write (or with None delete) a token's znode and tell every broker (a config change naming it)."""
        p = self.path(f"/delegation_token/tokens/{token_id}")
        if data is not None:
            self._write(p, data)
        else:
            try:
                self.zk.delete(p)
            except NoNodeError:
                pass   # (gone already: the notification still tells the brokers that have it)
        self._announce(f"delegation_token/{token_id}")

    def config_changes(self, watch=None) -> list[str]:
        return sorted(self.zk.get_children(self.path("/config/changes"), watch=watch))

    def purge_notifications(self, parent: str, names, max_age_s: float = NOTIFICATION_EXPIRY_S) -> set[str]:
        """Delete the change notifications under ``parent`` older than ``max_age_s``, as Kafka's brokers do
        after 15 minutes (every broker has applied them by then); returns the names no longer there."""
        now_ms = time.time() * 1000
        gone = set()
        for name in names:
            path = self.path(f"{parent}/{name}")
            try:
                _, stat = self.zk.get(path)
                if now_ms - stat.ctime < max_age_s * 1000:
                    continue
                self.zk.delete(path)
            except NoNodeError:
                pass
            gone.add(name)
        return gone

    def config_change(self, name: str) -> str | None:
        try:
            return parse_json(self.zk.get(self.path(f"/config/changes/{name}"))[0]).get("entity_path")
        except NoNodeError:
            return None
