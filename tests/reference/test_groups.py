"""Consumer groups, classic and KIP-848, and share groups (KIP-932), through real clients and raw frames."""

import asyncio
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_produce_fetch import create

pytestmark = pytest.mark.reference

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, OFFSET_COMMIT, OFFSET_FETCH, SYNC_GROUP = 10, 11, 12, 8, 9, 14
INCREMENTAL_ALTER_CONFIGS, GROUP_CONFIG, DESCRIBE_GROUPS, LIST_GROUPS = 44, 32, 15, 16
DESCRIBE_CONFIGS = 32
COORDINATOR_LOADING, NOT_COORDINATOR = 14, 16


async def coordinator_found(target, group: str) -> None:
    """Until FindCoordinator names the group's coordinator (Kafka creates __consumer_offsets on the first ask)."""
    await settled(lambda: call(target, FIND_COORDINATOR, 3, {"key": group, "key_type": 0}),
                  lambda a: a.error_code == 0)


def join_request(group: str, group_instance_id: str | None = None, reason: str | None = None) -> dict:
    """A JoinGroup of a new consumer-protocol member with the range assignor (empty subscription metadata)."""
    return {"group_id": group, "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "group_instance_id": group_instance_id, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\0\0\0\0\0\0\0\0\0\0"}], "reason": reason}


def fill(target, topic, partitions, per_partition=5) -> None:
    p = Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 0})
    for partition in range(partitions):
        for i in range(per_partition):
            p.produce(topic, f"{partition}-{i}".encode(), partition=partition)
    assert p.flush(10) == 0


def consume_until(consumers, count, timeout=30.0) -> dict[str, list]:
    """Poll every consumer in turn until ``count`` records were read among them."""
    got = {i: [] for i in range(len(consumers))}
    deadline = time.monotonic() + timeout
    while sum(map(len, got.values())) < count and time.monotonic() < deadline:
        for i, c in enumerate(consumers):
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got[i].append((m.partition(), m.offset()))
    return got


def group_scenario(protocol: str):
    def scenario(target, topic):
        asyncio.run(create(target, topic, partitions=4))
        group = f"g-{topic}"
        config = {"bootstrap.servers": target.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "group.protocol": protocol}
        if protocol == "consumer":   # (the group's own interval, which the members are told and keep)
            assert set_group_config(target, group, consumer_heartbeat_interval_ms=1000) == 0
        if protocol == "classic":
            config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                           "partition.assignment.strategy": "cooperative-sticky"})
        members = [Consumer(dict(config)) for _ in range(2)]
        for c in members:
            c.subscribe([topic])
        # The records go in once the group is stable, so that no rebalance moves a partition mid-read.
        deadline = time.monotonic() + 30
        while not (all(c.assignment() for c in members) and sum(len(c.assignment()) for c in members) == 4):
            assert time.monotonic() < deadline, [c.assignment() for c in members]
            for c in members:
                c.poll(0.1)
        fill(target, topic, 4)
        got = consume_until(members, 20)
        assignments = sorted(sorted(p.partition for p in c.assignment()) for c in members)
        for c in members:
            c.commit(asynchronous=False)
        members[0].close()
        deadline = time.monotonic() + 30
        while len(members[1].assignment()) < 4 and time.monotonic() < deadline:
            members[1].poll(0.1)
        after_leave = sorted(p.partition for p in members[1].assignment())
        committed = members[1].committed([TopicPartition(topic, i) for i in range(4)], timeout=10)
        members[1].close()
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(10)
        return {"records": sorted(r for rs in got.values() for r in rs),
                "each got partitions": sorted(len(a) > 0 for a in assignments), "after leave": after_leave,
                "committed": [(tp.partition, tp.offset) for tp in committed],
                "state": str(described.state), "members": len(described.members), "type": str(described.type)}
    return scenario


async def test_a_classic_group_assigns_commits_and_rebalances_on_leave(targets, topic):
    seen = await same(targets, group_scenario("classic"), topic)
    assert seen["after leave"] == [0, 1, 2, 3] and seen["committed"] == [(i, 5) for i in range(4)]


