"""Share group members for tests: confluent-kafka ShareConsumers on threads of their own, recording what they
were delivered and which acknowledgements the broker confirmed (the client's acknowledgement callback)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

from confluent_kafka import AcknowledgeType, ShareConsumer


def set_group_configs(bootstrap: str, group: str, **configs) -> None:
    """IncrementalAlterConfigs SET on the GROUP resource, through librdkafka's admin client."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k.replace("_", "."), str(v), incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    admin = AdminClient({"bootstrap.servers": bootstrap})   # (kept alive until the result arrives)
    admin.incremental_alter_configs([resource])[resource].result(10)


class Member:
    """One share consumer polling until stopped. ``decide(message) -> AcknowledgeType | None`` (explicit mode;
    None: leave it unacknowledged, its lock runs out); ``process_s`` a pause after each poll that got records."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], *, decide=None, process_s: float = 0.0,
                 mode: str = "explicit", name: str = "") -> None:
        self.name = name
        self.deliveries: list[tuple[int, int, int]] = []          # (partition, offset, delivery count)
        self.acknowledged: list[tuple[int, int, int]] = []        # (partition, offset, type) confirmed
        self.failed_acks: list[tuple[int, int, int]] = []         # sent, the broker's answer an error
        self.errors: list[str] = []
        self._pending: dict[tuple[int, int], int] = {}
        self._decide = decide or (lambda m: AcknowledgeType.ACCEPT)
        self._explicit = mode == "explicit"
        self._stop = threading.Event()
        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                       "share.acknowledgement.mode": mode})
        self.consumer.set_acknowledgement_commit_callback(self._committed)
        self.consumer.subscribe(topics)
        self._process_s = process_s
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _committed(self, offsets, exception) -> None:
        for tp, done in offsets.items():
            for offset in done:
                kind = self._pending.pop((tp.partition, offset), AcknowledgeType.ACCEPT)
                (self.failed_acks if exception is not None else self.acknowledged).append(
                    (tp.partition, offset, int(kind)))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                messages = self.consumer.poll(0.2)
                got = False
                for m in messages:
                    if m.error() is not None:
                        self.errors.append(str(m.error()))
                        continue
                    got = True
                    self.deliveries.append((m.partition(), m.offset(), m.delivery_count()))
                    kind = self._decide(m) if self._explicit else AcknowledgeType.ACCEPT
                    if kind is not None:
                        self._pending[(m.partition(), m.offset())] = kind
                        if self._explicit:
                            self.consumer.acknowledge(m, kind)
                if got and self._process_s:
                    time.sleep(self._process_s)
                if self._explicit and self._pending:
                    self.consumer.commit_sync(10)
            except Exception as exc:   # a broker away for a moment: the client retries, so do we
                self.errors.append(repr(exc))
                time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()

    def accepted(self) -> list[tuple[int, int]]:
        return [(p, o) for p, o, kind in self.acknowledged if kind == int(AcknowledgeType.ACCEPT)]

    def answered(self) -> int:
        """How many acknowledgements got an answer, confirmed or failed: a broker killed between writing an
        acceptance and answering it leaves it failed for the client although it holds (so a wait for progress
        across kills counts both)."""
        return len(self.acknowledged) + len(self.failed_acks)


def wait_for(condition, timeout: float, what: str, members=()) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    details = "\n".join(f"{m.name}: {len(m.deliveries)} deliveries, {len(m.acknowledged)} acks, "
                        f"{len(m.failed_acks)} failed acks, errors {m.errors[-3:]}" for m in members)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{details}")


def ask(bootstrap: str, api_key: int, version: int, body: dict):
    from kbroker.client.connection import KafkaConnection

    async def one():
        host, port = bootstrap.rsplit(":", 1)
        conn = await KafkaConnection.open(host, int(port), client_id="share-test")
        try:
            return await conn.request(api_key, version, body)
        finally:
            await conn.close()
    return asyncio.run(one())


def joined_share_member(bootstrap: str, group: str, topic: str) -> str:
    """A member id that joined ``group`` subscribing to ``topic``, at the group's coordinator, and was assigned
    its partitions: as in Kafka, the join's answer assigns nothing; the partitions come at a later heartbeat,
    once their share state exists (only then can their leaders load them)."""
    from tests.cluster import wait_until

    def coordinator():
        found = ask(bootstrap.split(",")[0], 10, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0]
        return None if found.error_code else f"{found.host}:{found.port}"
    address = wait_until(coordinator, 30, 0.05, f"{group}'s coordinator")
    member = uuid.uuid4().hex
    answer = ask(address, 76, 1, {"group_id": group, "member_id": member, "member_epoch": 0,
                                   "rack_id": None, "subscribed_topic_names": [topic]})
    assert answer.error_code == 0, answer
    epoch = [answer.member_epoch]

    def assigned():
        beat = ask(address, 76, 1, {"group_id": group, "member_id": member, "member_epoch": epoch[0],
                                     "rack_id": None, "subscribed_topic_names": None})
        assert beat.error_code == 0, beat
        epoch[0] = beat.member_epoch
        return beat.assignment is not None and bool(beat.assignment.topic_partitions)
    if not answer.assignment.topic_partitions:
        wait_until(assigned, 30, 0.05, f"{member}'s partitions of {topic}")
    return member


def topic_id_of(bootstrap: str, topic: str) -> bytes:
    answer = ask(bootstrap, 3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
    return bytes(answer.topics[0].topic_id)


def share_state(bootstrap: str, group: str, topic_id: bytes, partition: int):
    """The share partition's state at the share coordinator (ReadShareGroupState, as its leader reads it: at the
    partition's leader epoch, which a read at -1 or an older one is fenced below; on a single broker every shard
    is there)."""
    metadata = ask(bootstrap, 3, 12, {"topics": [{"topic_id": topic_id}], "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})
    epoch = next(p.leader_epoch for t in metadata.topics for p in t.partitions if p.partition_index == partition)
    answer = ask(bootstrap, 84, 0, {"group_id": group, "topics": [
        {"topic_id": topic_id, "partitions": [{"partition": partition, "leader_epoch": epoch}]}]})
    return answer.results[0].partitions[0]


def share_group_epoch(bootstrap: str, group: str) -> tuple[int, list[int]]:
    """The group's epoch and its members' epochs, from ShareGroupDescribe."""
    described = ask(bootstrap, 77, 1, {"group_ids": [group], "include_authorized_operations": False}).groups[0]
    return described.group_epoch, sorted(m.member_epoch for m in described.members)


def settled_share_assignment(bootstrap: str, group: str) -> dict[str, set[int]] | None:
    """Each member's partitions (all topics') once the group is settled, from ShareGroupDescribe: every member
    at the group's epoch, and the assignment computed at it; None until then."""
    g = ask(bootstrap, 77, 1, {"group_ids": [group], "include_authorized_operations": False}).groups[0]
    if g.error_code or g.assignment_epoch != g.group_epoch or any(m.member_epoch != g.group_epoch for m in g.members):
        return None
    return {m.member_id: {p for t in m.assignment.topic_partitions for p in t.partitions} for m in g.members}


def share_group_members(bootstrap: str, group: str, assigned: bool = False) -> int:
    """How many members ShareGroupDescribe lists (single broker: it coordinates every group); ``assigned``:
    only those with partitions (a member is given a partition at a heartbeat after its join, once the
    partition's share state is initialized, as in Kafka)."""
    answer = ask(bootstrap, 77, 1, {"group_ids": [group], "include_authorized_operations": False})
    return sum(1 for m in answer.groups[0].members if not assigned or m.assignment.topic_partitions)
