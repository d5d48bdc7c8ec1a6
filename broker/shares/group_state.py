"""The group coordinator's side of share state (KIP-932): every partition a share group is assigned has its
state at the share coordinator before the member assigned it hears so.

Kafka's group coordinator initializes a share partition's state (start offset -1: its leader picks the
start by ``share.auto.offset.reset`` when it first loads it) before it assigns the partition, and a
share-partition leader that finds no state refuses the fetch (UNKNOWN_SERVER_ERROR) rather than making
one: a ShareFetch naming a group that never joined, or a partition the group was never assigned, leaves
nothing behind at the share coordinator. Here a heartbeat's answer waits until each partition the group was
ever assigned is known to have state; one that could not be initialized is tried again at the next heartbeat.

Invariants:
* a state that exists is never initialized again here (a read comes first), so what the leader wrote stays;
* one initialization at a time per group: a heartbeat arriving meanwhile waits for it, then checks again.
"""

from __future__ import annotations

import asyncio

from kbroker.coordinators.group.share.model import ShareGroup

UNINITIALIZED_START = -1


class ShareStateInitializer:
    def __init__(self, broker) -> None:
        self.broker = broker
        self._running: dict[str, asyncio.Future] = {}

    async def ensure(self, group_id: str) -> None:
        """Every share partition of ``group_id`` (of a topic that still exists) has state, where the share
        coordinator can be reached; those that do are remembered on the group until it is loaded again."""
        while (running := self._running.get(group_id)) is not None:
            await asyncio.shield(running)
        group = self.broker.group_coordinator.groups.get(group_id)
        if not isinstance(group, ShareGroup):
            return
        names = self.broker.topic_ids
        todo = [(topic_id, p) for topic_id, (_, partitions) in group.share_partitions.items()
                if names.name_of(topic_id) is not None
                for p in sorted(partitions) if (topic_id, p) not in group.state_ready]
        if not todo:
            return
        future = self._running[group_id] = asyncio.get_running_loop().create_future()
        try:
            held = await asyncio.gather(*(self._initialized(group_id, group.group_epoch, *key) for key in todo))
            group.state_ready.update(key for key, ok in zip(todo, held) if ok)
        finally:
            del self._running[group_id]
            future.set_result(None)

    async def _initialized(self, group_id: str, group_epoch: int, topic_id: bytes, partition: int) -> bool:
        """Initialized at the group's epoch as Kafka's group coordinator does (its state epoch then differs from
        the summary a share coordinator gives of no state at all)."""
        persister = self.broker.shares.persister
        error, state = await persister.summary(group_id, topic_id, partition)
        if not error and state is None:
            error = await persister.initialize(group_id, topic_id, partition, group_epoch, UNINITIALIZED_START)
        return not error