async def test_a_kip_848_group_assigns_commits_and_rebalances_on_leave(targets, topic):
    seen = await same(targets, group_scenario("consumer"), topic)
    assert seen["after leave"] == [0, 1, 2, 3]


async def test_join_group_errors(targets, topic):
    async def scenario(target):
        group = f"g-{topic}"
        await coordinator_found(target, group)
        join = join_request(group)
        first = await call(target, JOIN_GROUP, 5, join)
        too_short = await call(target, JOIN_GROUP, 5, {**join, "session_timeout_ms": 10})
        no_protocols = await call(target, JOIN_GROUP, 5, {**join, "protocols": []})
        heartbeat = await call(target, HEARTBEAT, 4, {"group_id": group, "generation_id": 1, "member_id": "nobody",
                                                      "group_instance_id": None})
        # The member rejoins with the id it was given and becomes the group's only member; a heartbeat of
        # another generation is then stale.
        joined = await call(target, JOIN_GROUP, 5, {**join, "member_id": first.member_id})
        stale = await call(target, HEARTBEAT, 4, {"group_id": group, "generation_id": joined.generation_id + 5,
                                                  "member_id": first.member_id, "group_instance_id": None})
        return {"first join": first.error_code, "member id given": bool(first.member_id),
                "second join": (joined.error_code, joined.leader == first.member_id),
                "heartbeat of another generation": stale.error_code,
                "session timeout too short": too_short.error_code, "no protocols": no_protocols.error_code,
                "heartbeat of a stranger": heartbeat.error_code}
    assert (await same(targets, scenario))["first join"] == 79


async def test_offset_commit_and_fetch_outside_a_generation(targets, topic):
    async def scenario(target):
        await create(target, topic, partitions=2)
        group = f"g-{topic}"
        await coordinator_found(target, group)

        async def commit(generation, member, partition=0, offset=3, name=topic):
            answer = await call(target, OFFSET_COMMIT, 8, {
                "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
                "group_instance_id": None, "topics": [{"name": name, "partitions": [{
                    "partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1,
                    "committed_metadata": "m"}]}]})
            return answer.topics[0].partitions[0].error_code
        seen = {"simple": await commit(-1, ""), "stranger in an empty group": await commit(1, "nobody"),
                "unknown partition": await commit(-1, "", partition=7),
                "unknown topic": await commit(-1, "", name=topic + "-missing")}
        fetched = await call(target, OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": [
            {"name": topic, "partition_indexes": [0, 1]}]}], "require_stable": True})
        seen["fetched"] = [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
                           for p in fetched.groups[0].topics[0].partitions]
        return seen
    await same(targets, scenario)


def set_group_config(target, group, **configs) -> int:
    """Sets a group's configs and, where that succeeded, waits until the broker describes them: Kafka's
    brokers apply the controller's record of them a moment after the change was answered, and a group
    made before then (or a listing) would not see them."""
    wanted = {k.replace("_", "."): str(v) for k, v in configs.items()}

    async def described():
        answer = await call(target, DESCRIBE_CONFIGS, 4, {"resources": [{
            "resource_type": GROUP_CONFIG, "resource_name": group, "configuration_keys": list(wanted)}],
            "include_synonyms": False, "include_documentation": False})
        return {c.name: c.value for c in answer.results[0].configs}

    async def ask():
        answer = await call(target, INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
            "resource_type": GROUP_CONFIG, "resource_name": group, "configs": [
                {"name": k, "config_operation": 0, "value": v} for k, v in wanted.items()]}],
            "validate_only": False})
        error = answer.responses[0].error_code
        if error == 0:
            seen = await settled(described, lambda found: found == wanted)
            assert seen == wanted, seen
        return error
    return asyncio.run(ask())


