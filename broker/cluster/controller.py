"""KafkaController: the one broker that owns partition state, elected through ``/controller``.

Every broker runs one; the one that creates the ephemeral ``/controller``
znode is active, with the epoch it bumped in ``/controller_epoch``. Events
(controller changes, broker changes, new and deleted topics, AlterPartition,
ControlledShutdown, ElectLeaders) are processed one at a time from a queue,
as Kafka's ControllerEventManager does, so the controller's view never
changes under a handler.

Invariants:
* the controller is the only writer of partition state znodes, always with a
  conditional write on the version it last read; a failed write means another
  controller took over, and this one resigns;
* a new leader comes from the live ISR (never elsewhere unless the topic's
  ``unclean.leader.election.enable`` or an ElectLeaders of type UNCLEAN asks
  for it), and every leader change bumps the leader epoch;
* brokers learn state only from LeaderAndIsr / UpdateMetadata / StopReplica
  carrying this controller's epoch.
"""

from __future__ import annotations

import asyncio

import structlog

from kbroker.broker.cluster import isr_changes
from kbroker.broker.cluster.channel import ControllerChannel
from kbroker.broker.cluster.controller_requests import ControllerRequestsMixin
from kbroker.broker.cluster.elections import NO_LEADER, LeaderElectionMixin
from kbroker.broker.cluster.reassignment import Reassignments
from kbroker.broker.cluster.zk_client import BrokerInfo, KafkaZkClient, LeaderIsr, TopicAssignment
from kbroker.client.tasks import cancel_and_wait
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("broker.cluster.controller")


