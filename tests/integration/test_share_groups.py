"""Share groups (KIP-932) with librdkafka's ShareConsumer against a real broker: members splitting one
partition, explicit acknowledgement (accept, release, reject) and delivery counts, the delivery limit, lock
expiry, implicit mode, share.auto.offset.reset, partitions added under the members, and kill -9 of the broker
while members consume."""

from __future__ import annotations

import uuid

from confluent_kafka import AcknowledgeType

from tests.integration.groupworkers import fill
from tests.integration.share_members import (
    Member, joined_share_member, set_group_configs, settled_share_assignment, share_group_epoch, share_group_members,
    share_state, topic_id_of, wait_for)
from tests.integration.workload import make_topic


def small_batches(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "batch.num.messages": 10})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode())
        producer.poll(0)
    assert producer.flush(30) == 0


def test_members_split_one_partition_and_each_record_is_accepted_once(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, 1)
    group = f"share-{topic_name}"
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    members = [Member(broker.bootstrap, group, [topic_name], process_s=0.02, name=f"m{i}") for i in range(3)]
    try:
        wait_for(lambda: share_group_members(broker.bootstrap, group, assigned=True) == 3, 30,
                 "three members with the partition", members)
        # Batches of ten: a fetch acquires whole batches, so one batch of thousands would go to one member.
        small_batches(broker.bootstrap, topic_name, 2000)
        wait_for(lambda: sum(len(m.accepted()) for m in members) >= 2000, 60, "every record accepted", members)
    finally:
        for m in members:
            m.stop()
    accepted = [a for m in members for a in m.accepted()]
    assert len(accepted) == len(set(accepted)) == 2000
    assert sum(1 for m in members if m.accepted()) >= 2, "one member took every record"
    state = share_state(broker.bootstrap, group, topic_id_of(broker.bootstrap, topic_name), 0)
    assert (state.error_code, state.start_offset, state.state_batches) == (0, 2000, [])


def test_share_consumers_joining_take_partitions_only_from_the_balance(broker, topic_name):
    """Three ShareConsumers join a four-partition topic one by one: each settled assignment covers the four
    partitions, and a member already there only gives partitions up (Kafka's assignor is sticky)."""
    make_topic(broker.bootstrap, topic_name, 4)
    group = f"share-{topic_name}"
    members, held = [], {}
    try:
        for i in range(3):
            members.append(Member(broker.bootstrap, group, [topic_name], name=f"m{i}"))
            settled = []

            def all_assigned(count=i + 1):
                now = settled_share_assignment(broker.bootstrap, group)
                settled[:] = [now]
                return now is not None and len(now) == count and all(now.values()) and \
                    set().union(*now.values()) == {0, 1, 2, 3}
            wait_for(all_assigned, 30, f"{i + 1} members settled with the four partitions", members)
            now = settled[0]
            assert all(now[m] <= held[m] for m in held), (held, now)
            assert sorted(map(len, now.values())) == [[4], [2, 2], [1, 1, 2]][i]
            held = now
    finally:
        for m in members:
            m.stop()


def test_released_records_come_again_rejected_ones_never_and_the_delivery_limit_archives(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, 1)
    group = f"share-{topic_name}"
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    fill(broker.bootstrap, topic_name, 10)

    def decide(m):   # 0 released forever, 1 released once, 2 rejected, the rest accepted
        if m.offset() == 0 or (m.offset() == 1 and m.delivery_count() == 1):
            return AcknowledgeType.RELEASE
        return AcknowledgeType.REJECT if m.offset() == 2 else AcknowledgeType.ACCEPT
    member = Member(broker.bootstrap, group, [topic_name], decide=decide, name="m")
    topic_id = topic_id_of(broker.bootstrap, topic_name)
    try:
        wait_for(lambda: share_state(broker.bootstrap, group, topic_id, 0).start_offset == 10, 30,
                 "every record done", [member])
    finally:
        member.stop()
    counts: dict[int, list[int]] = {}
    for _, offset, count in member.deliveries:
        counts.setdefault(offset, []).append(count)
    assert counts[0] == [1, 2, 3, 4, 5]    # archived after the fifth delivery (group.share.delivery.count.limit)
    assert counts[1] == [1, 2] and counts[2] == [1]
    assert all(counts[o] == [1] for o in range(3, 10))
    assert sorted(member.accepted()) == [(0, o) for o in range(1, 10) if o != 2]


