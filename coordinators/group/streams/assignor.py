"""The sticky task assignor of streams groups, deciding as Kafka 4.2's "sticky" assignor decides.

A member is one consumer of a Streams process; a process's load is its members' tasks per member. The facts
Kafka's assignor follows, which this one follows to the same choices:
* every member has a quota of tasks, the tasks left over the members left, rounded up, recomputed each time a
  member reaches it (first for active tasks, then for all tasks with standbys);
* active tasks, in (partition, subtopology) order, stay with the member that had them in its previous target
  while it is under its quota, then go to the least loaded member that had them as a standby; the rest, in
  (subtopology, partition) order, to the least loaded member of the least loaded process;
* with ``num.standby.replicas`` N, each task of a stateful subtopology (one with a changelog), in descending
  (partition, subtopology) order, gets up to N standbys in processes holding it in no role yet: first the
  member that had it active before, then the least loaded member that had it as a standby, then the least
  loaded members of the least loaded processes; missing capacity leaves a standby out;
* ties go as Java's priority queues and hash maps order them (``JavaHeap``, ``hash_order``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.coordinators.group.streams.model import Target
from kbroker.storage.java_order import hash_order

Task = tuple[str, int]


@dataclass(frozen=True)
class MemberSpec:
    process_id: str
    previous: Target


class JavaHeap:
    """java.util.PriorityQueue's order: a binary heap sifting as Java's does, each comparison reading the
    entries' keys as they are then (an entry's key may change while it is out of the heap)."""

    def __init__(self, key) -> None:
        self.key = key
        self.items: list = []

    def __len__(self) -> int:
        return len(self.items)

    def add(self, item) -> None:
        items, key = self.items, self.key
        items.append(item)
        k = len(items) - 1
        while k > 0:
            parent = (k - 1) >> 1
            if key(item) >= key(items[parent]):
                break
            items[k] = items[parent]
            k = parent
        items[k] = item

    def poll(self):
        items, key = self.items, self.key
        if not items:
            return None
        first, last = items[0], items.pop()
        n = len(items)
        if n:
            k, half = 0, n >> 1
            while k < half:
                child = 2 * k + 1
                if child + 1 < n and key(items[child]) > key(items[child + 1]):
                    child += 1
                if key(last) <= key(items[child]):
                    break
                items[k] = items[child]
                k = child
            items[k] = last
        return first


class _Process:
    """One process's members, their task counts and what it holds."""

    def __init__(self, process_id: str) -> None:
        self.process_id = process_id
        self.capacity = 0
        self.task_count = 0
        self.counts: dict[str, int] = {}
        self.active: dict[str, set[Task]] = {}
        self.standby: dict[str, set[Task]] = {}
        self.tasks: set[Task] = set()
        self._by_load: JavaHeap | None = None

    @property
    def load(self) -> float:
        return self.task_count / self.capacity if self.capacity > 0 else -1.0

    def add_member(self, member: str) -> None:
        self.counts[member] = 0
        self.capacity += 1

    def _add(self, member: str, task: Task, active: bool) -> int:
        self.task_count += 1
        self.tasks.add(task)
        (self.active if active else self.standby).setdefault(member, set()).add(task)
        self.counts[member] += 1
        return self.counts[member]

    def add(self, member: str, task: Task, active: bool) -> int:
        """To a given member: the members' order by load is made again at the next least-loaded choice."""
        self._by_load = None
        return self._add(member, task, active)

    def add_to_least_loaded(self, task: Task, active: bool) -> int:
        if len(self.counts) == 1:
            return self._add(next(iter(self.counts)), task, active)
        if self._by_load is None:
            self._by_load = JavaHeap(lambda entry: entry[1])
            for member in hash_order(self.counts):
                self._by_load.add([member, self.counts[member]])
        entry = self._by_load.poll()
        entry[1] = self._add(entry[0], task, active)
        self._by_load.add(entry)
        return entry[1]


