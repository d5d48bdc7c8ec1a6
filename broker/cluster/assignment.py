"""Replica assignment for new topics and partitions, as Kafka's AdminUtils.assignReplicasToBrokers, and the
checks Kafka's controller makes of a manual assignment and of a replication factor, in its words.

Leaders are spread round-robin from a random start, each partition's
followers shifted so that replicas of one broker do not all follow the same
leader. With racks (``broker.rack``) brokers are first interleaved by rack, so
consecutive replicas of a partition land on different racks.
"""

from __future__ import annotations

import random


class InvalidReplicationFactor(Exception):
    pass


def assignment_problem(assignment, live: set[int], replicas: int | None) -> str | None:
    """What Kafka's controller finds wrong with one partition's manual replica list, or None: replicas at all,
    then each broker in ascending order registered and named once, then as many replicas as ``replicas`` (the
    partitions before it, or the topic's)."""
    if not assignment:
        return "The manual partition assignment includes an empty replica list."
    previous = None
    for broker_id in sorted(assignment):
        if broker_id not in live:
            return f"The manual partition assignment includes broker {broker_id}, but no such broker is registered."
        if broker_id == previous:
            return f"The manual partition assignment includes the broker {previous} more than once."
        previous = broker_id
    if replicas is not None and len(assignment) != replicas:
        return (f"The manual partition assignment includes a partition with {len(assignment)} replica(s), but this "
                f"is not consistent with previous partitions, which have {replicas} replica(s).")
    return None


def placement_problem(replication: int, live: int) -> str | None:
    """Kafka's replica placer's refusal of a replication factor the registered brokers cannot hold, or None."""
    if replication > live:
        return (f"The target replication factor of {replication} cannot be reached because only {live} "
                f"broker(s) are registered.")
    return None


def _rack_alternated(brokers: dict[int, str | None]) -> list[int]:
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(brokers):
        by_rack.setdefault(brokers[broker_id], []).append(broker_id)
    racks = sorted(by_rack)
    out: list[int] = []
    while any(by_rack.values()):
        for rack in racks:
            if by_rack[rack]:
                out.append(by_rack[rack].pop(0))
    return out


def assign_replicas(brokers: dict[int, str | None], partitions: int, replication_factor: int,
                    start_partition: int = 0, rng: random.Random | None = None) -> dict[int, list[int]]:
    """{partition: [replica broker ids]}, the first replica being the preferred leader.

    ``brokers`` maps live broker ids to their rack (or None).
    """
    if replication_factor > len(brokers):
        raise InvalidReplicationFactor(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    rng = rng or random.Random()
    racked = all(r is not None for r in brokers.values()) and len(set(brokers.values())) > 1
    ids = _rack_alternated(brokers) if racked else sorted(brokers)
    n = len(ids)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out: dict[int, list[int]] = {}
    for i in range(partitions):
        p = start_partition + i
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        order = [ids[(first + 1 + (shift + j) % (n - 1)) % n] for j in range(n - 1)]
        while len(replicas) < replication_factor:
            used_racks = {brokers[r] for r in replicas}
            fresh = [b for b in order if b not in replicas and (not racked or brokers[b] not in used_racks)]
            replicas.append(fresh[0] if fresh else next(b for b in order if b not in replicas))
        out[p] = replicas
    return out