def test_a_silent_members_records_go_to_another_when_its_lock_runs_out(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, 1)
    group = f"share-{topic_name}"
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest", share_record_lock_duration_ms=1000)
    fill(broker.bootstrap, topic_name, 5)
    silent = Member(broker.bootstrap, group, [topic_name], decide=lambda m: None, name="silent")
    other = None
    try:
        wait_for(lambda: len(silent.deliveries) >= 5, 30, "the silent member's deliveries", [silent])
        other = Member(broker.bootstrap, group, [topic_name], name="other")
        wait_for(lambda: len(other.accepted()) == 5, 30, "the other member's acceptances", [silent, other])
    finally:
        for m in (silent, other):
            if m is not None:
                m.stop()
    assert sorted(c for _, _, c in other.deliveries) == [2, 2, 2, 2, 2]


def test_implicit_mode_accepts_what_the_last_poll_returned(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, 2)
    group = f"share-{topic_name}"
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    fill(broker.bootstrap, topic_name, 200)
    member = Member(broker.bootstrap, group, [topic_name], mode="implicit", name="m")
    topic_id = topic_id_of(broker.bootstrap, topic_name)
    try:
        wait_for(lambda: {(p, o) for p, o, _ in member.deliveries} and len(member.deliveries) >= 200, 30,
                 "200 deliveries", [member])
    finally:
        member.stop()   # (the close sends the last poll's acceptances)
    assert len({(p, o) for p, o, _ in member.deliveries}) == 200
    done = sum(share_state(broker.bootstrap, group, topic_id, p).start_offset for p in range(2))
    assert done == 200


def test_share_auto_offset_reset_latest_starts_after_what_was_there(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, 1)
    fill(broker.bootstrap, topic_name, 20)
    group = f"share-latest-{uuid.uuid4().hex[:6]}"   # latest is the default: no group config
    member = Member(broker.bootstrap, group, [topic_name], name="latest")
    topic_id = topic_id_of(broker.bootstrap, topic_name)
    try:
        wait_for(lambda: share_state(broker.bootstrap, group, topic_id, 0).start_offset == 20, 30,
                 "the share partition made at the end of the log", [member])
        fill(broker.bootstrap, topic_name, 5, first=20)
        wait_for(lambda: len(member.accepted()) == 5, 30, "the five new records", [member])
    finally:
        member.stop()
    assert sorted(o for _, o in member.accepted()) == [20, 21, 22, 23, 24]


def test_no_record_is_lost_or_accepted_twice_across_kill_9(fresh_broker, topic_name):
    """Members accept every record while the broker is killed and restarted: the share state written before each
    acknowledgement was answered survives, what was in flight is delivered again, and the group's members are
    reloaded with it (they carry on at their epochs: no rejoin, no new group epoch)."""
    fresh_broker.start()
    make_topic(fresh_broker.bootstrap, topic_name, 2)
    group = f"share-{topic_name}"
    set_group_configs(fresh_broker.bootstrap, group, share_auto_offset_reset="earliest")
    fill(fresh_broker.bootstrap, topic_name, 3000)
    members = [Member(fresh_broker.bootstrap, group, [topic_name], process_s=0.01, name=f"m{i}") for i in range(2)]
    topic_id = topic_id_of(fresh_broker.bootstrap, topic_name)
    try:
        wait_for(lambda: sum(len(m.accepted()) for m in members) >= 800, 60, "800 accepted", members)
        epochs = share_group_epoch(fresh_broker.bootstrap, group)
        fresh_broker.kill()
        fresh_broker.start()
        assert share_group_epoch(fresh_broker.bootstrap, group) == epochs
        wait_for(lambda: sum(share_state(fresh_broker.bootstrap, group, topic_id, p).start_offset
                             for p in range(2)) == 3000, 90, "every record done", members)
    finally:
        after = share_group_epoch(fresh_broker.bootstrap, group)
        for m in members:
            m.stop()
    # No member rejoined: the group's epoch never moved (a member's own epoch may have caught up with it).
    assert after[0] == epochs[0] and len(after[1]) == len(epochs[1]), (epochs, after)
    accepted = [a for m in members for a in m.accepted()]
    assert len(accepted) == len(set(accepted)), "a record was accepted twice"
    unconfirmed = {(p, o) for m in members for p, o, _ in m.failed_acks}
    delivered = {(p, o) for m in members for p, o, _ in m.deliveries}
    # Every record was delivered, and accepted once: confirmed, or sent when the broker died (then it was
    # delivered again unless its acceptance had been written).
    assert len(delivered) == 3000
    assert set(accepted) | unconfirmed >= delivered


