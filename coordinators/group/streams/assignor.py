"""The sticky task assignor of streams groups (Kafka 4.2's only one, "sticky").

A member is one consumer of a Streams process; a process's load is the tasks of its members per member. Active
tasks stay where they were (the member's previous target) while that member is under its share of them (the
total over the members, rounded up), then go to a member that kept the task as a standby, then, in subtopology
order, to the least loaded member of the least loaded process. With ``num.standby.replicas`` N, each task of a
stateful subtopology (one with a changelog) gets up to N standbys, each in a process that holds the task in no
other role, preferring the members that held it before; missing capacity leaves a standby unassigned.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.coordinators.group.streams.model import Target

Task = tuple[str, int]


@dataclass(frozen=True)
class MemberSpec:
    process_id: str
    previous: Target


def _share(total: int, members: int) -> int:
    return -(-total // members) if members else 0


class _State:
    def __init__(self, members: dict[str, MemberSpec]) -> None:
        self.process_of = {m: spec.process_id for m, spec in members.items()}
        self.members_of: dict[str, list[str]] = {}
        for m in sorted(members):
            self.members_of.setdefault(members[m].process_id, []).append(m)
        self.active: dict[str, set[Task]] = {m: set() for m in members}
        self.standby: dict[str, set[Task]] = {m: set() for m in members}
        self.process_tasks: dict[str, set[Task]] = {p: set() for p in self.members_of}

    def count(self, member: str) -> int:
        return len(self.active[member]) + len(self.standby[member])

    def load(self, process: str) -> float:
        return sum(self.count(m) for m in self.members_of[process]) / len(self.members_of[process])

    def give(self, member: str, task: Task, active: bool) -> None:
        (self.active if active else self.standby)[member].add(task)
        self.process_tasks[self.process_of[member]].add(task)

    def least_loaded_member(self, process: str) -> str:
        return min(self.members_of[process], key=lambda m: (self.count(m), m))

    def processes_by_load(self) -> list[str]:
        return sorted(self.members_of, key=lambda p: (self.load(p), p))


def assign(members: dict[str, MemberSpec], tasks: dict[str, int], stateful: set[str],
           num_standby: int) -> dict[str, Target]:
    """``tasks``: subtopology id -> its number of tasks. Every member gets a Target (maybe empty)."""
    if not members:
        return {}
    state = _State(members)
    previous_active: dict[Task, str] = {}
    previous_standby: dict[Task, list[str]] = {}
    for m in sorted(members):
        for s, ps in members[m].previous.active.items():
            for p in ps:
                previous_active[(s, p)] = m
        for s, ps in members[m].previous.standby.items():
            for p in ps:
                previous_standby.setdefault((s, p), []).append(m)
    all_tasks = [(s, p) for s in sorted(tasks) for p in range(tasks[s])]
    active_share = _share(len(all_tasks), len(members))
    standby_total = sum(tasks[s] for s in stateful if s in tasks) * num_standby
    total_share = _share(len(all_tasks) + standby_total, len(members))

    left = sorted(all_tasks, key=lambda t: (t[1], t[0]))
    for pass_ in ("active", "standby"):
        kept = []
        for task in left:
            if pass_ == "active":
                holder = previous_active.get(task)
            else:
                holders = [m for m in previous_standby.get(task, ()) if len(state.active[m]) < active_share]
                holder = min(holders, key=lambda m: (state.load(state.process_of[m]), state.count(m), m),
                             default=None)
            if holder is not None and len(state.active[holder]) < active_share:
                state.give(holder, task, True)
            else:
                kept.append(task)
        left = kept
    for task in sorted(left):
        process = state.processes_by_load()[0]
        state.give(state.least_loaded_member(process), task, True)

    if num_standby > 0:
        for task in sorted((t for t in all_tasks if t[0] in stateful), key=lambda t: (t[1], t[0]), reverse=True):
            for _ in range(num_standby):
                if not _standby_sticky(state, task, previous_active, previous_standby, total_share):
                    _standby_least_loaded(state, task)
    return {m: Target(_compact(state.active[m]), _compact(state.standby[m])) for m in members}


def _free_for(state: _State, member: str, task: Task, share: int) -> bool:
    return task not in state.process_tasks[state.process_of[member]] and state.count(member) < share


def _standby_sticky(state: _State, task: Task, previous_active: dict, previous_standby: dict, share: int) -> bool:
    candidates = [previous_active[task]] if task in previous_active else []
    candidates += sorted(previous_standby.get(task, ()), key=lambda m: (state.load(state.process_of[m]), m))
    for member in candidates:
        if _free_for(state, member, task, share):
            state.give(member, task, False)
            return True
    return False


def _standby_least_loaded(state: _State, task: Task) -> bool:
    for process in state.processes_by_load():
        if task not in state.process_tasks[process]:
            state.give(state.least_loaded_member(process), task, False)
            return True
    return False     # (not enough processes: Kafka logs it and leaves the standby out)


def _compact(tasks: set[Task]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in out.items()}