def share_scenario(mode: str):
    def scenario(target, topic):
        from confluent_kafka import AcknowledgeType, ShareConsumer
        asyncio.run(create(target, topic))
        fill(target, topic, 1, per_partition=6)
        group = f"s-{topic}"
        assert set_group_config(target, group, share_auto_offset_reset="earliest",
                                share_heartbeat_interval_ms=1000) == 0
        c = ShareConsumer({"bootstrap.servers": target.bootstrap, "group.id": group,
                           "share.acknowledgement.mode": mode})
        c.subscribe([topic])
        deliveries, deadline = [], time.monotonic() + 30
        while len({o for o, _ in deliveries}) < 6 or (mode == "explicit" and len(deliveries) < 8):
            assert time.monotonic() < deadline, deliveries
            for m in c.poll(0.5):
                if m.error() is not None:
                    continue
                deliveries.append((m.offset(), m.delivery_count()))
                if mode == "explicit":   # release offsets 0 and 1 once each, reject 2, accept the rest
                    kind = (AcknowledgeType.RELEASE if m.offset() < 2 and m.delivery_count() == 1 else
                            AcknowledgeType.REJECT if m.offset() == 2 else AcknowledgeType.ACCEPT)
                    c.acknowledge(m, kind)
            if mode == "explicit":
                c.commit_sync(10)
        c.close()
        return sorted(deliveries)
    return scenario


@pytest.mark.parametrize("mode", ["implicit", "explicit"])
async def test_a_share_group_delivers_acknowledges_and_redelivers(targets, topic, mode):
    seen = await same(targets, share_scenario(mode), topic)
    if mode == "explicit":
        assert (0, 2) in seen and (1, 2) in seen and (2, 2) not in seen


async def test_a_share_groups_acquisition_lock_times_out_and_the_record_is_redelivered(targets, topic):
    """One member acquires the records and goes quiet; once the group's lock duration (2 s) has passed,
    another member gets them, each delivered a second time."""
    def scenario(target, topic):
        from confluent_kafka import ShareConsumer
        asyncio.run(create(target, topic))
        fill(target, topic, 1, per_partition=3)
        group = f"s-{topic}"
        assert set_group_config(target, group, share_auto_offset_reset="earliest",
                                share_record_lock_duration_ms=2000, share_heartbeat_interval_ms=1000) == 0
        config = {"bootstrap.servers": target.bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
        quiet, other = ShareConsumer(dict(config)), ShareConsumer(dict(config))
        try:
            quiet.subscribe([topic])
            first, deadline = [], time.monotonic() + 30
            while len(first) < 3:
                assert time.monotonic() < deadline, first
                first += [(m.offset(), m.delivery_count()) for m in quiet.poll(0.5) if m.error() is None]
            other.subscribe([topic])
            again, deadline = [], time.monotonic() + 30
            while len(again) < 3:
                assert time.monotonic() < deadline, again
                again += [(m.offset(), m.delivery_count()) for m in other.poll(0.5) if m.error() is None]
            return sorted(first), sorted(again)
        finally:
            other.close()
            quiet.close()
    first, again = await same(targets, scenario, topic)
    assert [count for _, count in again] == [2, 2, 2]


async def test_the_group_version_and_share_version_features_are_finalized(targets):
    async def scenario(target):
        answer = await call(target, 18, 3, {"client_software_name": "differential", "client_software_version": "1"})
        return sorted(f["name"] for f in answer["finalized_features"] if f["name"] in ("group.version",
                                                                                      "share.version"))
    assert await same(targets, scenario) == ["group.version", "share.version"]


@pytest.mark.parametrize("version", [4, 5])
async def test_list_groups_by_state_and_type(targets, topic, version):
    """A classic group is listed with its type (v5, KIP-848) unless the types filter leaves it out."""
    async def scenario(target):
        group = f"g-{topic}"
        await coordinator_found(target, group)
        join = join_request(group)
        first = await settled(lambda: call(target, JOIN_GROUP, 5, join),
                              lambda a: a.error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))
        joined = await call(target, JOIN_GROUP, 5, {**join, "member_id": first.member_id})
        seen = {"joined": (first.error_code, joined.error_code)}
        for states, types in [([], []), (["PreparingRebalance", "CompletingRebalance"], []), (["Empty"], []),
                              ([], ["classic"]), ([], ["Classic"]), ([], ["consumer"]), ([], ["share", "classic"]),
                              ([], ["nonsense"])]:
            answer = await call(target, LIST_GROUPS, version, {"states_filter": states, "types_filter": types})
            seen[f"{states} {types}"] = (answer.error_code, sorted(
                (g.group_state, g.protocol_type, g.get("group_type")) for g in answer.groups if g.group_id == group))
        return seen
    await same(targets, scenario)


