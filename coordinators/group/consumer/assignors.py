"""Server-side assignors of KIP-848 (``group.consumer.assignors``): pure functions, no broker needed.

``assign(members, topics)``: ``members`` maps a member id to its ``MemberSpec`` (the topic ids it subscribes
to, its instance id, its current target), ``topics`` maps a topic id to its partition count. The answer
maps every member id to its new target assignment (topic id -> frozenset of partitions).

Invariants of both: every partition of a subscribed topic goes to exactly one member subscribed to that
topic; a member gets nothing it does not subscribe to.
* ``uniform`` (Kafka's default): balanced and sticky. Members sharing a subscription end within one partition
  of each other; a partition stays with its current member unless balance needs it elsewhere, so a member
  joining or leaving moves as few partitions as possible. Rack-aware: among members equally loaded, one in a
  rack of the partition's replicas gets it, and what balance moves to a joining member is what sits in its
  rack where there is such (members send ``RackId``, brokers have ``broker.rack``).
* ``range``: per topic, contiguous ranges in member order (static members by instance id first, then member
  ids), the first ``n % k`` members one partition more: members subscribed to co-partitioned topics get the
  same partition numbers of each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kbroker.coordinators.group.consumer.model import Assignment


@dataclass(frozen=True)
class MemberSpec:
    topics: frozenset[bytes]
    instance_id: str | None = None
    current: Assignment = field(default_factory=dict)
    rack: str | None = None


def _member_order(members: dict[str, MemberSpec]) -> list[str]:
    return sorted(members, key=lambda m: (members[m].instance_id is None, members[m].instance_id or "", m))


def _near(members: dict[str, MemberSpec], racks) -> Callable[[str, tuple[bytes, int]], bool]:
    """Whether a member sits in a rack of a partition's replicas (never, without racks on both sides)."""
    if racks is None or not any(spec.rack for spec in members.values()):
        return lambda member_id, tp: False
    return lambda member_id, tp: members[member_id].rack is not None and members[member_id].rack in racks(*tp)


def range_assign(members: dict[str, MemberSpec], topics: dict[bytes, int], racks=None) -> dict[str, Assignment]:
    result: dict[str, dict[bytes, frozenset[int]]] = {m: {} for m in members}
    order = _member_order(members)
    for topic_id, count in topics.items():
        subscribed = [m for m in order if topic_id in members[m].topics]
        if not subscribed or count <= 0:
            continue
        quota, extra = divmod(count, len(subscribed))
        start = 0
        for i, member_id in enumerate(subscribed):
            end = start + quota + (1 if i < extra else 0)
            if end > start:
                result[member_id][topic_id] = frozenset(range(start, end))
            start = end
    return result


def uniform_assign(members: dict[str, MemberSpec], topics: dict[bytes, int],
                   racks: Callable[[bytes, int], frozenset[str]] | None = None) -> dict[str, Assignment]:
    """``racks(topic id, partition)``: the racks of the partition's replicas. A partition goes to a member in
    one of them when that costs no balance (rack-aware assignment, KIP-848), else where balance says."""
    order = _member_order(members)
    near = _near(members, racks)
    rank = {m: i for i, m in enumerate(order)}
    owner: dict[tuple[bytes, int], str] = {}
    owned: dict[str, set[tuple[bytes, int]]] = {m: set() for m in members}
    # 1. Stickiness: a partition stays where it is while its member still subscribes to its topic.
    for member_id in order:
        spec = members[member_id]
        for topic_id, partitions in spec.current.items():
            if topic_id not in spec.topics or topic_id not in topics:
                continue
            for p in partitions:
                tp = (topic_id, p)
                if p < topics[topic_id] and tp not in owner:
                    owner[tp] = member_id
                    owned[member_id].add(tp)
    subscribers = {t: [m for m in order if t in members[m].topics] for t in topics}
    # 2. Every other partition goes to the least loaded member subscribed to its topic (topics with the
    #    fewest subscribers first: they have the fewest places to go).
    for topic_id in sorted(topics, key=lambda t: (len(subscribers[t]), t)):
        candidates = subscribers[topic_id]
        if not candidates:
            continue
        for p in range(topics[topic_id]):
            tp = (topic_id, p)
            if tp in owner:
                continue
            member_id = min(candidates, key=lambda m: (len(owned[m]), not near(m, tp), rank[m]))
            owner[tp] = member_id
            owned[member_id].add(tp)
    # 3. Balance: move one partition at a time from a member to one with at least two fewer that also
    #    subscribes to its topic: a partition far from the giver's rack to a member in its rack first, else the
    #    first partition (far ones first) someone can take. Each move lowers the sum of squared loads, so this
    #    ends; looking a taker up by rack keeps a move near linear in the giver's partitions.
    moved = True
    while moved:
        moved = False
        for giver in sorted(order, key=lambda m: (-len(owned[m]), rank[m])):
            eligible = [m for m in order if len(owned[m]) + 1 < len(owned[giver])]
            if not eligible:
                continue
            by_rack: dict[str, list[str]] = {}
            for m in eligible if racks is not None else ():   # (no member with a rack: by_rack stays empty)
                if members[m].rack:
                    by_rack.setdefault(members[m].rack, []).append(m)
            chosen = fallback = None
            for tp in sorted(owned[giver], key=lambda x: (near(giver, x), x[0], -x[1])):
                if by_rack and not near(giver, tp):
                    nearby = [m for r in racks(*tp) for m in by_rack.get(r, ()) if tp[0] in members[m].topics]
                    if nearby:
                        chosen = (tp, min(nearby, key=lambda m: (len(owned[m]), rank[m])))
                        break
                if fallback is None:
                    takers = [m for m in eligible if tp[0] in members[m].topics]
                    if takers:
                        fallback = (tp, min(takers, key=lambda m: (len(owned[m]), rank[m])))
                        if not by_rack:
                            break
            chosen = chosen or fallback
            if chosen is None:
                continue
            tp, taker = chosen
            owned[giver].discard(tp)
            owned[taker].add(tp)
            owner[tp] = taker
            moved = True
            break
    result: dict[str, Assignment] = {}
    for member_id, tps in owned.items():
        by_topic: dict[bytes, set[int]] = {}
        for topic_id, p in tps:
            by_topic.setdefault(topic_id, set()).add(p)
        result[member_id] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return result


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}


def assignor_of(members, default: str) -> str:
    """The group's assignor: the one most of its members ask for (``group.remote.assignor``), else the
    broker's first of ``group.consumer.assignors``. A tie goes to uniform, as in Kafka 4.2, where the first of
    the tied in its count map's hash order wins, and "uniform" hashes before "range" at every table size."""
    chosen = [m.server_assignor for m in members if m.server_assignor]
    return max(sorted(set(chosen), key=lambda name: (name != "uniform", name)), key=chosen.count) if chosen \
        else default