def test_cli_groups_describe_shows_a_share_groups_start_offsets_and_lag(broker, topic_name):
    from tests.integration.test_operations import cli
    make_topic(broker.bootstrap, topic_name, 1)
    group = f"share-{topic_name}"
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    fill(broker.bootstrap, topic_name, 10)
    member = Member(broker.bootstrap, group, [topic_name], decide=lambda m: AcknowledgeType.ACCEPT
                    if m.offset() < 4 else None, name="m")
    try:
        wait_for(lambda: len(member.accepted()) == 4, 30, "four accepted", [member])
        described = cli(broker, "groups", "describe", "--group", group)
    finally:
        member.stop()
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0].startswith(f"Group {group} is Stable (share group, group epoch "), described.stdout
    assert f"{topic_name}\t0\t4\t6" in lines, described.stdout   # start offset 4, six records to go
    # Its member gone, the group still shows its share partitions: their lag is what an operator looks at then
    wait_for(lambda: share_group_members(broker.bootstrap, group) == 0, 30, "the member gone")
    described = cli(broker, "groups", "describe", "--group", group)
    lines = described.stdout.splitlines()
    assert lines[0].startswith(f"Group {group} is Empty (share group, group epoch "), described.stdout
    assert f"{topic_name}\t0\t4\t6" in lines, described.stdout


def test_deleting_an_empty_share_group_deletes_its_share_state(broker, topic_name):
    from confluent_kafka.admin import AdminClient
    make_topic(broker.bootstrap, topic_name, 2)
    group = f"share-{topic_name}"
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    fill(broker.bootstrap, topic_name, 20)
    member = Member(broker.bootstrap, group, [topic_name], name="m")
    topic_id = topic_id_of(broker.bootstrap, topic_name)
    try:
        wait_for(lambda: len(member.accepted()) == 20, 30, "twenty accepted", [member])
    finally:
        member.stop()
    assert sum(share_state(broker.bootstrap, group, topic_id, p).start_offset for p in range(2)) == 20
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    wait_for(lambda: share_group_members(broker.bootstrap, group) == 0, 30, "the member gone", [member])
    admin.delete_consumer_groups([group])[group].result(10)
    # (no state left: the share coordinator refuses a read of it, INVALID_REQUEST "... uninitialized ...")
    assert [share_state(broker.bootstrap, group, topic_id, p).error_code for p in range(2)] == [42, 42]


def test_a_read_committed_share_group_gets_committed_records_only(broker, topic_name):
    """share.isolation.level=read_committed: a producer's aborted transaction is never handed out, its next,
    committed one is."""
    from confluent_kafka import Producer
    make_topic(broker.bootstrap, topic_name, 1)
    group = f"share-{topic_name}"
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest",
                      share_isolation_level="read_committed")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"txn-{topic_name}"})
    producer.init_transactions(10)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic_name, f"{outcome}-{i}".encode())
        producer.flush(10)
        (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(10)
    member = Member(broker.bootstrap, group, [topic_name], name="m")
    topic_id = topic_id_of(broker.bootstrap, topic_name)
    try:
        # 9 records and 3 markers: done once the start offset is past the last marker
        wait_for(lambda: share_state(broker.bootstrap, group, topic_id, 0).start_offset == 12, 30,
                 "every record done", [member])
    finally:
        member.stop()
    assert sorted(o for _, o in member.accepted()) == [0, 1, 2, 8, 9, 10]


def test_share_auto_offset_reset_by_duration_starts_at_records_that_recent(broker, topic_name):
    make_topic(broker.bootstrap, topic_name, 1)
    fill(broker.bootstrap, topic_name, 5)
    group = f"share-{topic_name}"
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="by_duration:PT1H")
    member = Member(broker.bootstrap, group, [topic_name], name="m")
    try:
        wait_for(lambda: len(member.accepted()) == 5, 30, "the five records of the last hour", [member])
    finally:
        member.stop()
    assert sorted(o for _, o in member.accepted()) == [0, 1, 2, 3, 4]


