"""KIP-1071 streams groups over raw frames, against Kafka 4.2: StreamsGroupHeartbeat's refusals and statuses,
a topology configured against the topics there are (missing source topics, internal topics created with the
partition counts the coordinator decides, co-partitioning), tasks moving between members, the member epoch an
OffsetCommit must carry, and how the other group APIs see a streams group."""

import asyncio
import re
import uuid

import pytest

from tests.reference.differential import call, same
from tests.waiting import settled
from tests.reference.test_groups import coordinator_found, set_group_config
from tests.reference.test_produce_fetch import create
from tests.streams_requests import (STREAMS_GROUP_DESCRIBE, STREAMS_GROUP_HEARTBEAT, heartbeat, join, leave,
                                    subtopology, tasks_of, topic_info)

pytestmark = pytest.mark.reference

COORDINATOR_LOADING, NOT_COORDINATOR = 14, 16
MISSING_INTERNAL_TOPICS = 3   # (a streams group status code)


def masked(text, *names) -> str | None:
    """Words with the test's own names and the numbers masked."""
    if text is None:
        return None
    for i, name in enumerate(names):
        text = text.replace(name, f"<{i}>")
    return re.sub(r"[0-9]+", "N", text)


async def beat(target, body: dict):
    return await settled(lambda: call(target, STREAMS_GROUP_HEARTBEAT, 0, body),
                         lambda a: a.error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))


def statuses(answer, *names) -> list:
    return [(s.status_code, masked(s.status_detail, *names)) for s in answer.status or ()]


async def describe(target, group: str):
    answer = await call(target, STREAMS_GROUP_DESCRIBE, 0, {"group_ids": [group],
                                                            "include_authorized_operations": False})
    return answer.groups[0]


async def until_assigned(target, group: str, member: str, epoch: int, owned=None, process="process-1"):
    """Heartbeats (reporting ``owned`` tasks, none by default) until the member is given active tasks."""
    return await settled(lambda: call(target, STREAMS_GROUP_HEARTBEAT, 0, heartbeat(
        group, member, epoch, active=owned or {}, standby={}, warmup={}, process=process)),
        lambda a: a.error_code or (a.active_tasks is not None and a.active_tasks), timeout=30)


async def test_streams_group_heartbeat_refusals(targets, topic):
    """Each malformed or out-of-place heartbeat, in Kafka's order of checks and its words."""
    async def scenario(target):
        await create(target, topic)
        group, member = f"st-{topic}", uuid.uuid4().hex
        await coordinator_found(target, group)
        topology = [subtopology("0", sources=[topic])]
        joined = await beat(target, join(group, member, topology))
        seen = {"join": (joined.error_code, joined.member_epoch, statuses(joined, topic))}
        cases = [
            ("no member id", join(group, "", topology)),
            ("no group id", join("", member, topology)),
            ("empty rack", join(group, member, topology, rack_id="")),
            ("static member", join(group, member, topology, instance_id="i")),
            ("task offsets", join(group, member, topology, task_offsets=[])),
            ("task end offsets", join(group, member, topology, task_end_offsets=[])),
            ("warm-up tasks", heartbeat(group, member, 1, active={}, standby={}, warmup={"0": [0]})),
            ("a regular expression", join(group, member, [dict(subtopology("0"), source_topic_regex=["t.*"])])),
            ("no rebalance timeout", join(group, member, topology, rebalance_timeout_ms=-1)),
            ("joining with tasks", join(group, member, topology, active_tasks=[
                {"subtopology_id": "0", "partitions": [0]}])),
            ("joining without a topology", heartbeat(group, member, 0, rebalance_timeout_ms=1000)),
            ("a changelog with partitions", join(group, member, [subtopology("0", sources=[topic], changelogs=[
                topic_info(f"{group}-store-changelog", 3)])])),
            ("epoch -2", heartbeat(group, member, -2)),
            ("epoch -3", heartbeat(group, member, -3)),
            ("one task type", heartbeat(group, member, 1, active={})),
            ("a topology after joining", heartbeat(group, member, 1, topology=topology)),
            ("an internal topic", join(group, member, [subtopology("0", sources=["__consumer_offsets"])])),
            ("an invalid name", join(group, member, [subtopology("0", sources=["no way"])])),
            ("another topology", join(group, uuid.uuid4().hex, [subtopology("1", sources=[topic])])),
            ("a stranger", heartbeat(group, "stranger", 3)),
            ("an unknown group", heartbeat(f"{group}-none", member, 3)),
            ("leaving an unknown group", leave(f"{group}-none", member)),
            ("epoch ahead", heartbeat(group, member, joined.member_epoch + 5)),
            ("epoch behind", heartbeat(group, member, joined.member_epoch - 1)),
            ("leave", leave(group, member)),
            ("after leaving", heartbeat(group, member, joined.member_epoch)),
        ]
        for name, body in cases:
            answer = await call(target, STREAMS_GROUP_HEARTBEAT, 0, body)
            seen[name] = (answer.error_code, masked(answer.error_message, member, group, topic),
                          answer.member_epoch if answer.error_code == 0 else None)
        return seen
    await same(targets, scenario)


