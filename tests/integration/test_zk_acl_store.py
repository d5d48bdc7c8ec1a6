"""The ZooKeeper side of ACLs and change notifications against a real ZooKeeper: Kafka's znode layout and JSON
(what zkCli.sh and Kafka's own tools read), conditional updates that let two writers of one resource both land,
and notifications purged once they are older than Kafka's 15 minutes."""

from __future__ import annotations

import json

import pytest

from kbroker.broker.cluster.zk_acls import ZkAclStore, decode_entries
from kbroker.broker.cluster.zk_client import KafkaZkClient
from kbroker.broker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.protocol.acls import ALLOW, DENY, LITERAL, PREFIXED, READ, TOPIC, WRITE, AclBinding

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def zk(tmp_path_factory):
    server = ZooKeeperServer(str(tmp_path_factory.mktemp("zk"))).start()
    client = KafkaZkClient(server.connect + "/kbroker")
    client.start()
    yield client
    client.stop()
    server.stop()


def test_acls_are_stored_in_kafkas_layout_with_kafkas_notifications(zk):
    store = ZkAclStore(zk)
    store.ensure_paths()
    read = AclBinding(TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW)
    deny = AclBinding(TOPIC, "pay-", PREFIXED, "User:bob", "10.0.0.1", WRITE, DENY)
    assert store.change(read.resource, {read}, set()) == {read}
    assert store.change(deny.resource, {deny}, set()) == {deny}
    data, _ = zk.zk.get("/kbroker/kafka-acl/Topic/orders")
    assert json.loads(data) == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                                        "operation": "Read", "host": "*"}]}
    assert decode_entries(deny.resource, zk.zk.get("/kbroker/kafka-acl-extended/prefixed/Topic/pay-")[0]) == {deny}
    literal = [zk.zk.get(f"/kbroker/kafka-acl-changes/{n}")[0] for n in zk.zk.get_children("/kbroker/kafka-acl-changes")]
    assert b"Topic:orders" in literal
    extended = [json.loads(zk.zk.get(f"/kbroker/kafka-acl-extended-changes/{n}")[0])
                for n in zk.zk.get_children("/kbroker/kafka-acl-extended-changes")]
    assert {"version": 1, "resourceType": "Topic", "name": "pay-", "patternType": "PREFIXED"} in extended
    assert sorted(store.load_all(), key=str) == sorted([read, deny], key=str)
    # The last ACL of a resource removed: its znode goes.
    assert store.change(read.resource, set(), {read}) == set()
    assert not zk.zk.exists("/kbroker/kafka-acl/Topic/orders")


def test_a_writer_whose_read_is_stale_retries_and_both_changes_land(zk):
    store = ZkAclStore(zk)
    store.ensure_paths()
    first = AclBinding(TOPIC, "shared", LITERAL, "User:a", "*", READ, ALLOW)
    second = AclBinding(TOPIC, "shared", LITERAL, "User:b", "*", READ, ALLOW)
    store.change(first.resource, {first}, set())
    real_read = store.read
    calls = []

    def stale_once(resource):   # the first read misses a change another broker makes right after it
        found = real_read(resource)
        if not calls:
            calls.append(1)
            other = ZkAclStore(zk)
            other.change(resource, {AclBinding(TOPIC, "shared", LITERAL, "User:c", "*", READ, ALLOW)}, set())
        return found

    store.read = stale_once
    now = store.change(second.resource, {second}, set())
    assert {a.principal for a in now} == {"User:a", "User:b", "User:c"}


def test_notifications_older_than_the_expiry_are_purged(zk):
    for i in range(3):
        zk.zk.create("/kbroker/config/changes/config_change_", b'{"version":2,"entity_path":"topics/t"}',
                     sequence=True)
    names = zk.config_changes()
    assert zk.purge_notifications("/config/changes", names) == set()          # young: kept
    assert zk.purge_notifications("/config/changes", names, max_age_s=0) == set(names)
    assert zk.config_changes() == []
