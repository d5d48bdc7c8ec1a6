"""KIP-1071 streams groups in the group coordinator, over a real __consumer_offsets log and a manual clock:
tasks split between processes (revoked before they move), standbys kept off their active's process, the initial
delay, fencing, a reload from the log; and the pure parts beside it: the topology's configuration against the
topics there are, and the sticky assignor."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kbroker.coordinators.group.streams.assignor import MemberSpec, assign
from kbroker.coordinators.group.streams.model import Subtopology, Target, TopicInfo, Topology
from kbroker.coordinators.group.streams.topology import (
    INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS, MISSING_SOURCE_TOPICS, InvalidTopology, configure)
from kbroker.protocol import schema
from kbroker.protocol.errors import ErrorCode as E
from kbroker.protocol.types import BufferReader
from tests.streams_requests import STREAMS_GROUP_HEARTBEAT, heartbeat, join, subtopology
from tests.unit.coordinators.test_consumer_group_coordinator import ConsumerHarness, Topic

TOPOLOGY = [subtopology("0", sources=["t"]), subtopology("1", sources=["other"], changelogs=["g-store-changelog"])]


def request(body: dict):
    """The request as the broker decodes it off the wire."""
    struct = schema.struct_for(STREAMS_GROUP_HEARTBEAT, 0, True)
    out, _ = schema.encode(struct, body)
    return schema.decode(struct, BufferReader(out.getvalue(), 0))


class StreamsHarness(ConsumerHarness):
    def __init__(self, directory: str, **settings) -> None:
        super().__init__(directory)
        self.metadata["g-store-changelog"] = Topic(b"\x09" * 16, 2)
        self.config = replace(self.config, **{"streams_initial_rebalance_delay_ms": 0, **settings})
        self.coordinator.config = self.config

    def streams(self, member: str, epoch: int, *, process="p1", owned=None, standby=None, coordinator=None):
        body = join("g", member, TOPOLOGY, process=process) if epoch == 0 else heartbeat(
            "g", member, epoch, active=owned, standby=standby if standby is not None else (
                None if owned is None else {}), warmup=None if owned is None else {})
        answer, _ = (coordinator or self.coordinator).streams_group_heartbeat(request(body), "client", "/127.0.0.1")
        return answer


def tasks(answer, kind="active_tasks") -> dict | None:
    if answer[kind] is None:
        return None
    return {t["subtopology_id"]: t["partitions"] for t in answer[kind]}


def count(t: dict | None) -> int:
    return sum(len(ps) for ps in (t or {}).values())


@pytest.fixture
def h(tmp_path) -> StreamsHarness:
    return StreamsHarness(str(tmp_path))


def test_two_processes_split_the_tasks_the_first_revoking_before_the_second_gets_them(h):
    a = h.streams("a", 0)
    assert (a["error_code"], a["member_epoch"], tasks(a)) == (0, 2, {"0": [0, 1, 2, 3], "1": [0, 1]})
    b = h.streams("b", 0, process="p2")
    assert (b["member_epoch"], tasks(b)) == (3, {})                       # a still holds everything
    told = h.streams("a", 2, owned=tasks(a))
    assert told["member_epoch"] == 2 and count(tasks(told)) == 3          # three to revoke, still at epoch 2
    assert tasks(h.streams("b", 3, owned={})) is None                     # withheld meanwhile
    assert h.coordinator.groups["g"].state == "Reconciling"
    done = h.streams("a", 2, owned=tasks(told))
    assert done["member_epoch"] == 3
    given = h.streams("b", 3, owned={})
    assert count(tasks(given)) == 3 and not {(s, p) for s, ps in tasks(given).items() for p in ps} & \
        {(s, p) for s, ps in tasks(told).items() for p in ps}
    assert h.coordinator.groups["g"].state == "Stable"


def test_a_reloaded_coordinator_knows_the_members_their_tasks_and_the_topology(h):
    a = h.streams("a", 0)
    b = h.streams("b", 0, process="p2")
    h.streams("a", 2, owned=tasks(a))
    group = h.coordinator.groups["g"]
    fresh = h.reload()
    reloaded = fresh.groups["g"]
    assert reloaded.members == group.members and reloaded.target == group.target
    assert (reloaded.topology, reloaded.group_epoch, reloaded.assignment_epoch, reloaded.validated_topology_epoch,
            reloaded.metadata_hash) == (group.topology, group.group_epoch, group.assignment_epoch,
                                        group.validated_topology_epoch, group.metadata_hash)
    again = h.streams("b", b["member_epoch"], owned={}, coordinator=fresh)
    assert (again["error_code"], again["member_epoch"]) == (E.NONE, 3)


def test_standbys_stay_off_the_process_of_their_active_task(tmp_path):
    h = StreamsHarness(str(tmp_path), streams_num_standby_replicas=1)
    a = h.streams("a", 0)
    b = h.streams("b", 0, process="p2")
    a = h.streams("a", a["member_epoch"], owned=tasks(a))
    a = h.streams("a", a["member_epoch"], owned=tasks(a))
    b = h.streams("b", b["member_epoch"], owned={})
    group = h.coordinator.groups["g"]
    for member in group.members.values():
        others = [m for m in group.members.values() if m.process_id != member.process_id]
        for s, ps in group.target[member.member_id].standby.items():
            assert all(p in group.target[o.member_id].active.get(s, ()) for o in others for p in ps)
    # Only the stateful subtopology (a changelog) has standbys: one for each of its two tasks.
    assert sorted(p for t in group.target.values() for p in t.standby.get("1", ())) == [0, 1]
    assert not any(t.standby.get("0") for t in group.target.values())


def test_the_first_member_waits_out_the_initial_delay(tmp_path):
    h = StreamsHarness(str(tmp_path), streams_initial_rebalance_delay_ms=3000)
    a = h.streams("a", 0)
    assert (a["member_epoch"], tasks(a), [s["status_code"] for s in a["status"]]) == (1, {}, [5])
    h.scheduler.advance(3000)
    assigned = h.streams("a", 1, owned={})
    assert (assigned["member_epoch"], count(tasks(assigned))) == (2, 6)


def test_a_silent_member_is_fenced_and_its_tasks_go_to_the_other(h):
    a = h.streams("a", 0)
    b = h.streams("b", 0, process="p2")
    for _ in range(45):
        h.scheduler.advance(1000)
        b = h.streams("b", b["member_epoch"], owned=tasks(b) or {})
    assert list(h.coordinator.groups["g"].members) == ["b"]
    assert count(h.coordinator.groups["g"].target["b"].active) == 6
    assert a["member_epoch"] < b["member_epoch"]


def test_an_offset_commit_behind_the_members_epoch_is_taken_for_tasks_it_held_since(h):
    a = h.streams("a", 0)
    h.streams("b", 0, process="p2")
    told = h.streams("a", 2, owned=tasks(a))
    h.streams("a", 2, owned=tasks(told))                                   # a moves to epoch 3
    group = h.coordinator.groups["g"]
    kept = next(iter(group.members["a"].active["0"]))
    assert group.commit_error("a", 2, "t", kept) == E.NONE                 # held since epoch 2
    assert group.commit_error("a", 4, "t", kept) == E.STALE_MEMBER_EPOCH   # ahead
    lost = next(p for p in range(4) if p not in group.members["a"].active.get("0", {}))
    assert group.commit_error("a", 2, "t", lost) == E.STALE_MEMBER_EPOCH   # not its task any more
    assert group.commit_error("nobody", 2, "t", kept) == E.UNKNOWN_MEMBER_ID


# ------------------------------------------------------------------ the topology against the topics
def topology(*subtopologies) -> Topology:
    return Topology(0, tuple(subtopologies))


def test_repartition_topics_take_their_writers_widest_input_and_changelogs_their_task_count():
    configured = configure(topology(
        Subtopology("0", source_topics=("a", "b"), repartition_sink_topics=("r1",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("r1"),), repartition_sink_topics=("r2",),
                    state_changelog_topics=(TopicInfo("c1"),)),
        Subtopology("2", repartition_source_topics=(TopicInfo("r2"),), state_changelog_topics=(TopicInfo("c2"),))),
        {"a": 2, "b": 5})
    assert configured.tasks == {"0": 5, "1": 5, "2": 5}
    assert {n: t.partitions for n, t in configured.to_create.items()} == {"r1": 5, "r2": 5, "c1": 5, "c2": 5}
    assert configured.status[0] == MISSING_INTERNAL_TOPICS and not configured.is_ready
    ready = configure(configured_topology := topology(Subtopology("0", source_topics=("a",))), {"a": 2})
    assert ready.is_ready and ready.tasks == {"0": 2} and configured_topology.epoch == 0


def test_what_keeps_a_topology_from_being_ready():
    assert configure(topology(Subtopology("0", source_topics=("b", "a"))), {}).status == (
        MISSING_SOURCE_TOPICS, "Source topics a, b are missing.")
    assert configure(topology(Subtopology("0", source_topics=("a", "b"), copartition_groups=(((0, 1), ()),))),
                     {"a": 2, "b": 3}).status[0] == INCORRECTLY_PARTITIONED_TOPICS
    assert configure(topology(Subtopology("0", source_topics=("a",), state_changelog_topics=(TopicInfo("c"),))),
                     {"a": 2, "c": 3}).status == (INCORRECTLY_PARTITIONED_TOPICS, "Existing topic c has different "
                                                  "number of partitions: expected 2, found 3")
    with pytest.raises(InvalidTopology, match="never used as a sink"):
        configure(topology(Subtopology("0", repartition_source_topics=(TopicInfo("r"),))), {})
    with pytest.raises(InvalidTopology, match="loops"):
        configure(topology(
            Subtopology("0", repartition_source_topics=(TopicInfo("x"),), repartition_sink_topics=("y",)),
            Subtopology("1", repartition_source_topics=(TopicInfo("y"),), repartition_sink_topics=("x",))), {})


# ------------------------------------------------------------------ the sticky assignor
def test_the_assignor_keeps_tasks_where_they_were_and_balances_what_moves():
    before = assign({"a": MemberSpec("p1", Target()), "b": MemberSpec("p2", Target())}, {"0": 6}, set(), 0)
    assert sorted(len(t.active["0"]) for t in before.values()) == [3, 3]
    after = assign({"a": MemberSpec("p1", before["a"]), "b": MemberSpec("p2", before["b"]),
                    "c": MemberSpec("p3", Target())}, {"0": 6}, set(), 0)
    assert sorted(len(t.active["0"]) for t in after.values()) == [2, 2, 2]
    assert after["a"].active["0"] <= before["a"].active["0"] and after["b"].active["0"] <= before["b"].active["0"]


def test_standbys_need_another_process():
    one_process = assign({"a": MemberSpec("p", Target()), "b": MemberSpec("p", Target())}, {"0": 2}, {"0"}, 1)
    assert not any(t.standby for t in one_process.values())          # no other process: no standby
    two = assign({"a": MemberSpec("p1", Target()), "b": MemberSpec("p2", Target())}, {"0": 2}, {"0"}, 2)
    assert sorted(p for t in two.values() for p in t.standby.get("0", ())) == [0, 1]   # one each, not two


def test_the_first_member_to_ask_for_a_shutdown_is_the_one_named(h):
    h.streams("a", 0)
    b = h.streams("b", 0, process="p2")
    body = heartbeat("g", "b", b["member_epoch"], shutdown_application=True)
    h.coordinator.streams_group_heartbeat(request(body), "client", "/127.0.0.1")
    a = h.coordinator.streams_group_heartbeat(request(dict(heartbeat("g", "a", 2), shutdown_application=True)),
                                              "client", "/127.0.0.1")[0]
    assert [(s["status_code"], "member b " in s["status_detail"]) for s in a["status"]] == [(4, True)]