async def test_a_topology_waits_for_its_source_topics(targets, topic):
    """A topology reading a topic that does not exist is not ready (MISSING_SOURCE_TOPICS, the group NotReady,
    no tasks); once the topic is made, the next heartbeats assign its tasks."""
    async def scenario(target):
        group, member = f"st-{topic}", uuid.uuid4().hex
        await coordinator_found(target, group)
        topology = [subtopology("0", sources=[topic, f"{topic}-b"])]
        joined = await beat(target, join(group, member, topology))
        described = await describe(target, group)
        seen = {"join": (joined.error_code, joined.member_epoch, tasks_of(joined.active_tasks),
                         statuses(joined, topic)),
                "described": (described.group_state, described.group_epoch, described.assignment_epoch,
                              [(s.subtopology_id, s.source_topics) for s in described.topology.subtopologies]
                              if described.topology.subtopologies is not None else None)}
        seen["described"] = masked(str(seen["described"]), topic)
        await create(target, topic, 2)
        await create(target, f"{topic}-b", 2)
        assigned = await until_assigned(target, group, member, joined.member_epoch)
        described = await describe(target, group)
        seen["assigned"] = (assigned.error_code, tasks_of(assigned.active_tasks), statuses(assigned, topic))
        seen["described after"] = (described.group_state, [
            (m.member_id == member, m.process_id, tasks_of(m.assignment.active_tasks),
             tasks_of(m.target_assignment.active_tasks)) for m in described.members])
        return seen
    await same(targets, scenario)


async def test_internal_topics_are_created_with_the_counts_the_coordinator_decides(targets, topic):
    """A repartition topic takes the largest partition count of what its writer reads, a changelog its
    subtopology's task count; the coordinator asks for both (MISSING_INTERNAL_TOPICS) and the broker creates
    them with the configs the topology gives."""
    async def scenario(target):
        await create(target, topic, 3)
        group, member = f"st-{topic}", uuid.uuid4().hex
        await coordinator_found(target, group)
        repartition, changelog = f"{group}-by-key-repartition", f"{group}-store-changelog"
        topology = [subtopology("0", sources=[topic], sinks=[repartition]),
                    subtopology("1", repartition_sources=[
                        topic_info(repartition, cleanup_policy="delete")],
                        changelogs=[topic_info(changelog, cleanup_policy="compact")])]
        joined = await beat(target, join(group, member, topology))
        seen = {"join": (joined.error_code, statuses(joined, topic, group))}
        assigned = await until_assigned(target, group, member, joined.member_epoch)
        seen["assigned"] = (tasks_of(assigned.active_tasks), statuses(assigned, topic, group))
        metadata = await call(target, 3, 12, {"topics": [{"name": repartition}, {"name": changelog}],
                                              "allow_auto_topic_creation": False,
                                              "include_topic_authorized_operations": False})
        seen["topics"] = [(t.error_code, len(t.partitions)) for t in metadata.topics]
        configs = await call(target, 32, 4, {"resources": [
            {"resource_type": 2, "resource_name": name, "configuration_keys": ["cleanup.policy"]}
            for name in (repartition, changelog)], "include_synonyms": False, "include_documentation": False})
        seen["configs"] = [[(c.name, c.value) for c in r.configs] for r in configs.results]
        described = await describe(target, group)
        seen["topology"] = masked(str([(s.subtopology_id, s.source_topics, s.repartition_sink_topics,
                                        [(i.name, i.partitions, i.replication_factor,
                                          [(c.key, c.value) for c in i.topic_configs])
                                         for i in s.state_changelog_topics + s.repartition_source_topics])
                                       for s in described.topology.subtopologies]), topic, group)
        return seen
    await same(targets, scenario)