@pytest.mark.parametrize("version", [5, 6])
async def test_describe_groups_of_unknown_and_empty_groups(targets, topic, version):
    async def scenario(target):
        group = f"g-{topic}"
        await coordinator_found(target, group)
        answer = await settled(lambda: call(target, DESCRIBE_GROUPS, version, {
            "groups": [group, ""], "include_authorized_operations": False}),
            lambda a: all(g.error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR) for g in a.groups))
        return sorted((g.error_code, g.get("error_message") is not None, g.group_id, g.group_state, g.protocol_type,
                 g.members) for g in answer.groups)
    await same(targets, scenario)


@pytest.mark.parametrize("version", [7, 8, 9])
async def test_a_static_leader_that_restarts_keeps_the_assignment(targets, topic, version):
    """KIP-345/KIP-814: a static member rejoining a stable group under a new member id takes its old place
    without a rebalance; from v9 the leader learns it leads, with the members, and is told to skip the
    assignment."""
    async def scenario(target):
        group = f"g-{topic}"
        await coordinator_found(target, group)
        join = join_request(group, group_instance_id="instance-1", reason="started")
        first = await settled(lambda: call(target, JOIN_GROUP, version, join),
                              lambda a: a.error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))
        synced = await call(target, SYNC_GROUP, 5, {
            "group_id": group, "generation_id": first.generation_id, "member_id": first.member_id,
            "group_instance_id": "instance-1", "protocol_type": "consumer", "protocol_name": "range",
            "assignments": [{"member_id": first.member_id, "assignment": b"assigned"}]})
        again = await call(target, JOIN_GROUP, version, {**join, "reason": "restarted"})
        stale = await call(target, HEARTBEAT, 4, {"group_id": group, "generation_id": first.generation_id,
                                                  "member_id": first.member_id, "group_instance_id": "instance-1"})
        return {"first": (first.error_code, first.leader == first.member_id, len(first.members),
                          first.get("skip_assignment")),
                "synced": (synced.error_code, bytes(synced.assignment)),
                "rejoined": (again.error_code, again.member_id != first.member_id,
                             again.generation_id == first.generation_id,
                             "new" if again.leader == again.member_id else "old" if again.leader == first.member_id
                             else again.leader, len(again.members), again.get("skip_assignment")),
                "old member id": stale.error_code}
    await same(targets, scenario)


