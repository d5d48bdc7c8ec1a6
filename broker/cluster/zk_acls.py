"""A cluster's ACLs in ZooKeeper, in Kafka's layout, and the notifications that keep every broker's cache current.

* ``/kafka-acl/<ResourceType>/<name>``: the LITERAL patterns;
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``: the PREFIXED ones.
  Each holds ``{"version": 1, "acls": [{"principal", "permissionType",
  "operation", "host"}]}`` and is only ever rewritten by a conditional
  update on its znode version, so two brokers changing the same resource at
  once both land (the loser reads again and retries).
* After each change a sequential ``acl_changes_`` node names the resource:
  ``/kafka-acl-changes`` with ``<ResourceType>:<name>`` for literal patterns,
  ``/kafka-acl-extended-changes`` with a JSON event for the others. Every
  broker watches both and reloads the named resource, so an ACL applies
  cluster-wide within a ZooKeeper round trip, with no restart.
"""

from __future__ import annotations

import asyncio
import json

import structlog
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from kbroker.protocol.acls import (LITERAL, PATTERN_TYPES, PREFIXED, RESOURCE_TYPES, AclBinding, operation_code,
                           pattern_code, permission_code, resource_type_code)

log = structlog.get_logger("broker.cluster.zk_acls")

ROOTS = {LITERAL: "/kafka-acl", PREFIXED: "/kafka-acl-extended/prefixed"}
CHANGES = {LITERAL: "/kafka-acl-changes", PREFIXED: "/kafka-acl-extended-changes"}
CHANGE_PREFIX = "acl_changes_"

Resource = tuple[int, int, str]   # (resource type, pattern type, name)


def encode_entries(acls) -> bytes:
    entries = sorted((a.entry_json() for a in acls), key=lambda e: json.dumps(e, sort_keys=True))
    return json.dumps({"version": 1, "acls": entries}).encode()


def decode_entries(resource: Resource, data: bytes | None) -> set[AclBinding]:
    rtype, ptype, name = resource
    return {AclBinding(rtype, name, ptype, e["principal"], e["host"], operation_code(e["operation"]),
                       permission_code(e["permissionType"]))
            for e in (json.loads(data).get("acls", []) if data else [])}


def _change_data(resource: Resource) -> bytes:
    rtype, ptype, name = resource
    if ptype == LITERAL:
        return f"{RESOURCE_TYPES[rtype]}:{name}".encode()
    return json.dumps({"version": 1, "resourceType": RESOURCE_TYPES[rtype], "name": name,
                       "patternType": PATTERN_TYPES[ptype]}).encode()


def _change_resource(ptype: int, data: bytes) -> Resource:
    if ptype == LITERAL:
        rtype, _, name = data.decode().partition(":")
        return resource_type_code(rtype), LITERAL, name
    event = json.loads(data)
    return resource_type_code(event["resourceType"]), pattern_code(event["patternType"]), event["name"]