async def test_copartitioned_topics_must_agree(targets, topic):
    """Two co-partitioned source topics with different partition counts, and an existing changelog with the
    wrong count: INCORRECTLY_PARTITIONED_TOPICS, in Kafka's words."""
    async def scenario(target):
        await create(target, f"{topic}-a", 2)
        await create(target, f"{topic}-b", 3)
        group = f"st-{topic}"
        await coordinator_found(target, group)
        joined = await beat(target, join(group, uuid.uuid4().hex, [
            subtopology("0", sources=[f"{topic}-a", f"{topic}-b"], copartition=[((0, 1), ())])]))
        other = f"{group}-2"
        changelog = f"{other}-store-changelog"
        await create(target, changelog, 5)
        await coordinator_found(target, other)
        wrong = await beat(target, join(other, uuid.uuid4().hex, [
            subtopology("0", sources=[f"{topic}-a"], changelogs=[changelog])]))
        return statuses(joined, topic), statuses(wrong, topic, other)
    await same(targets, scenario)


async def test_tasks_move_between_members(targets, topic):
    """A second member (another process) joins: the first is asked to give up half its tasks at its epoch, the
    second is withheld them until the first reports them revoked; then both reach the new epoch."""
    async def scenario(target):
        await create(target, topic, 4)
        group, first, second = f"st-{topic}", "a" + uuid.uuid4().hex, "b" + uuid.uuid4().hex
        await coordinator_found(target, group)
        topology = [subtopology("0", sources=[topic])]
        joined = await beat(target, join(group, first, topology))
        one = await until_assigned(target, group, first, joined.member_epoch) if not joined.active_tasks else joined
        mine = tasks_of(one.active_tasks)
        seen = [("first", one.member_epoch - joined.member_epoch, mine)]
        other = await beat(target, join(group, second, topology, process="process-2"))
        seen.append(("second joins", other.error_code, tasks_of(other.active_tasks), statuses(other)))
        asked = await call(target, STREAMS_GROUP_HEARTBEAT, 0, heartbeat(group, first, one.member_epoch,
                                                                         active=mine, standby={}, warmup={}))
        kept = tasks_of(asked.active_tasks)
        seen.append(("first asked to revoke", asked.member_epoch == one.member_epoch, kept))
        withheld = await call(target, STREAMS_GROUP_HEARTBEAT, 0, heartbeat(
            group, second, other.member_epoch, active={}, standby={}, warmup={}, process="process-2"))
        seen.append(("second withheld", tasks_of(withheld.active_tasks),
                     (await describe(target, group)).group_state))
        done = await call(target, STREAMS_GROUP_HEARTBEAT, 0, heartbeat(group, first, asked.member_epoch,
                                                                        active=kept, standby={}, warmup={}))
        seen.append(("first revoked", done.member_epoch > one.member_epoch, tasks_of(done.active_tasks)))
        given = await until_assigned(target, group, second, withheld.member_epoch, process="process-2")
        seen.append(("second given", given.member_epoch == done.member_epoch, tasks_of(given.active_tasks)))
        described = await describe(target, group)
        seen.append(("described", described.group_state, sorted(
            (m.member_id[0], m.member_epoch == done.member_epoch, tasks_of(m.assignment.active_tasks))
            for m in described.members)))
        return seen
    await same(targets, scenario)


