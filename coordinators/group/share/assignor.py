"""Kafka's ``simple`` share assignor: sticky, and shared when there are more members than partitions.

The steps of Kafka's SimpleHomogeneousAssignmentBuilder (every member subscribes to the same topics: counts
balanced over all the group's partitions) and SimpleHeterogeneousAssignmentBuilder (topic by topic, among
that topic's subscribers), taken in the same order:

1. each member keeps the partitions of its current target that are still assignable and subscribed;
2. a member holding more than its desired count gives up the excess;
3. a partition held by more members than the desired sharing is taken from the extra ones;
4. the partitions short of holders go, in one pass, to the members short of partitions, taken in turn.

Desired sharing: ceil(members / partitions), so that every member fetches from some partition. Desired count
of the i-th member: ceil(p * (i + 1)) - ceil(p * i) with p = sharing * partitions / members, in the same
floating point as Kafka's. Kafka walks hash sets, whose order is its own; kbroker walks members by id and
partitions by (topic id, index), so its result is deterministic: the same counts, the same stickiness, not
necessarily the same members as Kafka's for a given partition.
"""

from __future__ import annotations

import math

from kbroker.coordinators.group.consumer.model import Assignment


def share_assign(members: dict[str, frozenset[bytes]], topics: dict[bytes, int],
                 assignable: dict[bytes, frozenset[int]],
                 current: dict[str, Assignment] | None = None) -> dict[str, Assignment]:
    """Targets for ``members`` (member id to subscribed topic ids) over the ``assignable`` partitions (those
    whose share state is initialized) of topics with ``topics[id]`` partitions, starting from ``current``
    (the members' previous targets)."""
    current = current or {}
    order = sorted(members)
    result: dict[str, dict[bytes, set[int]]] = {m: {} for m in order}

    def targets(topic_id: bytes) -> list[tuple[bytes, int]]:
        return [(topic_id, p) for p in sorted(assignable.get(topic_id, ())) if p < topics.get(topic_id, 0)]

    def held(member: str, topic_ids) -> list[tuple[bytes, int]]:
        kept = current.get(member, {})
        return [(t, p) for t in sorted(topic_ids) for p in sorted(kept.get(t, ()))]

    if len(set(members.values())) == 1:   # homogeneous: one balance over every subscribed partition
        subscribed = next(iter(members.values()))
        partitions = [tp for t in sorted(subscribed) for tp in targets(t)]
        groups = [(partitions, order, {m: held(m, subscribed) for m in order})]
    else:                                 # heterogeneous: a balance per topic, among its subscribers
        groups = []
        for topic_id in sorted({t for subscribed in members.values() for t in subscribed}):
            subscribers = [m for m in order if topic_id in members[m]]
            groups.append((targets(topic_id), subscribers, {m: held(m, (topic_id,)) for m in subscribers}))
    for partitions, subscribers, old in groups:
        for member, owned in _balance(partitions, subscribers, old).items():
            for topic_id, p in owned:
                result[member].setdefault(topic_id, set()).add(p)
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in result.items()}


def _balance(partitions: list, members: list[str], old: dict[str, list]) -> dict[str, list]:
    """One builder's steps over ``partitions`` among ``members`` (in order), each starting from ``old``."""
    if not members:
        return {}
    sharing = -(-len(members) // len(partitions)) if partitions else 0
    precise = sharing * len(partitions) / len(members)
    desired = {m: math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i, m in enumerate(members)}
    wanted = set(partitions)
    owned = {m: [tp for tp in old.get(m, ()) if tp in wanted] for m in members}    # step 1
    holders: dict = {tp: [] for tp in partitions}
    for m in members:
        del owned[m][desired[m]:]                                                   # step 2
        for tp in owned[m]:
            holders[tp].append(m)
    for tp in partitions:                                                           # step 3
        for m in holders[tp][sharing:]:
            owned[m].remove(tp)
        del holders[tp][sharing:]
    unfilled = [m for m in members if len(owned[m]) < desired[m]]                 # step 4
    at, assigned_this_round = 0, False
    for tp in partitions:
        need = sharing - len(holders[tp])
        while need > 0 and unfilled:
            if at >= len(unfilled):
                if not assigned_this_round:
                    break   # every member short of partitions already has this one
                at, assigned_this_round = 0, False
            member = unfilled[at]
            if member in holders[tp]:
                at += 1
                continue
            owned[member].append(tp)
            holders[tp].append(member)
            need, assigned_this_round = need - 1, True
            if len(owned[member]) >= desired[member]:
                unfilled.pop(at)   # (the next member takes its place in the turn)
            else:
                at += 1
        if not unfilled:
            break
    return owned
