"""Streams groups (KIP-1071) on a real broker, over the protocol as Kafka Streams speaks it (its Java client runs
in ``make test-java``): a group's topology, members, tasks and committed offsets outlive kill -9 of the broker,
its members carrying on at their epochs; internal topics are made on the members' behalf once, with the
topology's configs."""

from __future__ import annotations

import asyncio
import uuid

from kbroker.client.connection import KafkaConnection
from tests.brokerproc import BrokerProcess
from tests.integration.test_operations import cli
from tests.streams_requests import STREAMS_GROUP_DESCRIBE, STREAMS_GROUP_HEARTBEAT, heartbeat, join, subtopology
from tests.streams_requests import tasks_of, topic_info
from tests.waiting import settled

FIND_COORDINATOR, CREATE_TOPICS, OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_CONFIGS = 10, 19, 8, 9, 32


async def open_with_coordinator(port: int, group: str) -> KafkaConnection:
    conn = await KafkaConnection.open("127.0.0.1", port, client_id="streams-test")
    await settled(lambda: conn.request(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}),
                lambda a: a.coordinators[0].error_code == 0)
    return conn


async def create_topic(conn, name: str, partitions: int) -> None:
    answer = await conn.request(CREATE_TOPICS, 7, {"topics": [{"name": name, "num_partitions": partitions,
                                                               "replication_factor": 1}], "timeout_ms": 10000})
    assert answer.topics[0].error_code == 0


async def test_a_streams_group_outlives_kill_9_of_its_broker(tmp_path):
    # (a new group assigns at once: its initial delay is the coordinator's unit tests' and the reference's)
    broker = BrokerProcess(str(tmp_path / "data"), {"group.streams.initial.rebalance.delay.ms": "0"}).start()
    try:
        await outlives_kill_9(broker)
    finally:
        broker.kill()


async def outlives_kill_9(broker) -> None:
    topic, group, member = f"in-{uuid.uuid4().hex[:8]}", f"app-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    changelog = f"{group}-store-changelog"
    topology = [subtopology("0", sources=[topic], changelogs=[topic_info(changelog, cleanup_policy="compact")])]
    conn = await open_with_coordinator(broker.port, group)
    await create_topic(conn, topic, 3)
    joined = await conn.request(STREAMS_GROUP_HEARTBEAT, 0, join(group, member, topology))
    assert joined.error_code == 0 and [s.status_code for s in joined.status] == [3]   # the changelog is made
    assigned = await settled(lambda: conn.request(STREAMS_GROUP_HEARTBEAT, 0, heartbeat(
        group, member, joined.member_epoch, active={}, standby={}, warmup={})),
        lambda a: a.error_code or a.active_tasks)
    assert tasks_of(assigned.active_tasks) == {"0": [0, 1, 2]} and not assigned.status
    committed = await conn.request(OFFSET_COMMIT, 9, {
        "group_id": group, "generation_id_or_member_epoch": assigned.member_epoch, "member_id": member,
        "group_instance_id": None, "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
            {"partition_index": 1, "committed_offset": 0, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})
    assert committed.topics[0].partitions[0].error_code == 0
    configs = await conn.request(DESCRIBE_CONFIGS, 4, {"resources": [{
        "resource_type": 2, "resource_name": changelog, "configuration_keys": ["cleanup.policy"]}],
        "include_synonyms": False, "include_documentation": False})
    assert [(c.name, c.value) for c in configs.results[0].configs] == [("cleanup.policy", "compact")]
    await conn.close()

    broker.kill()
    broker.start()
    conn = await open_with_coordinator(broker.port, group)
    try:
        again = await settled(lambda: conn.request(STREAMS_GROUP_HEARTBEAT, 0, heartbeat(
            group, member, assigned.member_epoch, active={"0": [0, 1, 2]}, standby={}, warmup={})),
            lambda a: a.error_code != 14)     # (COORDINATOR_LOADING while the shard replays)
        assert (again.error_code, again.member_epoch, again.status) == (0, assigned.member_epoch, [])
        described = (await conn.request(STREAMS_GROUP_DESCRIBE, 0, {"group_ids": [group],
                                                                     "include_authorized_operations": False}))
        g = described.groups[0]
        assert (g.group_state, g.group_epoch, [s.subtopology_id for s in g.topology.subtopologies]) == \
            ("Stable", again.member_epoch, ["0"])
        assert [(m.member_id, tasks_of(m.assignment.active_tasks)) for m in g.members] == [(member, {"0": [0, 1, 2]})]
        fetched = await conn.request(OFFSET_FETCH, 9, {"groups": [{
            "group_id": group, "member_id": member, "member_epoch": again.member_epoch,
            "topics": [{"name": topic, "partition_indexes": [1]}]}], "require_stable": False})
        assert fetched.groups[0].topics[0].partitions[0].committed_offset == 0
        # kbroker's own tool shows the group, who runs which task and owns which input partition
        described = await asyncio.to_thread(cli, broker, "groups", "describe", "--group", group)
        lines = described.stdout.splitlines()
        assert lines[0] == (f"Group {group} is Stable (streams group, group epoch {again.member_epoch}, assignment "
                            f"epoch {again.member_epoch}, 1 members)"), described.stdout + described.stderr
        assert f"{group}\t{topic}\t1\t0\t0\t0\t{member}\t/127.0.0.1\tstreams-test" in lines, described.stdout
        assert f"{member}\tprocess-1\t{again.member_epoch}\t0:0,1,2\t-" in lines, described.stdout
    finally:
        await conn.close()