async def test_offset_commits_carry_the_member_epoch(targets, topic):
    """OffsetCommit v9 from a member: at its epoch, from outside while it has members, at an epoch ahead, from a
    stranger, and at v8 (a streams member must use v9+); OffsetFetch v9 at an old epoch; and from outside once
    the group is empty."""
    async def scenario(target):
        await create(target, topic, 2)
        group, member = f"st-{topic}", uuid.uuid4().hex
        await coordinator_found(target, group)
        joined = await beat(target, join(group, member, [subtopology("0", sources=[topic])]))
        one = await until_assigned(target, group, member, joined.member_epoch) if not joined.active_tasks \
            else joined

        async def commit(member_id, epoch, version=9):
            answer = await call(target, 8, version, {"group_id": group, "generation_id_or_member_epoch": epoch,
                                               "member_id": member_id, "group_instance_id": None,
                                               "retention_time_ms": -1, "topics": [
                {"name": topic, "partitions": [{"partition_index": p, "committed_offset": 5,
                                                "committed_leader_epoch": -1, "committed_metadata": ""}
                                               for p in (0, 1)]}]})
            return [p.error_code for t in answer.topics for p in t.partitions]

        async def fetch(member_id, epoch):
            answer = await call(target, 9, 9, {"groups": [{"group_id": group, "member_id": member_id,
                                                           "member_epoch": epoch, "topics": None}],
                                               "require_stable": False})
            return answer.groups[0].error_code
        seen = {"at its epoch": await commit(member, one.member_epoch),
                "from outside": await commit("", -1),
                "ahead": await commit(member, one.member_epoch + 1),
                "a stranger": await commit("stranger", one.member_epoch),
                "OffsetCommit v8": await commit(member, one.member_epoch, version=8),
                "fetch at an old epoch": await fetch(member, one.member_epoch - 1),
                "fetch at its epoch": await fetch(member, one.member_epoch)}
        await call(target, STREAMS_GROUP_HEARTBEAT, 0, leave(group, member))
        seen["from outside once empty"] = await commit("", -1)
        return seen
    await same(targets, scenario)


async def test_other_group_apis_on_a_streams_group(targets, topic):
    """ListGroups (by type and state), DescribeGroups, ConsumerGroupDescribe, JoinGroup, ConsumerGroupHeartbeat
    and DeleteGroups on a streams group, and StreamsGroupHeartbeat and StreamsGroupDescribe on a consumer
    group."""
    async def scenario(target):
        await create(target, topic)
        group, member = f"st-{topic}", uuid.uuid4().hex
        await coordinator_found(target, group)
        await beat(target, join(group, member, [subtopology("0", sources=[topic])]))
        seen = {}
        listed = await call(target, 16, 5, {"states_filter": [], "types_filter": ["streams"]})
        seen["listed"] = [(g.group_id == group, g.protocol_type, g.group_state, g.group_type)
                          for g in listed.groups if g.group_id == group]
        classic = await call(target, 15, 5, {"groups": [group], "include_authorized_operations": False})
        g = classic.groups[0]
        seen["DescribeGroups"] = (g.error_code, g.group_state, g.protocol_type, len(g.members))
        consumer = await call(target, 69, 1, {"group_ids": [group], "include_authorized_operations": False})
        seen["ConsumerGroupDescribe"] = (consumer.groups[0].error_code,
                                         masked(consumer.groups[0].error_message, group))
        joined = await call(target, 11, 9, {"group_id": group, "session_timeout_ms": 10000,
                                            "rebalance_timeout_ms": 10000, "member_id": "",
                                            "group_instance_id": None, "protocol_type": "consumer",
                                            "protocols": [{"name": "range", "metadata": b""}], "reason": None})
        seen["JoinGroup"] = joined.error_code
        hb = await call(target, 68, 1, {"group_id": group, "member_id": uuid.uuid4().hex, "member_epoch": 0,
                                        "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 10000,
                                        "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
                                        "server_assignor": None, "topic_partitions": []})
        seen["ConsumerGroupHeartbeat"] = (hb.error_code, masked(hb.error_message, group))
        deleted = await call(target, 42, 2, {"groups_names": [group]})
        seen["DeleteGroups with a member"] = deleted.results[0].error_code
        await call(target, STREAMS_GROUP_HEARTBEAT, 0, leave(group, member))
        empty = await describe(target, group)
        seen["described empty"] = (empty.group_state, len(empty.members))
        deleted = await call(target, 42, 2, {"groups_names": [group]})
        seen["DeleteGroups empty"] = deleted.results[0].error_code
        gone = await describe(target, group)
        seen["described after deletion"] = (gone.error_code, masked(gone.error_message, group))
        consumer_group = f"c-{topic}"
        await coordinator_found(target, consumer_group)
        await call(target, 68, 1, {"group_id": consumer_group, "member_id": uuid.uuid4().hex, "member_epoch": 0,
                                   "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 10000,
                                   "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
                                   "server_assignor": None, "topic_partitions": []})
        streams = await call(target, STREAMS_GROUP_HEARTBEAT, 0, join(consumer_group, member,
                                                                      [subtopology("0", sources=[topic])]))
        seen["StreamsGroupHeartbeat on a consumer group"] = (streams.error_code,
                                                             masked(streams.error_message, consumer_group))
        described = await describe(target, consumer_group)
        seen["StreamsGroupDescribe of a consumer group"] = (described.error_code,
                                                            masked(described.error_message, consumer_group))
        return seen
    await same(targets, scenario)