def test_partitions_added_to_a_topic_reach_the_members_share_sessions(broker, topic_name):
    """The topic grows from one partition to three while two members consume: the group's epoch moves, the
    members are assigned the new partitions and add them to their share sessions, and every record of every
    partition is accepted once."""
    from confluent_kafka.admin import AdminClient, NewPartitions
    make_topic(broker.bootstrap, topic_name, 1)
    group = f"share-{topic_name}"
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    fill(broker.bootstrap, topic_name, 300)
    members = [Member(broker.bootstrap, group, [topic_name], process_s=0.01, name=f"m{i}") for i in range(2)]
    try:
        wait_for(lambda: sum(len(m.accepted()) for m in members) >= 300, 60, "the first partition's records",
                 members)
        epoch, _ = share_group_epoch(broker.bootstrap, group)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(10)
        fill(broker.bootstrap, topic_name, 600, first=300)
        wait_for(lambda: sum(len(m.accepted()) for m in members) >= 900, 60, "every record accepted", members)
        assert share_group_epoch(broker.bootstrap, group)[0] > epoch
    finally:
        for m in members:
            m.stop()
    accepted = [a for m in members for a in m.accepted()]
    assert len(accepted) == len(set(accepted)) == 900
    assert {p for p, _ in accepted} == {0, 1, 2}


def test_a_deleted_topics_share_state_leaves_the_share_coordinator(tmp_path, topic_name):
    """A share group's state for each partition of a topic goes from the share coordinator when the topic is
    deleted (tombstones, as Kafka's coordinator cleans up), and the topic from the group's share partitions; both
    stay gone after a restart replays the state topic and __consumer_offsets; another topic's state stays.
    (In-process broker: the coordinators' memory is read on its loop.)"""
    from confluent_kafka.admin import AdminClient
    from kbroker.broker.embedded import KBroker
    kept, group = f"{topic_name}-kept", f"share-{topic_name}"

    async def state_ids(embedded):
        """The topic ids of the group's states at the share coordinator, and of its share partitions at the
        group coordinator (ShareGroupStatePartitionMetadata: Kafka's coordinator drops a deleted topic too)."""
        held = sorted({key[1] for key in embedded.broker.share_coordinator.states if key[0] == group})
        return held, sorted(embedded.broker.group_coordinator.groups[group].share_partitions)

    with KBroker(str(tmp_path)) as embedded:
        for name in (topic_name, kept):
            make_topic(embedded.bootstrap_servers, name, 2)
            joined_share_member(embedded.bootstrap_servers, group, name)   # (the state of its partitions made)
        ids = {name: topic_id_of(embedded.bootstrap_servers, name) for name in (topic_name, kept)}
        assert embedded.run_on_loop(state_ids(embedded)) == (sorted(ids.values()),) * 2
        admin = AdminClient({"bootstrap.servers": embedded.bootstrap_servers})
        admin.delete_topics([topic_name])[topic_name].result(30)
        del admin   # (librdkafka's client gone before the broker stops: no reconnect noise)
        assert embedded.run_on_loop(state_ids(embedded)) == ([ids[kept]], [ids[kept]])
    with KBroker(str(tmp_path)) as embedded:
        assert embedded.run_on_loop(state_ids(embedded)) == ([ids[kept]], [ids[kept]])
