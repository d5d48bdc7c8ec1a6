"""How a write's state batches join those a share partition has (Kafka's PersisterStateBatchCombiner, KIP-932).

A batch is ``(first offset, last offset, delivery state, delivery count)``. A write names the batches that
changed, not every one: the coordinator keeps the union, without what lies below the start offset. Where two
batches overlap, the one further along wins the offsets they share: the higher delivery count, then at equal
counts the higher state (AVAILABLE 0 < ACKNOWLEDGED 2 < ARCHIVED 4); batches with the same count and state that
overlap or touch become one.

Invariant: the result is Kafka's, batch for batch and in its order. Kafka keeps the batches to merge in a
TreeSet ordered by (first, last, count, state) and repeatedly merges the first pair that overlaps, or touches
with the same count and state, moving the batches before that pair to the result as it goes; its result is not
always the fewest batches (two touching batches with the same count and state can stay apart), and a reader
comparing with Kafka sees the same batches only if the same steps are taken, so they are taken here.
"""

from __future__ import annotations

from bisect import bisect_left, insort

Batch = tuple[int, int, int, int]   # first offset, last offset, delivery state, delivery count


def combine(so_far: list[Batch], new: list[Batch], start_offset: int) -> list[Batch]:
    """``so_far`` and ``new`` as one list of batches that do not overlap, from ``start_offset`` on (-1: all)."""
    batches = list(so_far) + list(new)
    if start_offset != -1:
        batches = [(max(first, start_offset), last, state, count)
                   for first, last, state, count in batches if last >= start_offset]
    if len(batches) < 2:
        return batches
    # (kept in Kafka's TreeSet order, (first, last, count, state); a batch equal to one there is one batch)
    ordered = sorted({_order(b) for b in batches})
    done: list[Batch] = []
    while (pair := _first_mergeable(ordered, done)) is not None:
        prev, candidate = ordered[pair], ordered[pair + 1]
        del ordered[pair:pair + 2]
        for merged in _merged(prev, candidate):
            i = bisect_left(ordered, merged)
            if i == len(ordered) or ordered[i] != merged:
                insort(ordered, merged, lo=i)
    return done + [_batch(b) for b in ordered]


def _order(b: Batch) -> tuple[int, int, int, int]:
    first, last, state, count = b
    return first, last, count, state


def _batch(o: tuple[int, int, int, int]) -> Batch:
    first, last, count, state = o
    return first, last, state, count


def _first_mergeable(ordered: list, done: list[Batch]) -> int | None:
    """The index of the first batch that overlaps the next, or touches it with the same count and state; the
    batches before it (and every batch, if none does) move from ``ordered`` to ``done``."""
    for i in range(len(ordered) - 1):
        prev, candidate = ordered[i], ordered[i + 1]
        if candidate[0] <= prev[1] or (prev[1] + 1 == candidate[0] and prev[2:] == candidate[2:]):
            done.extend(_batch(b) for b in ordered[:i])
            del ordered[:i]
            return 0
    done.extend(_batch(b) for b in ordered)
    ordered.clear()
    return None


def _merged(prev, candidate) -> list[tuple[int, int, int, int]]:
    """What replaces a mergeable pair (``prev`` first in order), in Kafka's cases: the same count and state
    join; otherwise the one further along keeps the offsets they share and the other what is left of it."""
    p_first, p_last, p_info = prev[0], prev[1], prev[2:]
    c_first, c_last, c_info = candidate[0], candidate[1], candidate[2:]
    if p_info == c_info:
        return [(p_first, max(p_last, c_last), *p_info)]
    candidate_lower = c_info < p_info
    if c_first == p_first:
        if c_last == p_last or not candidate_lower:   # (ordered: the candidate is the longer or the stronger)
            return [candidate]
        return [prev, (p_last + 1, c_last, *c_info)]
    if c_last < p_last:   # prev swallows candidate
        if candidate_lower:
            return [prev]
        return [(p_first, c_first - 1, *p_info), candidate, (c_last + 1, p_last, *p_info)]
    if c_last == p_last:
        return [prev] if candidate_lower else [(p_first, c_first - 1, *p_info), candidate]
    if candidate_lower:   # the candidate reaches further
        return [prev, (p_last + 1, c_last, *c_info)]
    return [(p_first, c_first - 1, *p_info), candidate]