async def test_a_group_sets_its_standbys_and_initial_delay(targets, topic):
    """streams.num.standby.replicas and streams.initial.rebalance.delay.ms set on the group: its first member
    waits out the delay (ASSIGNMENT_DELAYED, nothing assigned), then two processes each get the other's tasks
    as standbys."""
    async def scenario(target):
        await create(target, topic, 2)
        group, first, second = f"st-{topic}", "a" + uuid.uuid4().hex, "b" + uuid.uuid4().hex
        await coordinator_found(target, group)
        assert await asyncio.to_thread(set_group_config, target, group, streams_num_standby_replicas=1,
                                       streams_initial_rebalance_delay_ms=1500) == 0
        topology = [subtopology("0", sources=[topic], changelogs=[f"{group}-store-changelog"])]
        joined = await beat(target, join(group, first, topology))
        seen = {"first join": (joined.member_epoch, tasks_of(joined.active_tasks), statuses(joined, group))}
        # (the changelog the first join asked for known to the group before the second joins: Kafka makes it a
        # moment later, and its group coordinator sees it later still than Metadata does, so the group is asked)
        await settled(lambda: call(target, STREAMS_GROUP_HEARTBEAT, 0, heartbeat(
            group, first, joined.member_epoch, process="process-1")),
            lambda a: a.error_code or all(s.status_code != MISSING_INTERNAL_TOPICS for s in a.status or ()))
        other = await beat(target, join(group, second, topology, process="process-2"))
        seen["second join"] = (other.member_epoch, tasks_of(other.active_tasks), statuses(other, group))

        async def settled_tasks(member, epoch, process):
            answer = await settled(lambda: call(target, STREAMS_GROUP_HEARTBEAT, 0, heartbeat(
                group, member, epoch, process=process)),
                lambda a: a.error_code or (a.standby_tasks is not None and a.standby_tasks), timeout=30)
            return tasks_of(answer.active_tasks), tasks_of(answer.standby_tasks)
        a = await settled_tasks(first, joined.member_epoch, "process-1")
        b = await settled_tasks(second, other.member_epoch, "process-2")
        seen["tasks"] = sorted([a, b], key=str)
        return seen
    await same(targets, scenario)


