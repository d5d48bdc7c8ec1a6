"""A streams group's topology against the cluster's topics: how many tasks each subtopology has, which internal
topics must exist with how many partitions, and why the topology is not ready yet (KIP-1071).

Facts as Kafka 4.2's coordinator decides them:
* every external source topic must exist (else MISSING_SOURCE_TOPICS, the missing names sorted);
* a repartition topic without a fixed count gets the largest input partition count of the subtopology that
  writes it, resolved until nothing changes (a cycle that never resolves is an invalid topology);
* co-partitioned topics must agree: external ones must already have one count (else
  INCORRECTLY_PARTITIONED_TOPICS), repartition ones take theirs;
* a changelog topic has as many partitions as its subtopology has tasks, which is the largest partition count
  of its input topics;
* an internal topic that does not exist is to be created (MISSING_INTERNAL_TOPICS); one that exists with
  another partition count is INCORRECTLY_PARTITIONED_TOPICS.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kbroker.coordinators.group.streams.model import Topology
from kbroker.storage.java_order import hash_order

STALE_TOPOLOGY, MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS = 0, 1, 2, 3
SHUTDOWN_APPLICATION, ASSIGNMENT_DELAYED = 4, 5


class InvalidTopology(Exception):
    """STREAMS_INVALID_TOPOLOGY, with Kafka's words."""


class _NotConfigured(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


@dataclass(frozen=True)
class InternalTopic:
    name: str
    partitions: int
    replication_factor: int            # -1: the broker's default
    configs: tuple[tuple[str, str], ...] = ()


@dataclass
class Configured:
    """``tasks``: subtopology id -> its number of tasks, None while the topology cannot be configured;
    ``to_create``: internal topics missing; ``status``: (code, detail) when not ready; ``internal``: the partition
    count of each internal topic, once configured."""
    tasks: dict[str, int] | None = None
    internal: dict[str, int] = field(default_factory=dict)
    to_create: dict[str, InternalTopic] = field(default_factory=dict)
    status: tuple[int, str] | None = None

    @property
    def is_ready(self) -> bool:
        return self.tasks is not None and self.status is None


def summarize(names) -> str:
    names = list(names)
    if not names:
        return "<none>"
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} additional topics" if len(names) > 3 else "")


def configure(topology: Topology, counts: dict[str, int]) -> Configured:
    """``counts``: the partition count of each topic there is now, by name."""
    try:
        missing = sorted({t for s in topology.subtopologies for t in s.source_topics if t not in counts})
        if missing:
            raise _NotConfigured(MISSING_SOURCE_TOPICS, f"Source topics {summarize(missing)} are missing.")
        decided = _repartition_counts(topology, counts)
        _copartition(topology, counts, decided)
        tasks = {}
        for s in topology.subtopologies:
            inputs = list(s.source_topics) + [i.name for i in s.repartition_source_topics]
            if not inputs:
                raise InvalidTopology(f"No source topics found for subtopology {s.subtopology_id}")
            tasks[s.subtopology_id] = max(counts.get(t, decided.get(t, 0)) for t in inputs)
            for info in s.state_changelog_topics:
                decided[info.name] = tasks[s.subtopology_id]
        to_create, internal = {}, {}
        for s in sorted(topology.subtopologies, key=lambda s: s.subtopology_id):
            for info in s.repartition_source_topics + s.state_changelog_topics:
                wanted = internal[info.name] = info.partitions or decided[info.name]
                if info.name in counts:
                    if counts[info.name] != wanted:
                        raise _NotConfigured(INCORRECTLY_PARTITIONED_TOPICS,
                                             f"Existing topic {info.name} has different number of partitions: "
                                             f"expected {wanted}, found {counts[info.name]}")
                    continue
                to_create[info.name] = InternalTopic(info.name, wanted, info.replication_factor or -1, info.configs)
    except _NotConfigured as e:
        return Configured(status=(e.status, e.detail))
    if to_create:
        # (named in the order of Kafka's hash map of every internal topic, the existing ones then taken out)
        named = [n for n in hash_order(internal) if n in to_create]
        return Configured(tasks, internal, to_create,
                          (MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {summarize(named)}"))
    return Configured(tasks, internal)


def _count(name: str, counts: dict[str, int], decided: dict[str, int]) -> int | None:
    return counts.get(name, decided.get(name))


def _repartition_counts(topology: Topology, counts: dict[str, int]) -> dict[str, int]:
    decided = {i.name: i.partitions for s in topology.subtopologies for i in s.repartition_source_topics
               if i.partitions}
    while True:
        needed = progress = False
        for s in topology.subtopologies:
            for sink in s.repartition_sink_topics:
                if sink in decided:
                    continue
                candidates = [decided[i.name] for i in s.repartition_source_topics if i.name in decided]
                candidates += [counts[t] for t in s.source_topics if t in counts]
                if candidates:
                    decided[sink] = max(candidates)
                    progress = True
                else:
                    needed = True
        if not needed:
            break
        if not progress:
            raise InvalidTopology("Failed to compute number of partitions for all repartition topics. There may be "
                                  "loops in the topology that cannot be resolved.")
    for s in topology.subtopologies:
        if any(i.name not in decided for i in s.repartition_source_topics):
            raise InvalidTopology("Failed to compute number of partitions for all repartition topics, because a "
                                  "repartition source topic is never used as a sink topic.")
    return decided


def _copartition(topology: Topology, counts: dict[str, int], decided: dict[str, int]) -> None:
    fixed = {i.name for s in topology.subtopologies for i in s.repartition_source_topics if i.partitions}
    flexible = {i.name for s in topology.subtopologies for i in s.repartition_source_topics if not i.partitions}
    for s in topology.subtopologies:
        for sources, repartitions in s.copartition_groups:
            group = {s.source_topics[i] for i in sources} | {s.repartition_source_topics[i].name for i in repartitions}
            if not group:
                continue
            internal = {t: _count(t, counts, decided) for t in group if t in fixed or t in flexible}
            external = {t: _count(t, counts, decided) for t in group if t not in internal}
            if not external:
                if fixed:
                    wanted = {_count(t, counts, decided) for t in fixed}
                    if len(wanted) > 1:
                        raise _NotConfigured(INCORRECTLY_PARTITIONED_TOPICS, "Following topics do not have the "
                                             f"same number of partitions: [{_listing(internal)}]")
                    target = _count(next(iter(sorted(fixed))), counts, decided)
                else:
                    target = max(internal.values() or [0])
                    if not target:
                        raise InvalidTopology("All topics in the copartition group had undefined partition "
                                              f"number: {sorted(internal)}")
            else:
                if len(set(external.values())) > 1:
                    raise _NotConfigured(INCORRECTLY_PARTITIONED_TOPICS, "Following topics do not have the same "
                                         f"number of partitions: [{_listing(external)}]")
                target = next(iter(external.values()))
            for name, count in internal.items():
                if name in fixed and count != target:
                    raise _NotConfigured(INCORRECTLY_PARTITIONED_TOPICS,
                                         f"Number of partitions [{count}] of repartition topic [{name}] doesn't "
                                         f"match number of partitions [{target}] of the source topic.")
                decided[name] = target


def _listing(counts: dict[str, int]) -> str:
    """As Java prints a sorted map: {a=1, b=2}."""
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) + "}"