def _share(total: int, members: int) -> int:
    return -(-total // members) if members else 0


class _Assignment:
    def __init__(self, members: dict[str, MemberSpec], tasks: dict[str, int], stateful: set[str],
                 num_standby: int) -> None:
        self.num_standby = num_standby
        order = hash_order(members)          # (Kafka's members are a HashMap of their ids)
        self.process_of = {m: members[m].process_id for m in order}
        made: dict[str, _Process] = {}
        for m in order:
            made.setdefault(members[m].process_id, _Process(members[m].process_id)).add_member(m)
        self.processes = {p: made[p] for p in hash_order(made, capacity=len(members))}
        self.previous_active: dict[Task, str] = {}
        self.previous_standby: dict[Task, list[str]] = {}
        for m in order:
            for s, ps in members[m].previous.active.items():
                self.previous_active.update(((s, p), m) for p in ps)
            for s, ps in members[m].previous.standby.items():
                for p in ps:
                    self.previous_standby.setdefault((s, p), []).append(m)
        self.active_tasks = [(s, p) for s in sorted(tasks) for p in range(tasks[s])]
        self.standby_tasks = [(s, p) for s in sorted(tasks) if s in stateful for p in range(tasks[s])]
        self.active_left, self.total_left = len(self.active_tasks), len(self.active_tasks)
        self.total_left += len(self.standby_tasks) * num_standby
        self.active_members = self.total_members = len(members)
        self.active_share = _share(self.active_left, self.active_members)
        self.total_share = _share(self.total_left, self.total_members)

    def process(self, member: str) -> _Process:
        return self.processes[self.process_of[member]]

    def count(self, member: str) -> int:
        return self.process(member).counts[member]

    def filled_active(self, count: int) -> None:
        """A member reached the active quota: the others share what is left."""
        if count == self.active_share:
            self.active_members -= 1
            self.active_left -= count
            self.active_share = _share(self.active_left, self.active_members)

    def filled_total(self, count: int) -> None:
        if count == self.total_share:
            self.total_members -= 1
            self.total_left -= count
            self.total_share = _share(self.total_left, self.total_members)

    def least_loaded_previous(self, candidates: list[str] | None, task: Task | None) -> str | None:
        """Of the members that held a task before, the first unless a later one is in a less loaded process
        and has fewer tasks itself (and, for a standby, its process does not hold the task); None when the
        one found is in a process holding the task (Kafka checks the first one's process there)."""
        if not candidates:
            return None
        chosen = candidates[0]
        first_process = self.process(chosen)
        load, count = first_process.load, first_process.counts[chosen]
        for member in candidates[1:]:
            process = self.process(member)
            if process.load < load and (task is None or task not in process.tasks):
                if process.counts[member] < count:
                    load, count, chosen = process.load, process.counts[member], member
        return chosen if task is None or task not in first_process.tasks else None

    def assign_active(self) -> None:
        left = sorted(self.active_tasks, key=lambda t: (t[1], t[0]))
        for previous in (lambda task: self.previous_active.get(task),
                         lambda task: self.least_loaded_previous(self.previous_standby.get(task), None)):
            kept = []
            for task in left:
                member = previous(task)
                if member is not None and self.count(member) < self.active_share:
                    count = self.process(member).add(member, task, True)
                    self.filled_active(count)
                    self.filled_total(count)
                else:
                    kept.append(task)
            left = kept
        by_load = JavaHeap(lambda p: p.load)
        for p in self.processes.values():
            by_load.add(p)
        for task in sorted(left):
            process = by_load.poll()
            count = process.add_to_least_loaded(task, True)
            self.filled_active(count)
            self.filled_total(count)
            by_load.add(process)

    def assign_standby(self) -> None:
        to_least_loaded: list[tuple[Task, int]] = []
        for task in sorted(self.standby_tasks, key=lambda t: (t[1], t[0]), reverse=True):
            for i in range(self.num_standby):
                member = self.previous_active.get(task)
                if member is not None and task not in self.process(member).tasks \
                        and self.count(member) < self.total_share:
                    self.filled_total(self.process(member).add(member, task, False))
                    continue
                member = self.least_loaded_previous(self.previous_standby.get(task), task)
                if member is not None and self.count(member) < self.total_share:
                    self.filled_total(self.process(member).add(member, task, False))
                    continue
                to_least_loaded.append((task, self.num_standby - i))
                break
        by_load = JavaHeap(lambda p: p.load)
        for p in self.processes.values():
            by_load.add(p)
        for task, remaining in sorted(to_least_loaded, key=lambda t: t[0], reverse=True):
            for _ in range(remaining):
                if not self._standby_to_least_loaded(by_load, task):
                    break     # (not enough processes: Kafka logs it and leaves the standby out)

    def _standby_to_least_loaded(self, by_load: JavaHeap, task: Task) -> bool:
        process = by_load.poll()
        if process is None:
            return False
        found = False
        if task not in process.tasks:
            self.filled_total(process.add_to_least_loaded(task, False))
            found = True
        elif len(by_load):
            found = self._standby_to_least_loaded(by_load, task)
        by_load.add(process)
        return found

    def targets(self) -> dict[str, Target]:
        out = {}
        for p in self.processes.values():
            for member in p.counts:
                out[member] = Target(_compact(p.active.get(member, ())), _compact(p.standby.get(member, ())))
        return out


def assign(members: dict[str, MemberSpec], tasks: dict[str, int], stateful: set[str],
           num_standby: int) -> dict[str, Target]:
    """``tasks``: subtopology id -> its number of tasks. Every member gets a Target (maybe empty)."""
    if not members:
        return {}
    assignment = _Assignment(members, tasks, stateful, num_standby)
    assignment.assign_active()
    if num_standby > 0:
        assignment.assign_standby()
    return assignment.targets()


def _compact(tasks) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in out.items()}
