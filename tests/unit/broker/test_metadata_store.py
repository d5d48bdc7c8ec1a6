"""The single broker's metadata store: every change is on disk when it returns, as one journal line; a store
loaded after a crash (no clean stop) replays the journal over the snapshot; a clean stop folds it in; and the
snapshot is rewritten once per many changes, not at each one."""

from __future__ import annotations

import os

from kbroker.broker import metadata
from kbroker.broker.metadata import JOURNAL_FILE, STORE_FILE, LocalMetadataStore
from kbroker.protocol.acls import AclBinding


def _acl(name: str) -> AclBinding:
    return AclBinding(2, name, 3, "User:alice", "*", 3, 3)   # (topic, literal, READ, ALLOW)


def _changed(store: LocalMetadataStore) -> None:
    """One change of every kind the store persists."""
    store.create_topic("kept", 3, 1, {"retention.ms": "1000"})
    store.create_topic("gone", 1, 1, {})
    store.delete_topic("gone")
    store.set_partitions("kept", 5)
    store.set_configs("kept", {"cleanup.policy": "compact"})
    store.set_user_credentials("alice", {"SCRAM-SHA-256": "text"})
    store.set_user_credentials("bob", {"SCRAM-SHA-256": "text"})
    store.set_user_credentials("bob", {})
    store.set_token("t1", '{"owner": "alice"}')
    store.set_quotas(("alice", None, None), {"producer_byte_rate": 1024.0})
    store.set_broker_configs("<default>", {"log.retention.ms": "5000"})
    store.set_group_configs("g", {"share.auto.offset.reset": "earliest"})
    store.set_client_metrics("sub", {"interval.ms": "1000"})
    store.set_features({"share.version": 1})
    store.set_acls([_acl("kept"), _acl("other")])
    store.set_resource_acls(_acl("third").resource, [_acl("third")])
    store.set_resource_acls(_acl("other").resource, [])


def _state(store: LocalMetadataStore) -> dict:
    return {"topics": {n: (t.topic_id, t.partitions, t.replication_factor, t.configs) for n, t in store.topics.items()},
            "users": store.users, "tokens": store.tokens, "quotas": store.quotas,
            "broker_configs": store.broker_configs, "group_configs": store.group_configs,
            "client_metrics": store.client_metrics, "features": (store.features, store.features_epoch),
            "acls": store.acls}


def test_every_change_survives_a_crash_through_the_journal_and_a_clean_stop_through_the_snapshot(tmp_path):
    directory = str(tmp_path)
    store = LocalMetadataStore(directory, 0)
    _changed(store)
    expected = _state(store)
    assert expected["topics"]["kept"][1:] == (5, 1, {"cleanup.policy": "compact"}) and "gone" not in expected["topics"]
    assert expected["quotas"] == {("alice", None, None): {"producer_byte_rate": 1024.0}}
    assert not os.path.exists(os.path.join(directory, STORE_FILE))   # (all of it in the journal so far)
    assert _state(LocalMetadataStore(directory, 0)) == expected      # no clean stop: replayed
    store.close()
    assert os.path.getsize(os.path.join(directory, JOURNAL_FILE)) == 0
    assert _state(LocalMetadataStore(directory, 0)) == expected      # from the snapshot alone


def test_a_journal_replayed_over_a_snapshot_that_holds_it_changes_nothing(tmp_path):
    """A crash between writing the snapshot and emptying the journal."""
    directory = str(tmp_path)
    store = LocalMetadataStore(directory, 0)
    _changed(store)
    journal = open(os.path.join(directory, JOURNAL_FILE), "rb").read()
    store.close()
    with open(os.path.join(directory, JOURNAL_FILE), "wb") as f:
        f.write(journal)
    assert _state(LocalMetadataStore(directory, 0)) == _state(store)


def test_a_change_is_a_line_and_the_snapshot_is_rewritten_once_per_many(tmp_path, monkeypatch):
    monkeypatch.setattr(metadata, "SNAPSHOT_AFTER", 10)
    directory = str(tmp_path)
    store = LocalMetadataStore(directory, 0)
    snapshots = []
    saved = store.save
    monkeypatch.setattr(store, "save", lambda: (snapshots.append(len(store.topics)), saved()))
    for i in range(40):
        store.create_topic(f"t{i}", 1, 1, {})
    # (a snapshot once the journal holds 10 changes, then once it holds as many as the last snapshot had topics)
    assert snapshots == [11, 23]
    assert sorted(LocalMetadataStore(directory, 0).topics) == sorted(f"t{i}" for i in range(40))


def _colliding_by_walk(name: str, existing) -> str | None:
    """Kafka's collision rule by a walk of every topic (what the index saves)."""
    if "." not in name and "_" not in name:
        return None
    return next((other for other in existing if other.replace(".", "_") == name.replace(".", "_")
                 and ("." in other or "_" in other)), None)


def test_a_colliding_name_is_found_by_the_index_as_by_a_walk_of_every_topic():
    import random

    rng = random.Random(3)
    topics = metadata.Topics([("a_b", 0), ("plain", 0)])
    for _ in range(3000):
        name = "".join(rng.choice("ab._") for _ in range(rng.randint(1, 4)))
        step = rng.randrange(4)
        if step == 0:
            topics[name] = 0
        elif step == 1:
            topics.pop(name, None)
        elif step == 2:
            topics.setdefault(name, 0)
        assert topics.colliding(name) == _colliding_by_walk(name, topics), name


def test_a_loaded_store_indexes_the_topics_it_read(tmp_path):
    store = LocalMetadataStore(str(tmp_path), 0)
    store.create_topic("x.y", 1, 1, {})
    assert LocalMetadataStore(str(tmp_path), 0).topics.colliding("x_y") == "x.y"   # (from the journal)
    store.close()
    assert LocalMetadataStore(str(tmp_path), 0).topics.colliding("x_y") == "x.y"   # (from the snapshot)


def test_a_change_of_one_resources_acls_writes_that_resources_acls_alone(tmp_path):
    """Among many ACLs, adding one to a resource is a journal line of that resource's ACLs: its size does not
    grow with the ACLs of other resources (a line of every ACL made creating n ACLs cost O(n^2) bytes)."""
    directory = str(tmp_path)
    store = LocalMetadataStore(directory, 0)
    journal = os.path.join(directory, JOURNAL_FILE)
    sizes = []
    for i in range(300):
        before = os.path.getsize(journal) if os.path.exists(journal) else 0
        store.set_resource_acls(_acl(f"topic-{i:03d}").resource, [_acl(f"topic-{i:03d}")])
        sizes.append(os.path.getsize(journal) - before)
    assert max(sizes) == min(sizes)
    assert [a.name for a in store.acls] == [f"topic-{i:03d}" for i in range(300)]
    assert LocalMetadataStore(directory, 0).acls == store.acls   # replayed after a crash