class ZkAclStore:
    """The ZooKeeper calls (blocking: run them with ``ClusterMember.zk_call``)."""

    def __init__(self, zk) -> None:
        self.zk = zk   # a KafkaZkClient

    def _path(self, resource: Resource) -> str:
        rtype, ptype, name = resource
        return self.zk.path(f"{ROOTS[ptype]}/{RESOURCE_TYPES[rtype]}/{name}")

    def ensure_paths(self) -> None:
        for p in (*ROOTS.values(), *CHANGES.values()):
            self.zk.zk.ensure_path(self.zk.path(p))

    def load_all(self) -> list[AclBinding]:
        found: list[AclBinding] = []
        kazoo = self.zk.zk
        for ptype, root in ROOTS.items():
            for type_name in kazoo.get_children(self.zk.path(root)):
                if type_name not in RESOURCE_TYPES.values():
                    continue
                rtype = resource_type_code(type_name)
                for name in kazoo.get_children(self.zk.path(f"{root}/{type_name}")):
                    found.extend(self.read(((rtype, ptype, name)))[0])
        return found

    def read(self, resource: Resource) -> tuple[set[AclBinding], int]:
        """The resource's ACLs and its znode version (-1: no znode)."""
        try:
            data, stat = self.zk.zk.get(self._path(resource))
        except NoNodeError:
            return set(), -1
        return decode_entries(resource, data), stat.version

    def change(self, resource: Resource, add: set[AclBinding], remove: set[AclBinding]) -> set[AclBinding]:
        """Add and remove ACLs of one resource by conditional update; returns what it now has."""
        kazoo = self.zk.zk
        path = self._path(resource)
        while True:
            current, version = self.read(resource)
            wanted = (current | add) - remove
            if wanted == current:
                return current
            try:
                if version < 0:
                    kazoo.create(path, encode_entries(wanted), makepath=True)
                elif wanted:
                    kazoo.set(path, encode_entries(wanted), version=version)
                else:
                    kazoo.delete(path, version=version)
            except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
                continue   # someone else changed it meanwhile: read again
            kazoo.create(self.zk.path(f"{CHANGES[resource[1]]}/{CHANGE_PREFIX}"), _change_data(resource),
                         sequence=True)
            return wanted

    def changes(self, watch=None) -> list[tuple[int, str]]:
        found = []
        for ptype, path in CHANGES.items():
            found.extend((ptype, name) for name in self.zk.zk.get_children(self.zk.path(path), watch=watch))
        return sorted(found)

    def changed_resource(self, ptype: int, name: str) -> Resource | None:
        try:
            data, _ = self.zk.zk.get(self.zk.path(f"{CHANGES[ptype]}/{name}"))
        except NoNodeError:
            return None
        try:
            return _change_resource(ptype, data)
        except (ValueError, KeyError) as exc:
            log.warning("acl_change_unreadable", node=name, error=str(exc))
            return None


class ClusterAcls:
    """The broker's side: load at start, write through ZooKeeper, apply every broker's notifications."""

    def __init__(self, member, authorizer) -> None:
        self.member = member
        self.authorizer = authorizer
        self.store = ZkAclStore(member.zk)
        self._seen: set[tuple[int, str]] = set()
        self._applying = asyncio.Lock()   # one pass at a time, so an older read never overwrites a newer one

    async def start(self, resume: bool = False) -> None:
        """Load every ACL and watch for changes (again after a new ZooKeeper session: its watches are new)."""
        await self.member.zk_call(self.store.ensure_paths)
        self._seen = set(await self.member.zk_call(self.store.changes, self._fire))
        self.authorizer.load(await self.member.zk_call(self.store.load_all))
        log.info("acls_loaded", count=len(self.authorizer.bindings()), resumed=resume)

    async def change(self, resource: Resource, add: set[AclBinding], remove: set[AclBinding]) -> None:
        now = await self.member.zk_call(self.store.change, resource, add, remove)
        self.authorizer.replace(*resource, now)   # this broker at once; the others from the notification

    def _fire(self, _event) -> None:   # kazoo's thread
        self.member.loop.call_soon_threadsafe(lambda: self.member.spawn(self._apply_changes()))

    async def _apply_changes(self) -> None:
        async with self._applying:
            await self._apply_new_changes()

    async def _apply_new_changes(self) -> None:
        for change in await self.member.zk_call(self.store.changes, self._fire):
            if change in self._seen:
                continue
            self._seen.add(change)
            resource = await self.member.zk_call(self.store.changed_resource, *change)
            if resource is None:
                continue
            acls, _ = await self.member.zk_call(self.store.read, resource)
            self.authorizer.replace(*resource, acls)
            log.info("acls_changed", resource=f"{RESOURCE_TYPES[resource[0]]}:{PATTERN_TYPES[resource[1]]}:"
                                              f"{resource[2]}", count=len(acls))
        for ptype, path in CHANGES.items():
            names = sorted(name for p, name in self._seen if p == ptype)
            gone = await self.member.zk_call(self.member.zk.purge_notifications, path, names)
            self._seen -= {(ptype, name) for name in gone}
