"""The broker's side of initializing share state (KIP-932): the group coordinator records the share
partitions a group is to read as initializing and hands them here (``coordinators/group/share/initializing.py``);
they are initialized at the share coordinator in the background, at the group's epoch with start offset -1
(their leader picks the start by ``share.auto.offset.reset`` when it first loads one), and the outcome goes back
to the group coordinator, which assigns them from its next heartbeat on. The heartbeat that asked has already
been answered, as Kafka answers it.

A share-partition leader that finds no state refuses the fetch (UNKNOWN_SERVER_ERROR) rather than making one,
so a ShareFetch naming a group that never joined, or a partition the group was never assigned, leaves nothing
behind at the share coordinator.

Invariant: one request's partitions succeed or fail together, as Kafka's do: a failure leaves them all to be
asked again. Initializing again one that had succeeded loses nothing: it was not recorded initialized, so no
member was assigned it and no leader has written its state since.
"""

from __future__ import annotations

import asyncio

import structlog

from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("broker.shares")
UNINITIALIZED_START = -1


class ShareStateInitializer:
    def __init__(self, broker) -> None:
        self.broker = broker

    def start(self, group_id: str, group_epoch: int, partitions: dict[bytes, frozenset[int]]) -> None:
        self.broker.shares.spawn(self.initialize(group_id, group_epoch, partitions))

    async def initialize(self, group_id: str, group_epoch: int, partitions: dict[bytes, frozenset[int]]) -> None:
        persister = self.broker.shares.persister
        keys = [(topic_id, p) for topic_id, ps in sorted(partitions.items()) for p in sorted(ps)]
        outcomes = await asyncio.gather(*(persister.initialize(group_id, topic_id, p, group_epoch, UNINITIALIZED_START)
                                          for topic_id, p in keys), return_exceptions=True)
        failed = [(key, outcome) for key, outcome in zip(keys, outcomes) if outcome]
        coordinator = self.broker.group_coordinator
        if failed:
            (topic_id, partition), error = failed[0]
            log.warning("share_state_not_initialized", group=group_id, topic_id=topic_id.hex(), partition=partition,
                        error=error.name if isinstance(error, ErrorCode) else repr(error), partitions=len(failed))
            coordinator.share_state_uninitialized(group_id, partitions)
        else:
            coordinator.share_state_initialized(group_id, partitions)
