"""What the controller tells brokers: LeaderAndIsr, UpdateMetadata and StopReplica, in Kafka's order.

Invariants:
* every request carries this controller's epoch and the addressee's broker
  epoch, so that a broker fences an earlier controller and a later run of
  itself refuses what was meant for the earlier one;
* states are written to ZooKeeper before any broker hears of them;
* a partition's new leader answers its LeaderAndIsr before UpdateMetadata
  names it to any broker (up to ``LEADERS_FIRST_S``);
* a LeaderAndIsr answer's KAFKA_STORAGE_ERROR marks that replica offline.
"""

from __future__ import annotations

import asyncio

from kbroker.broker.cluster.metadata_cache import UPDATE_TYPE_STATES, UPDATE_TYPE_INCREMENTAL
from kbroker.protocol.errors import ErrorCode

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6
LEADERS_FIRST_S = 2.0   # how long UpdateMetadata waits for new leaders' LeaderAndIsr answers (a broker may hang)
LEADER_DURING_DELETE = -2


class ControllerRequestsMixin:
    """Needs the controller's ``states``, ``assignments``, ``live``, ``offline_replicas``, ``_new_replicas``,
    ``channel``, ``epoch``, ``broker_id``, ``inter_broker_listener``, ``_replicas``, ``_hosts``, ``_epoch_of``,
    ``_names_by_id``, ``_write_pending`` and ``enqueue``."""

    def _partition_state(self, tp, *, for_leader_and_isr: bool, broker_id: int = -1) -> dict:
        state = self.states[tp]
        body = {"partition_index": tp[1], "controller_epoch": state.controller_epoch, "leader": state.leader,
                "leader_epoch": state.leader_epoch, "isr": state.isr, "replicas": self._replicas(tp)}
        if for_leader_and_isr:
            a = self.assignments[tp[0]]
            body.update(partition_epoch=state.zk_version, adding_replicas=a.adding.get(tp[1], []),
                        removing_replicas=a.removing.get(tp[1], []),
                        is_new=tp in self._new_replicas or broker_id in a.adding.get(tp[1], ()))
        else:
            body.update(zk_version=state.zk_version,
                        offline_replicas=[r for r in self._replicas(tp) if r not in self.live
                                          or tp in self.offline_replicas.get(r, ())])
        return body

    def _send_leader_and_isr(self, broker_id: int, partitions) -> asyncio.Future | None:
        """The request's answer, as a future (None if nothing was sent)."""
        if not partitions or broker_id not in self.live:
            return None
        topics: dict[str, list] = {}
        for tp in sorted(partitions):
            topics.setdefault(tp[0], []).append(self._partition_state(tp, for_leader_and_isr=True,
                                                                      broker_id=broker_id))
        leaders = {self.states[tp].leader for tp in partitions} & set(self.live)
        body = {"controller_id": self.broker_id, "controller_epoch": self.epoch,
                "broker_epoch": self.live[broker_id].epoch, "type": 0,
                "topic_states": [{"topic_name": t, "topic_id": self.assignments[t].topic_id, "partition_states": ps}
                                 for t, ps in topics.items()],
                "live_leaders": [{"broker_id": b, "host_name": self.live[b].endpoint(self.inter_broker_listener)[0],
                                  "port": self.live[b].endpoint(self.inter_broker_listener)[1]} for b in leaders]}
        done = self.channel.send(broker_id, LEADER_AND_ISR, 7, body)
        if done is not None:
            done.add_done_callback(lambda f: self._storage_errors(broker_id, f))
        return done

    def _storage_errors(self, broker_id: int, answered: asyncio.Future) -> None:
        """A LeaderAndIsr answer: partitions with KAFKA_STORAGE_ERROR are replicas in a failed log dir."""
        if answered.cancelled() or answered.exception() is not None:
            return
        failed_ids = {(t.topic_id, p.partition_index) for t in answered.result().topics
                      for p in t.partition_errors if p.error_code == ErrorCode.KAFKA_STORAGE_ERROR}
        if not failed_ids:
            return
        names = self._names_by_id()
        failed = {(names[t], p) for t, p in failed_ids if t in names}
        if failed - self.offline_replicas.get(broker_id, set()):
            self.enqueue("replicas_offline", broker_id, failed)

    def send_delete_replicas(self, broker_id: int, topic: str, partitions) -> None:
        """StopReplica with delete: ``broker_id`` drops its replicas of ``partitions`` (topic deletion, or the
        replicas a reassignment moved away). The leader epoch -2 is Kafka's sentinel for a deletion."""
        self.channel.send(broker_id, STOP_REPLICA, 4, {
            "controller_id": self.broker_id, "controller_epoch": self.epoch, "broker_epoch": self._epoch_of(broker_id),
            "topic_states": [{"topic_name": topic, "partition_states": [
                {"partition_index": p, "leader_epoch": -2, "delete_partition": True} for p in partitions]}]})

    def _send_update_metadata(self, brokers, deleted: list[str] = (), partitions=None) -> None:
        """Every live broker and the states of ``partitions`` (None: every partition) to ``brokers``. A broker
        applies the states named and keeps the others (Kafka's ZooKeeper-mode metadata cache does the same), so
        that a change is sent as what changed: a full state per change made n changes cost O(n²) (a follower
        that came back rejoining the ISRs of 2,000 partitions took 150 s). ``partitions=()`` with no
        ``deleted`` is the live brokers alone, sent ahead of a started broker's LeaderAndIsr."""
        if not brokers:   # (a new controller tells every broker everything: none is left for the changes alone)
            return
        topics: dict[str, list] = {}
        for tp in sorted(self.states if partitions is None else (tp for tp in partitions if tp in self.states)):
            topics.setdefault(tp[0], []).append(self._partition_state(tp, for_leader_and_isr=False))
        for name in deleted:
            topics[name] = [{"partition_index": 0, "controller_epoch": self.epoch, "leader": LEADER_DURING_DELETE,
                             "leader_epoch": 0, "isr": [], "zk_version": 0, "replicas": [], "offline_replicas": []}]
        brokers_alone = partitions is not None and not topics and not deleted
        body = {"controller_id": self.broker_id, "controller_epoch": self.epoch,
                "type": UPDATE_TYPE_INCREMENTAL if brokers_alone else UPDATE_TYPE_STATES,
                "topic_states": [{"topic_name": t, "topic_id": self.assignments[t].topic_id
                                  if t in self.assignments else bytes(16), "partition_states": ps}
                                 for t, ps in topics.items()],
                "live_brokers": [{"id": b, "rack": info.rack,
                                  "endpoints": [{"port": port, "host": host, "listener": name, "security_protocol": 0}
                                                for name, host, port in info.endpoints]}
                                 for b, info in sorted(self.live.items())]}
        for broker_id in brokers:
            self.channel.send(broker_id, UPDATE_METADATA, 8, {**body, "broker_epoch": self._epoch_of(broker_id)})

    async def _publish(self, changed: set, everything_to=frozenset(), described=frozenset()) -> None:
        """Write changed states, then LeaderAndIsr to their replicas and UpdateMetadata to every broker;
        ``everything_to`` (brokers just started, or every broker under a new controller) are told every
        partition they host instead, and every partition's state. The other brokers' UpdateMetadata names the
        partitions changed, those ``everything_to`` host and ``described`` (those whose offline replicas moved),
        as Kafka's controller names them.

        A partition's new leader answers its LeaderAndIsr before any broker is told who leads (up to
        ``LEADERS_FIRST_S``): a client that learnt of the new leader from another broker's metadata first would
        send it writes it refuses as a follower, then writes it takes as leader; an idempotent producer whose
        first batch was refused and second taken there counts the first delivered (librdkafka does), and a
        leader with no state for the producer takes the second at any sequence (KIP-360)."""
        hosted = {b: [tp for tp in self.states if self._hosts(b, tp)] for b in everything_to}
        if everything_to:
            # Kafka's order for a broker that started and for a new controller: every broker learns who is alive
            # before any LeaderAndIsr. A Kafka broker looks its leaders' endpoints up there (without it, a Kafka
            # 3.9 broker joining a kbroker cluster found "the new leader 1 is unavailable" and followed nothing).
            self._send_update_metadata(set(self.live), partitions=())
        if changed or everything_to:
            await self._write_pending()
            by_broker = {b: list(tps) for b, tps in hosted.items()}
            for tp in changed:
                for r in self._replicas(tp):
                    if r not in everything_to:
                        by_broker.setdefault(r, []).append(tp)
            leaders_told = []
            for broker_id, tps in by_broker.items():
                done = self._send_leader_and_isr(broker_id, tps)
                if done is not None and any(self.states[tp].leader == broker_id for tp in tps if tp in changed):
                    leaders_told.append(done)
            if leaders_told:
                await asyncio.wait(leaders_told, timeout=LEADERS_FIRST_S)
        told_all = set(self.live) & set(everything_to)
        self._send_update_metadata(told_all)
        self._send_update_metadata(set(self.live) - told_all,
                                   partitions=set(changed).union(described, *hosted.values()))