@pytest.mark.parametrize("version", [8, 9, 10])
async def test_offsets_of_a_classic_group_at_every_version(targets, topic, version):
    """OffsetCommit and OffsetFetch v9 (KIP-848's member id and epoch, here a classic group's generation)
    and v10 (topics by id, KIP-516), simple commits and a member's, known and unknown topic ids."""
    stranger = bytes(range(16))

    async def scenario(target):
        await create(target, topic, partitions=2)
        meta = await call(target, 3, 12, {"topics": [{"name": topic, "topic_id": None}],
                                          "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
        topic_id = bytes(meta.topics[0].topic_id)
        named = (lambda t: {"topic_id": t}) if version >= 10 else (lambda t: {"name": topic})
        group = f"g-{topic}"
        await coordinator_found(target, group)

        async def commit(generation, member, offset, topic_key=topic_id, group=group):
            answer = await call(target, OFFSET_COMMIT, version, {
                "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
                "group_instance_id": None, "topics": [{**named(topic_key), "partitions": [{
                    "partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                    "committed_metadata": "m"}]}]})
            return [(bytes(t.topic_id) == topic_key if version >= 10 else t.name == topic, p.error_code)
                    for t in answer.topics for p in t.partitions]

        async def fetch(member_id=None, member_epoch=-1, topic_key=topic_id):
            answer = await call(target, OFFSET_FETCH, version, {"groups": [{
                "group_id": group, "member_id": member_id, "member_epoch": member_epoch,
                "topics": [{**named(topic_key), "partition_indexes": [0, 1]}]}], "require_stable": True})
            g = answer.groups[0]
            return g.error_code, [(p.partition_index, p.committed_offset, p.error_code)
                                  for t in g.topics for p in t.partitions]
        first_commit = await settled(lambda: commit(-1, "", 5),
                                     lambda a: a[0][1] not in (COORDINATOR_LOADING, NOT_COORDINATOR))
        seen = {"simple commit": first_commit, "fetch": await fetch(),
                "stranger commits to a group that does not exist": await commit(1, "nobody", 6, group=group + "-x"),
                "stranger commits": await commit(1, "nobody", 6)}
        join = join_request(group)
        first = await call(target, JOIN_GROUP, 5, join)
        joined = await call(target, JOIN_GROUP, 5, {**join, "member_id": first.member_id})
        seen["member commits"] = await commit(joined.generation_id, joined.member_id, 7)
        seen["member fetches"] = await fetch(joined.member_id, joined.generation_id)
        seen["stranger fetches"] = await fetch("nobody", 3)
        if version >= 10:
            seen["unknown id commit"] = await commit(-1, "", 8, topic_key=stranger)
            seen["unknown id fetch"] = await fetch(topic_key=stranger)
        return seen
    await same(targets, scenario)


@pytest.mark.parametrize("case", ["by id", "an unknown topic id", "a partition the topic lacks", "every topic",
                                  "fetch an unknown topic id", "fetch a partition the topic lacks",
                                  "v9, an unknown topic name"])
async def test_offsets_by_topic_id(targets, topic, case):
    """OffsetCommit and OffsetFetch v10 (Kafka 4.1) name topics by id; a simple group's commits (epoch -1)."""
    group = f"g-{topic}"

    def offsets(*indexes):
        return [{"partition_index": p, "committed_offset": 5, "committed_leader_epoch": -1, "committed_metadata": "m"}
                for p in indexes]

    async def scenario(target):
        await create(target, topic, 2)
        known = await call(target, 3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                           "include_topic_authorized_operations": False})
        tid = bytes(known.topics[0].topic_id)

        async def commit(topics, version=10):
            answer = await call(target, OFFSET_COMMIT, version, {
                "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                "topics": topics})
            return sorted((bytes(t.topic_id) == tid, [(p.partition_index, p.error_code) for p in t.partitions])
                          for t in answer.topics)

        async def fetch(topics):
            answer = await call(target, OFFSET_FETCH, 10, {"groups": [{"group_id": group, "member_id": None,
                                                                      "member_epoch": -1, "topics": topics}],
                                                          "require_stable": False})
            return [(g.error_code, sorted((bytes(t.topic_id) == tid, [
                (p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in t.partitions])
                for t in g.topics)) for g in answer.groups]

        await coordinator_found(target, group)
        # (Kafka's coordinator answers NOT_COORDINATOR until its offsets partition has loaded)
        seen = [await settled(lambda: commit([{"topic_id": tid, "partitions": offsets(0)}]),
                              lambda a: a[0][1][0][1] not in (COORDINATOR_LOADING, NOT_COORDINATOR))]
        seen.append(await {
            "by id": lambda: commit([{"topic_id": tid, "partitions": offsets(0, 1)}]),
            "an unknown topic id": lambda: commit([{"topic_id": uuid.uuid4().bytes, "partitions": offsets(0)}]),
            "a partition the topic lacks": lambda: commit([{"topic_id": tid, "partitions": offsets(7)}]),
            "every topic": lambda: fetch(None),
            "fetch an unknown topic id": lambda: fetch([{"topic_id": uuid.uuid4().bytes, "partition_indexes": [0]}]),
            "fetch a partition the topic lacks": lambda: fetch([{"topic_id": tid, "partition_indexes": [7]}]),
            "v9, an unknown topic name": lambda: commit([{"name": f"{topic}-none", "partitions": offsets(0)}], 9),
        }[case]())
        if case == "by id":
            seen.append(await fetch([{"topic_id": tid, "partition_indexes": [0, 1]}]))
        return seen
    await same(targets, scenario)