class KafkaController(LeaderElectionMixin, ControllerRequestsMixin):
    def __init__(self, broker, zk: KafkaZkClient) -> None:
        self.broker = broker
        self.zk = zk
        self.broker_id = broker.broker_id
        self.inter_broker_listener = broker.config.inter_broker_listener
        self.epoch = 0
        self.active = False
        self.live: dict[int, BrokerInfo] = {}
        self.shutting_down: set[int] = set()
        self.assignments: dict[str, TopicAssignment] = {}
        self.states: dict[tuple[str, int], LeaderIsr] = {}
        self.channel = ControllerChannel(f"controller-{self.broker_id}", broker.inter_broker_connect)
        self.queue: asyncio.Queue = asyncio.Queue()
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.create_task(self._process())
        self._rebalance_task: asyncio.Task | None = None
        # One watcher function for /brokers/ids and each registration's data (kazoo keeps a set per path,
        # so re-arming with the same function never piles up duplicates).
        self._broker_watch = self._watch("broker_change")
        self.reassignments = Reassignments(self)
        self._dirty: set[tuple[str, int]] = set()   # states changed in memory, not yet written
        # Replicas on live brokers whose log dir failed (their LeaderAndIsr answer was KAFKA_STORAGE_ERROR);
        # forgotten when the broker restarts, as Kafka's controller does.
        self.offline_replicas: dict[int, set[tuple[str, int]]] = {}
        self._new_replicas: set[tuple[str, int]] = set()
        self._topic_watches: dict[str, object] = {}

    # ------------------------------------------------------------------ event plumbing
    async def _zk(self, fn, *args):
        return await asyncio.to_thread(fn, *args)

    def _watch(self, event: str):
        """A kazoo watch callback (runs on kazoo's thread) that queues ``event`` on the loop."""
        def fire(_watched_event):
            self.loop.call_soon_threadsafe(self.enqueue, event)
        return fire

    def _topic_watch(self, name: str):
        """The watch on a topic's assignment: queues ``partition_modifications`` for that topic alone (one
        function per topic, as kazoo keeps a set of them per path)."""
        watch = self._topic_watches.get(name)
        if watch is None:
            def watch(_watched_event):
                self.loop.call_soon_threadsafe(self.enqueue, "partition_modifications", name)
            self._topic_watches[name] = watch
        return watch

    def enqueue(self, event: str, *args) -> asyncio.Future:
        done = self.loop.create_future()
        self.queue.put_nowait((event, args, done))
        return done

    async def _process(self) -> None:
        while True:
            event, args, done = await self.queue.get()
            try:
                result = await getattr(self, "_on_" + event)(*args)
                if not done.done():
                    done.set_result(result)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("controller_event_failed", controller_event=event)
                if not done.done():
                    done.set_exception(exc)

    # ------------------------------------------------------------------ election
    async def _on_elect(self) -> None:
        current = await self._zk(self.zk.controller_id, self._watch("elect"))
        if current == self.broker_id and self.active:
            return
        if current != -1:
            if self.active:
                await self._resign("another broker is controller")
            self.broker.on_controller_seen(current)
            return
        epoch = await self._zk(self.zk.try_become_controller, self.broker_id)
        if epoch is None:
            await self._on_elect()   # lost the race: watch the winner
            return
        self.epoch = epoch
        self.active = True
        log.info("controller_elected", broker_id=self.broker_id, controller_epoch=epoch)
        await self._initialize()

    async def _resign(self, reason: str) -> None:
        log.warning("controller_resigned", broker_id=self.broker_id, reason=reason)
        self.active = False
        self.states.clear()
        self.assignments.clear()
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
        await self.channel.close()

    async def _initialize(self) -> None:
        """Rebuild the whole view from ZooKeeper, settle offline partitions, tell every broker."""
        self.live = await self._zk(self.zk.live_brokers, self._broker_watch)
        for broker_id, info in self.live.items():
            self.channel.add_broker(broker_id, *info.endpoint(self.inter_broker_listener))
        names = await self._zk(self.zk.topic_names, self._watch("topic_change"))
        for name in names:
            await self._load_topic(name)
        self.broker.on_controller_seen(self.broker_id)
        changed = self._elect_offline(set(self.states))
        # (brokers that died with the last controller leave the ISRs, as Kafka's takes their replicas offline)
        self._drop_from_isrs({r for state in self.states.values() for r in state.isr if r not in self.live}, changed)
        await self._publish(changed, everything_to=set(self.live))
        await self._on_delete_topics()
        await self._on_log_dir_event()
        await self.reassignments.maybe_complete(set(self.states))   # one the last controller left half done
        if self.broker.config["auto.leader.rebalance.enable"]:
            self._rebalance_task = asyncio.create_task(self._auto_rebalance())

    async def _load_topic(self, name: str) -> list[tuple[str, int]]:
        """Read a topic's assignment and partition states; create the state of new partitions."""
        assignment = await self._zk(self.zk.topic_assignment, name, self._topic_watch(name))
        if assignment is None:
            return []
        self.assignments[name] = assignment
        fresh = []
        states = await self._zk(self.zk.partition_states, name, list(assignment.partitions))
        for p, replicas in assignment.partitions.items():
            state = states[p]
            if state is None:
                live = [r for r in replicas if r in self.live]
                state = LeaderIsr(live[0] if live else NO_LEADER, 0, live, self.epoch, -1)
                fresh.append((name, p))
                self._dirty.add((name, p))
            self.states[(name, p)] = state
        return fresh

    # ------------------------------------------------------------------ helpers
    def _names_by_id(self) -> dict[bytes, str]:
        return {a.topic_id: name for name, a in self.assignments.items()}

    def _replicas(self, tp: tuple[str, int]) -> list[int]:
        return self.assignments[tp[0]].partitions.get(tp[1], [])

    def _epoch_of(self, broker_id: int) -> int:
        """The broker epoch a request to ``broker_id`` carries, so that a later run of it refuses the request
        (-1: none known)."""
        info = self.live.get(broker_id)
        return info.epoch if info is not None else -1

    def _hosts(self, broker_id: int, tp: tuple[str, int]) -> bool:
        return broker_id in self._replicas(tp)

    def _leave_isrs(self, broker_id: int, partitions, changed: set) -> None:
        """``broker_id`` leaves the ISR of ``partitions`` led by another broker (not already in ``changed``,
        whose new state was just chosen); those changed join ``changed``."""
        for tp in partitions:
            state = self.states[tp]
            if tp not in changed and broker_id in state.isr and state.leader not in (broker_id, NO_LEADER):
                self._change(tp, state.leader, [r for r in state.isr if r != broker_id])
                changed.add(tp)

    def _change(self, tp, leader: int, isr: list[int]) -> None:
        state = self.states[tp]
        if state.zk_version >= 0:   # an existing state: every change fences the previous leader epoch
            state.leader_epoch += 1
        state.leader, state.isr, state.controller_epoch = leader, isr, self.epoch
        self._dirty.add(tp)

    async def _write_pending(self) -> None:
        """Write every changed partition state to ZooKeeper (create or conditional update)."""
        dirty, self._dirty = set(self._dirty), set()
        writes = [(tp[0], tp[1], self.states[tp]) for tp in sorted(dirty) if tp in self.states]
        creations = [state.zk_version < 0 for _, _, state in writes]
        made = await self._zk(self.zk.write_partition_states, writes)
        for (topic, p, _), creation, ok in zip(writes, creations, made):
            if ok:
                continue
            if creation:   # another controller created it: read it back
                self.states[(topic, p)] = await self._zk(self.zk.partition_state, topic, p)
            else:
                await self._resign(f"conditional write of {(topic, p)} failed: a newer controller owns the state")
                raise RuntimeError("controller moved")

    # ------------------------------------------------------------------ events
    async def _on_broker_change(self) -> None:
        """Brokers that left, started, re-registered or changed their endpoints. A broker whose registration
        has a new epoch (its znode's czxid) behind the same id is a new process that stopped and started while
        this controller was not looking: as Kafka's controller does with a bounced broker, it is handled as
        failed (its leaderships move to another ISR member, it leaves the ISRs) and then as started."""
        if not self.active:
            return
        now = await self._zk(self.zk.live_brokers, self._broker_watch)
        gone = set(self.live) - set(now)
        stayed = set(now) & set(self.live)
        bounced = {b for b in stayed if now[b].epoch != self.live[b].epoch}
        failed = gone | bounced
        born = bounced | {b for b in now if b not in self.live or self.live[b].endpoints != now[b].endpoints}
        self.live = now
        self.shutting_down -= failed | born
        for b in failed | born:
            self.offline_replicas.pop(b, None)
        for b in failed:
            self.channel.remove_broker(b)   # (a bounced broker's queue held the connection to its last process)
        for b in born:
            self.channel.add_broker(b, *now[b].endpoint(self.inter_broker_listener))
        log.info("controller_broker_change", live=sorted(now), failed=sorted(gone), started=sorted(born),
                 bounced=sorted(bounced))
        changed = self._elect_offline(set(self.states), avoid=bounced)
        if bounced:   # where a bounced broker was the only ISR member, it is the one leader that loses nothing
            changed |= self._elect_offline(set(self.states))
        self._drop_from_isrs(failed, changed)
        # (a started broker learns all it hosts; the others, every partition whose offline replicas changed)
        await self._publish(changed, everything_to=born,
                            described={tp for tp in self.states if any(self._hosts(b, tp) for b in failed)})

    def _drop_from_isrs(self, failed, changed: set) -> None:
        """The ``failed`` brokers leave every ISR a live leader keeps (Kafka's OfflineReplica transition), so
        that no acks=all write waits for them until the leader's own lag check; ``changed`` gains what moved."""
        for tp, state in self.states.items():
            dead_in_isr = [r for r in state.isr if r in failed and r != state.leader]
            if not dead_in_isr or state.leader == NO_LEADER:
                continue
            isr = [r for r in state.isr if r not in dead_in_isr]
            if tp in changed:   # (a new leader was just chosen, beside a bounced broker that is live again)
                state.isr = isr
            else:
                self._change(tp, state.leader, isr)
                changed.add(tp)

    async def _on_topic_change(self) -> None:
        """Topics created: only those not known are read (a topic's own changes come to
        ``_on_partition_modifications``; reading every topic's assignment at each creation made creating n topics
        cost O(n²) reads)."""
        if not self.active:
            return
        names = await self._zk(self.zk.topic_names, self._watch("topic_change"))
        fresh = []
        for name in names:
            if name not in self.assignments:
                fresh += await self._load_topic(name)
        await self._partitions_created(fresh)

    async def _on_partition_modifications(self, name: str) -> None:
        """A known topic's assignment changed in ZooKeeper (CreatePartitions): its new partitions are created."""
        if not self.active or name not in self.assignments:
            return
        assignment = await self._zk(self.zk.topic_assignment, name)
        known = self.assignments.get(name)
        if assignment is None or known is None or known.partitions == assignment.partitions:
            return
        await self._partitions_created(await self._load_topic(name))

    async def _partitions_created(self, fresh: list) -> None:
        if fresh:
            log.info("controller_partitions_created", partitions=len(fresh))
            self._new_replicas = set(fresh)   # is_new: created empty even where a log dir is offline
            try:
                await self._publish(set(fresh))
            finally:
                self._new_replicas = set()

    async def _on_delete_topics(self) -> None:
        if not self.active:
            return
        names = await self._zk(self.zk.topics_to_delete, self._watch("delete_topics"))
        if not names:
            return
        for name in names:
            assignment = self.assignments.pop(name, None)
            self._topic_watches.pop(name, None)
            if assignment is not None:
                by_broker: dict[int, list[int]] = {}
                for p, replicas in assignment.partitions.items():
                    self.states.pop((name, p), None)
                    for r in replicas:
                        by_broker.setdefault(r, []).append(p)
                for b, ps in by_broker.items():
                    self.send_delete_replicas(b, name, ps)
            await self._zk(self.zk.delete_topic_znodes, name)
            log.info("controller_topic_deleted", topic=name)
        self._send_update_metadata(set(self.live), deleted=names, partitions=())

    async def _on_alter_partition(self, request, version: int = 1) -> dict:
        """A leader's ISR change: decided as Kafka's controller does (``isr_changes``), written conditionally."""
        if not self.active:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
        if request.broker_id not in self.live or request.broker_epoch != self.live[request.broker_id].epoch:
            # (a leader that has not been seen registering, or an earlier run of one: Kafka's refusal)
            log.info("alter_partition_stale_broker_epoch", broker_id=request.broker_id,
                     broker_epoch=request.broker_epoch, current=self._epoch_of(request.broker_id))
            return {"throttle_time_ms": 0, "error_code": ErrorCode.STALE_BROKER_EPOCH, "topics": []}
        topics, changed, answered = [], set(), []
        for topic, name in isr_changes.resolve_topics(request, version, self._names_by_id() if version >= 2 else {}):
            results = []
            topics.append({"topic_name": topic.topic_name, "topic_id": topic.topic_id, "partitions": results})
            for p in topic.partitions:
                tp = (name, p.partition_index)
                state = self.states.get(tp) if name is not None else None
                new_isr = list(p.new_isr) if p.new_isr else [b.broker_id for b in (p.new_isr_with_epochs or [])]
                outcome = ErrorCode.UNKNOWN_TOPIC_ID if name is None else isr_changes.decide(
                    state, request.broker_id, p, new_isr, version, lambda b: self._usable(b, tp))
                unassigned = any(b not in self._replicas(tp) for b in new_isr) if state is not None else False
                if outcome is isr_changes.WRITE and (unassigned or tp in changed):
                    outcome = ErrorCode.INVALID_REQUEST   # (a replica not assigned, or the partition named twice)
                if isinstance(outcome, ErrorCode):
                    results.append({"partition_index": p.partition_index, "error_code": outcome, "leader_id": -1,
                                    "leader_epoch": -1, "isr": [], "partition_epoch": -1})
                    continue
                if outcome is isr_changes.WRITE:
                    state.isr = new_isr
                    state.controller_epoch = self.epoch
                    changed.add(tp)
                answer = {"partition_index": p.partition_index, "error_code": 0}   # (filled once written)
                results.append(answer)
                answered.append((answer, state))
        # (the writes pipelined; each answer carries the version its write made)
        writes = [(tp[0], tp[1], self.states[tp]) for tp in sorted(changed)]
        if not all(await self._zk(self.zk.write_partition_states, writes)):
            await self._resign(f"a conditional write of {len(writes)} ISR changes failed")
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
        for tp in sorted(changed):
            log.info("isr_changed", topic=tp[0], partition=tp[1], isr=self.states[tp].isr,
                     leader_epoch=self.states[tp].leader_epoch)
        for answer, state in answered:
            answer.update(leader_id=state.leader, leader_epoch=state.leader_epoch, isr=list(state.isr),
                          partition_epoch=state.zk_version)
        if changed:
            self._send_update_metadata(set(self.live), partitions=changed)
            await self.reassignments.maybe_complete(changed)   # a target replica may have just caught up
        return {"throttle_time_ms": 0, "error_code": 0, "topics": topics}

    async def _on_log_dir_event(self) -> None:
        """Brokers reported a failed log dir (``/log_dir_event_notification``): each is sent LeaderAndIsr for
        every replica it hosts, and answers KAFKA_STORAGE_ERROR for those in the failed dir (see
        ``_storage_errors``), as Kafka's controller finds them."""
        if not self.active:
            return
        for broker_id in await self._zk(self.zk.take_log_dir_events, self._watch("log_dir_event")):
            log.warning("controller_log_dir_failure", broker_id=broker_id)
            self._send_leader_and_isr(broker_id, [tp for tp in self.states if self._hosts(broker_id, tp)])

    async def _on_replicas_offline(self, broker_id: int, partitions: set) -> None:
        """``broker_id``'s replicas of ``partitions`` are offline: leadership moves to another ISR member, the
        ISR loses them, and every broker learns it."""
        if not self.active or broker_id not in self.live:
            return
        partitions = {tp for tp in partitions if tp in self.states}
        self.offline_replicas.setdefault(broker_id, set()).update(partitions)
        changed = self._elect_offline(partitions)
        self._leave_isrs(broker_id, partitions, changed)
        log.warning("controller_replicas_offline", broker_id=broker_id, partitions=len(partitions),
                    changed=len(changed))
        await self._publish(changed, described=partitions)

    async def _on_alter_reassignments(self, request) -> dict:
        return await self.reassignments.alter(request)

    async def _on_list_reassignments(self, request) -> dict:
        return self.reassignments.listed(request)

    async def _on_controlled_shutdown(self, broker_id: int, broker_epoch: int = -1) -> tuple[ErrorCode, list]:
        """Move leadership off ``broker_id`` and drop it from every ISR; what cannot move is returned. An
        earlier run of that broker (a lower ``broker_epoch``; -1: not known to the sender) is refused."""
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, []
        if broker_id not in self.live:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch != -1 and broker_epoch < self.live[broker_id].epoch:
            return ErrorCode.STALE_BROKER_EPOCH, []
        self.shutting_down.add(broker_id)
        changed = self._elect_offline({tp for tp, s in self.states.items() if s.leader == broker_id
                                       and len(self._replicas(tp)) > 1}, avoid={broker_id})
        self._leave_isrs(broker_id, self.states, changed)
        await self._publish(changed)
        remaining = [tp for tp, s in self.states.items() if s.leader == broker_id]
        log.info("controlled_shutdown", broker_id=broker_id, moved=len(changed), remaining=len(remaining))
        return ErrorCode.NONE, remaining

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.enqueue("elect")

    async def close(self) -> None:
        if self.active:
            await self._zk(self.zk.resign_controller, self.broker_id)
        self.active = False
        # (stopped for sure before the channel closes: a controller still running would queue new requests)
        await cancel_and_wait(self.task)
        if self._rebalance_task is not None:
            await cancel_and_wait(self._rebalance_task)
        await self.channel.close()
