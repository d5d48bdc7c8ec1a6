"""Leader elections of the controller: offline partitions, preferred replicas, unclean elections (ElectLeaders)
and the automatic preferred-leader rebalance.

Invariants:
* a leader comes from the usable ISR (a live broker, not shutting down, whose
  replica is not in a failed log dir), unless unclean election is enabled for
  the topic or asked for by ElectLeaders UNCLEAN;
* with no usable ISR member left the ISR keeps the last leader, so that only
  it can lead again without losing acknowledged writes.
"""

from __future__ import annotations

import asyncio

import structlog

from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("broker.cluster.controller")

NO_LEADER = -1


class LeaderElectionMixin:
    """Needs the controller's ``states``, ``live``, ``shutting_down``, ``offline_replicas``, ``_replicas``,
    ``_change``, ``_publish`` and ``enqueue``."""

    def _usable(self, broker_id: int, tp: tuple[str, int]) -> bool:
        """Whether ``broker_id``'s replica of ``tp`` can serve: its broker is live and staying, its log dir
        has not failed."""
        return (broker_id in self.live and broker_id not in self.shutting_down
                and tp not in self.offline_replicas.get(broker_id, ()))

    def _elect_offline(self, partitions: set[tuple[str, int]], avoid: set[int] = frozenset()) -> set:
        """Pick a new leader from the live ISR for each partition whose leader is gone (or in ``avoid``).

        Marks changed states with zk_version -1 - version (written by ``_write_pending``).
        """
        changed = set()
        for tp in partitions:
            state = self.states[tp]
            if state.leader not in avoid and self._usable(state.leader, tp):
                continue
            usable = [r for r in self._replicas(tp) if r not in avoid and self._usable(r, tp)]
            in_isr = [r for r in usable if r in state.isr]
            if in_isr:
                leader, isr = in_isr[0], [r for r in state.isr if self._usable(r, tp) or r == in_isr[0]]
            elif usable and self.broker.topic_config(tp[0]).unclean_leader_election_enable:
                leader, isr = usable[0], [usable[0]]
                log.warning("unclean_leader_election", topic=tp[0], partition=tp[1], leader=leader)
            else:
                # No ISR member is alive: the partition stays offline; the ISR keeps the last leader so
                # that it (and only it) can come back as leader without losing acknowledged writes.
                if state.leader == NO_LEADER:
                    continue
                leader, isr = NO_LEADER, [r for r in state.isr if r == state.leader] or state.isr
            self._change(tp, leader, isr)
            changed.add(tp)
        return changed

    async def _on_elect_preferred(self, partitions) -> dict:
        """Preferred-replica election: the first assigned replica leads again where it is live and in the ISR."""
        return await self._elect_each(partitions, self._preferred_choice)

    async def _on_elect_unclean(self, partitions) -> dict:
        """ElectLeaders UNCLEAN (KIP-460): a partition without a live leader gets one from its live ISR if it
        can, else from any live replica (losing what only the ISR had); one with a leader is left alone."""
        return await self._elect_each(partitions, self._unclean_choice)

    async def _elect_each(self, partitions, choose) -> dict:
        """ElectLeaders for ``partitions`` (None: all): ``choose(tp, state, asked)`` gives (error, message,
        (leader, isr) or None), or None to leave a partition out of the answer. Results by partition."""
        results = {}
        changed = set()
        for tp in (partitions if partitions is not None else list(self.states)):
            state = self.states.get(tp)
            if state is None:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
                continue
            choice = choose(tp, state, partitions is not None)
            if choice is None:
                continue
            error, message, new = choice
            if new is not None:
                self._change(tp, *new)
                changed.add(tp)
            results[tp] = (error, message)
        if changed:
            await self._publish(changed)
        return results

    def _preferred_choice(self, tp, state, _asked: bool):
        preferred = self._replicas(tp)[0]
        if state.leader == preferred:
            return ErrorCode.ELECTION_NOT_NEEDED, "Leader is already the preferred replica", None
        if preferred in state.isr and self._usable(preferred, tp):
            return ErrorCode.NONE, None, (preferred, state.isr)
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, f"Preferred replica {preferred} is not live or not in the ISR", \
            None

    def _unclean_choice(self, tp, state, asked: bool):
        if self._usable(state.leader, tp):
            return (ErrorCode.ELECTION_NOT_NEEDED, "The partition has a live leader", None) if asked else None
        usable = [r for r in self._replicas(tp) if self._usable(r, tp)]
        if not usable:
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "No replica of the partition is live", None
        in_isr = [r for r in usable if r in state.isr]
        if in_isr:
            return ErrorCode.NONE, None, (in_isr[0], [r for r in state.isr if r in usable])
        log.warning("unclean_leader_election", topic=tp[0], partition=tp[1], leader=usable[0], requested=True)
        return ErrorCode.NONE, None, (usable[0], [usable[0]])

    async def _on_unclean_enabled(self, topic: str) -> None:
        """``unclean.leader.election.enable`` was just turned on for ``topic``: its leaderless partitions are
        elected now, not at the next broker change (Kafka's TopicUncleanLeaderElectionEnable event)."""
        if not self.active or topic not in self.assignments:
            return
        await self._publish(self._elect_offline({tp for tp in self.states if tp[0] == topic}))

    async def _auto_rebalance(self) -> None:
        interval = self.broker.config["leader.imbalance.check.interval.seconds"]
        while self.active:
            await asyncio.sleep(interval)
            imbalanced = [tp for tp, s in self.states.items() if s.leader != self._replicas(tp)[0]
                          and self._replicas(tp)[0] in s.isr and self._usable(self._replicas(tp)[0], tp)]
            if imbalanced:
                await self.enqueue("elect_preferred", imbalanced)

