"""Partition reassignment (KIP-455) on the active controller: AlterPartitionReassignments and
ListPartitionReassignments, as Kafka's ZooKeeper-mode controller runs them.

A reassignment of a partition from its original replicas ORS to target replicas TRS goes in two steps:

1. The assignment becomes RS = TRS followed by ORS - TRS, with ``adding`` = TRS - ORS and ``removing`` =
   ORS - TRS, written to ``/brokers/topics/<topic>`` (so a new controller carries on); the leader epoch is
   bumped and every replica in RS gets LeaderAndIsr: the new ones create their log and fetch from the leader.
2. Once every target replica is in the ISR (the leader reports it with AlterPartition), the leader moves into
   TRS if it is not there, the ISR keeps only TRS members, the assignment becomes TRS, and the replicas that
   left get StopReplica with delete.

Invariants: a partition's leader and ISR always stay within its current assignment; a replica leaves only
after every target replica has caught up, so no acknowledged write is lost by the move; cancelling (null
replicas) returns to ORS the same way, removing the replicas that were being added.
"""

from __future__ import annotations

import structlog

from kbroker.broker.cluster.assignment import assignment_problem
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("broker.cluster.reassignment")



class Reassignments:
    def __init__(self, controller) -> None:
        self.c = controller

    # ------------------------------------------------------------------ queries
    def ongoing(self, tp: tuple[str, int]) -> bool:
        a = self.c.assignments.get(tp[0])
        return a is not None and (tp[1] in a.adding or tp[1] in a.removing)

    def original(self, tp: tuple[str, int]) -> list[int]:
        """ORS: the replicas before the ongoing reassignment (the current ones when there is none)."""
        a = self.c.assignments[tp[0]]
        adding = a.adding.get(tp[1], [])
        return [r for r in a.partitions[tp[1]] if r not in adding]

    def target(self, tp: tuple[str, int]) -> list[int]:
        a = self.c.assignments[tp[0]]
        removing = a.removing.get(tp[1], [])
        return [r for r in a.partitions[tp[1]] if r not in removing]

    def listed(self, request) -> dict:
        c = self.c
        if not c.active:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "error_message": None,
                    "topics": []}
        if request.topics is None:
            wanted = [tp for tp in sorted(c.states) if self.ongoing(tp)]
        else:
            wanted = [(t.name, p) for t in request.topics for p in t.partition_indexes
                      if (t.name, p) in c.states and self.ongoing((t.name, p))]
        topics: dict[str, list] = {}
        for tp in wanted:
            a = c.assignments[tp[0]]
            topics.setdefault(tp[0], []).append({
                "partition_index": tp[1], "replicas": a.partitions[tp[1]],
                "adding_replicas": a.adding.get(tp[1], []), "removing_replicas": a.removing.get(tp[1], [])})
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    # ------------------------------------------------------------------ AlterPartitionReassignments
    async def alter(self, request) -> dict:
        c = self.c
        if not c.active:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                    "error_message": "This broker is not the controller", "responses": []}
        responses, started, dropped = [], set(), {}
        allow_rf_change = request.get("allow_replication_factor_change", True)
        for topic in request.topics:
            results = []
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                error, message = self._refusal(tp, p.replicas, allow_rf_change)
                if not error:
                    target = self.original(tp) if p.replicas is None else list(p.replicas)
                    dropped[tp] = self._begin(tp, target)
                    started.add(tp)
                results.append({"partition_index": p.partition_index, "error_code": error, "error_message": message})
            responses.append({"name": topic.name, "partitions": results})
        if started:
            await self._write(started)
            await c._publish(started)
            self._stop(dropped)
            await self.maybe_complete(started)
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses,
                "allow_replication_factor_change": allow_rf_change}

    def _refusal(self, tp, replicas, allow_rf_change: bool = True) -> tuple[ErrorCode, str | None]:
        c = self.c
        if tp not in c.states:   # (Kafka's controller's words for each refusal)
            if (tp[0], 0) not in c.states:   # (every topic has a partition 0)
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {tp[0]}."
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {tp[0]}:{tp[1]}."
        if replicas is None:
            if not self.ongoing(tp):
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
            return ErrorCode.NONE, None
        problem = assignment_problem(replicas, set(c.live), None)
        if problem:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
        current = len(self.original(tp))
        if not allow_rf_change and len(replicas) != current:   # (KIP-860)
            return ErrorCode.INVALID_REPLICATION_FACTOR, f"The replication factor is changed from {current} to " \
                                                         f"{len(replicas)}"
        return ErrorCode.NONE, None

    def _begin(self, tp, target: list[int]) -> list[int]:
        """Step 1: RS = TRS + (ORS - TRS) with adding and removing recorded; the leader epoch moves on. Returns
        the replicas that were being added by a reassignment this one replaces (or cancels) and now leave."""
        c = self.c
        a = c.assignments[tp[0]]
        ors = self.original(tp)
        before = list(a.partitions[tp[1]])
        a.partitions[tp[1]] = target + [r for r in ors if r not in target]
        adding, removing = [r for r in target if r not in ors], [r for r in ors if r not in target]
        for held, ids in ((a.adding, adding), (a.removing, removing)):
            if ids:
                held[tp[1]] = ids
            else:
                held.pop(tp[1], None)
        state = c.states[tp]   # (replicas that were being added and are not in the new set leave the ISR)
        isr = [r for r in state.isr if r in a.partitions[tp[1]]]
        leader = state.leader if state.leader in a.partitions[tp[1]] else (isr[0] if isr else state.leader)
        c._change(tp, leader, isr or state.isr)
        log.info("reassignment_started", topic=tp[0], partition=tp[1], target=target, adding=adding,
                 removing=removing)
        return [r for r in before if r not in a.partitions[tp[1]]]

    # ------------------------------------------------------------------ completion
    async def maybe_complete(self, partitions) -> None:
        """Step 2 for every partition whose target replicas are all in the ISR."""
        c = self.c
        leaving: dict[tuple[str, int], list[int]] = {}
        for tp in partitions:
            if not self.ongoing(tp) or tp not in c.states:
                continue
            target, state = self.target(tp), c.states[tp]
            if any(r not in state.isr for r in target):
                continue
            a = c.assignments[tp[0]]
            leaving[tp] = [r for r in a.partitions[tp[1]] if r not in target]
            isr = [r for r in state.isr if r in target]
            leader = state.leader if state.leader in target and state.leader in c.live else \
                next((r for r in isr if r in c.live), state.leader)
            a.partitions[tp[1]] = target
            a.adding.pop(tp[1], None)
            a.removing.pop(tp[1], None)
            c._change(tp, leader, isr)
            log.info("reassignment_completed", topic=tp[0], partition=tp[1], replicas=target, leader=leader)
        if leaving:
            await self._write(set(leaving))
            await c._publish(set(leaving))
            self._stop(leaving)

    def _stop(self, leaving: dict[tuple[str, int], list[int]]) -> None:
        """The replicas that left delete their copy: only after the new leader and ISR were written and sent."""
        for tp, brokers in leaving.items():
            for b in brokers:
                if b in self.c.live:
                    self.c.send_delete_replicas(b, tp[0], [tp[1]])

    async def _write(self, partitions) -> None:
        """The assignment of every topic touched, then the partition states."""
        c = self.c
        for name in sorted({tp[0] for tp in partitions}):
            await c._zk(c.zk.set_topic_assignment, c.assignments[name])
        await c._write_pending()
