"""Group states and their legal predecessors, as Kafka's classic group coordinator defines them.

    Empty                <- PreparingRebalance
    PreparingRebalance   <- Stable, CompletingRebalance, Empty
    CompletingRebalance  <- PreparingRebalance
    Stable               <- CompletingRebalance
    Dead                 <- every state (a group is removed or unloaded)

A transition that is not listed raises IllegalStateTransition: the state
machine never moves silently into a state it cannot be in.
"""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def valid_previous(self) -> frozenset["GroupState"]:
        return _VALID_PREVIOUS[self]


_VALID_PREVIOUS = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                               GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(Exception):
    def __init__(self, group_id: str, current: GroupState, target: GroupState) -> None:
        super().__init__(f"group {group_id!r} cannot move from {current.value} to {target.value}")
        self.current, self.target = current, target