async def test_kafka_streams_groups_tool_lists_describes_and_deletes(targets, topic):
    """kafka-streams-groups.sh (Kafka 4.2.1's tool) against both brokers: a group's members and tasks, a
    refused deletion while it has members, its state once empty, its offsets reset, and its deletion print
    the same."""
    from tests.reference.apache_kafka import tool

    async def scenario(target):
        server = f"127.0.0.1:{target.port}"
        await create(target, topic, 2)
        group = f"st-{topic}"
        await coordinator_found(target, group)
        joined = await beat(target, join(group, "member-1", [subtopology("0", sources=[topic])]))
        if not joined.active_tasks:
            await until_assigned(target, group, "member-1", joined.member_epoch)

        async def run(*args):
            result = await asyncio.to_thread(tool, "org.apache.kafka.tools.streams.StreamsGroupCommand",
                                             "--bootstrap-server", server, *args)
            lines = [" ".join(line.split()) for line in (result.stdout + result.stderr).splitlines()
                     if line.strip() and "WARN" not in line]
            return result.returncode, [masked(line, group, topic) for line in lines]
        seen = {"members": await run("--describe", "--group", group, "--members"),
                "delete with a member": await run("--delete", "--group", group)}
        await call(target, 8, 9, {"group_id": group, "generation_id_or_member_epoch": joined.member_epoch,
                                  "member_id": "member-1", "group_instance_id": None, "topics": [
            {"name": topic, "partitions": [{"partition_index": 1, "committed_offset": 0,
                                            "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        await call(target, STREAMS_GROUP_HEARTBEAT, 0, leave(group, "member-1"))
        seen["state once empty"] = await run("--describe", "--group", group, "--state")
        seen["reset"] = await run("--reset-offsets", "--group", group, "--all-input-topics", "--to-earliest",
                                  "--execute")
        seen["delete"] = await run("--delete", "--group", group)
        return seen
    await same(targets, scenario)


async def test_interactive_query_endpoints_and_an_application_shutdown(targets, topic):
    """Members with user endpoints are told which input partitions each endpoint serves, again whenever the
    group's endpoint epoch moved past theirs; a member asking to shut the application down has every member
    told so (SHUTDOWN_APPLICATION)."""
    async def scenario(target):
        await create(target, topic, 4)
        group, first, second = f"st-{topic}", "a" + uuid.uuid4().hex, "b" + uuid.uuid4().hex
        await coordinator_found(target, group)
        topology = [subtopology("0", sources=[topic])]
        seen = []

        def endpoints(answer):
            return (answer.endpoint_information_epoch, None if answer.partitions_by_user_endpoint is None else [
                (e.user_endpoint.host, e.user_endpoint.port, [(masked(p.topic, topic), list(p.partitions))
                                                              for p in e.active_partitions])
                for e in answer.partitions_by_user_endpoint])
        a = await beat(target, join(group, first, topology, user_endpoint={"host": "a.example", "port": 1}))
        seen.append(("a joins", endpoints(a)))
        a = await until_assigned(target, group, first, a.member_epoch) if not a.active_tasks else a
        seen.append(("a assigned", endpoints(a)))
        b = await beat(target, join(group, second, topology, process="process-2",
                                    user_endpoint={"host": "b.example", "port": 2}))
        seen.append(("b joins", endpoints(b)))
        revoke = await call(target, STREAMS_GROUP_HEARTBEAT, 0, heartbeat(
            group, first, a.member_epoch, active=tasks_of(a.active_tasks), standby={}, warmup={},
            endpoint_epoch=a.endpoint_information_epoch))
        seen.append(("a revokes", endpoints(revoke)))
        done = await call(target, STREAMS_GROUP_HEARTBEAT, 0, heartbeat(
            group, first, revoke.member_epoch, active=tasks_of(revoke.active_tasks), standby={}, warmup={},
            endpoint_epoch=revoke.endpoint_information_epoch))
        seen.append(("a done", endpoints(done)))
        given = await until_assigned(target, group, second, b.member_epoch, process="process-2")
        seen.append(("b given", endpoints(given)))
        stop = await call(target, STREAMS_GROUP_HEARTBEAT, 0, heartbeat(
            group, second, given.member_epoch, shutdown_application=True,
            endpoint_epoch=given.endpoint_information_epoch))
        told = await call(target, STREAMS_GROUP_HEARTBEAT, 0, heartbeat(
            group, first, done.member_epoch, endpoint_epoch=done.endpoint_information_epoch))
        seen.append(("shutdown", statuses(stop, second), statuses(told, second)))
        return seen
    await same(targets, scenario)


async def test_an_application_moving_from_the_classic_protocol_keeps_its_offsets(targets, topic):
    """An application that committed offsets as a classic group, now stopped (the group empty), restarted on
    the streams protocol: the group becomes a streams group and its members start from those offsets; a
    classic member cannot join it afterwards."""
    async def scenario(target):
        await create(target, topic, 2)
        group, member = f"st-{topic}", uuid.uuid4().hex
        await coordinator_found(target, group)
        committed = await settled(lambda: call(target, 8, 9, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": topic, "partitions": [{"partition_index": p, "committed_offset": 7 + p,
                                                       "committed_leader_epoch": -1, "committed_metadata": "m"}
                                                      for p in (0, 1)]}]}),
            lambda a: a.topics[0].partitions[0].error_code not in (COORDINATOR_LOADING, NOT_COORDINATOR))
        joined = await beat(target, join(group, member, [subtopology("0", sources=[topic])]))
        listed = await call(target, 16, 5, {"states_filter": [], "types_filter": []})
        fetched = await call(target, 9, 9, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                                        "topics": None}], "require_stable": False})
        classic = await call(target, 11, 9, {"group_id": group, "session_timeout_ms": 10000,
                                             "rebalance_timeout_ms": 10000, "member_id": "",
                                             "group_instance_id": None, "protocol_type": "consumer",
                                             "protocols": [{"name": "range", "metadata": b""}], "reason": None})
        return {"committed": [p.error_code for t in committed.topics for p in t.partitions],
                "joined": (joined.error_code, joined.member_epoch),
                "listed": [(g.group_type, g.group_state) for g in listed.groups if g.group_id == group],
                "offsets": sorted((p.partition_index, p.committed_offset, p.metadata)
                                  for t in fetched.groups[0].topics for p in t.partitions),
                "a classic member": classic.error_code}
    await same(targets, scenario)
