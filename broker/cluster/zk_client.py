"""KafkaZkClient: cluster metadata in ZooKeeper, in Kafka's znode layout and JSON formats.

Everything here is blocking kazoo calls; the broker runs them on worker
threads (``asyncio.to_thread``) so a slow or absent ZooKeeper never stalls the
event loop. Watches fire on kazoo's thread and are handed to the loop by the
caller's callback.

The layout, inspectable with ``zkCli.sh``::

    /cluster/id                                       {"version":"1","id":...}
    /brokers/ids/<id>                 (ephemeral)     endpoints, rack, timestamp
    /controller                       (ephemeral)     {"version":1,"brokerid":...}
    /controller_epoch                                 "<epoch>"
    /brokers/topics/<topic>                           replica assignment, topic id
    /brokers/topics/<topic>/partitions/<p>/state      leader, leader_epoch, isr, controller_epoch
    /config/topics/<topic>                            {"version":1,"config":{...}}
    /config/users/<user>                              {"version":1,"config":{"SCRAM-SHA-256":"salt=..."}}
    /config/brokers/<id> and /config/brokers/<default>  {"version":1,"config":{...}}  (dynamic broker configs)
    /config/changes/config_change_<seq>               {"version":2,"entity_path":"topics/<topic>"}
    /admin/delete_topics/<topic>
    /latest_producer_id_block                         {"version":1,"broker":..,"block_start":..,"block_end":..}

Partition state is only ever written by the controller, with a conditional
write on the znode version it read (the "zk version" in LeaderAndIsr). The
``/config`` znodes and their change notifications: ``zk_configs.py``.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kbroker.broker.cluster.zk_configs import ZkConfigs, dump_json, parse_json
from kbroker.protocol.types import uuid_from_str, uuid_to_str

PERSISTENT_PATHS = ("/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/topics", "/config/changes",
                    "/config/brokers", "/config/users", "/config/clients", "/config/ips", "/admin/delete_topics",
                    "/isr_change_notification", "/log_dir_event_notification")
PRODUCER_ID_BLOCK_SIZE = 1000


@dataclass
class BrokerInfo:
    broker_id: int
    endpoints: list[tuple[str, str, int]]        # (listener name, host, port)
    rack: str | None = None
    epoch: int = -1   # Kafka's broker epoch: the zxid that created the registration znode (-1: not read from it)

    def endpoint(self, listener: str | None = None) -> tuple[str, int]:
        for name, host, port in self.endpoints:
            if listener is None or name == listener:
                return host, port
        name, host, port = self.endpoints[0]
        return host, port

    def to_json(self, security_map: dict[str, str]) -> bytes:
        host, port = self.endpoints[0][1], self.endpoints[0][2]
        return dump_json({"version": 5, "host": host, "port": port, "jmx_port": -1,
                      "timestamp": str(int(time.time() * 1000)),
                      "endpoints": [f"{n}://{h}:{p}" for n, h, p in self.endpoints],
                      "listener_security_protocol_map": security_map, "rack": self.rack, "features": {}})

    @classmethod
    def from_json(cls, broker_id: int, data: bytes) -> "BrokerInfo":
        raw = parse_json(data)
        endpoints = []
        for spec in raw.get("endpoints", []):
            name, rest = spec.split("://", 1)
            host, _, port = rest.rpartition(":")
            endpoints.append((name, host.strip("[]"), int(port)))
        return cls(broker_id, endpoints, raw.get("rack"))


@dataclass
class LeaderIsr:
    """One partition's state znode, with the znode version a conditional write must match."""
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    zk_version: int = 0

    def to_json(self) -> bytes:
        return dump_json({"controller_epoch": self.controller_epoch, "leader": self.leader, "version": 1,
                      "leader_epoch": self.leader_epoch, "isr": self.isr})


@dataclass
class TopicAssignment:
    name: str
    topic_id: bytes
    partitions: dict[int, list[int]] = field(default_factory=dict)
    # An ongoing reassignment (KIP-455), as Kafka keeps it in the same znode: the replicas being added and
    # removed per partition; ``partitions`` then holds the target replicas followed by the leaving ones.
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)


# The longest one connection attempt waits for ZooKeeper's answer before the next attempt. ZooKeeper opens
# its port before its database has loaded and may then accept a connection it never answers
# (ZOOKEEPER-5051); one attempt must not spend the whole connection timeout on it.
ATTEMPT_S = 2.0


def attempt_hosts(hosts: str, session_timeout_ms: int) -> str:
    """``hosts`` listed often enough that kazoo's wait for a connect answer, the session timeout divided by
    the number of hosts listed, is at most ``ATTEMPT_S``. (kazoo has no setting of its own for it; it
    cycles through the list, so a repeated host is simply tried again.)"""
    listed = hosts.split(",")
    repeat = max(1, math.ceil(session_timeout_ms / 1000 / ATTEMPT_S / len(listed)))
    return ",".join(listed * repeat)


class KafkaZkClient(ZkConfigs):
    def __init__(self, connect: str, session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None
                 ) -> None:
        """``connection_timeout_ms``: how long ``start`` keeps trying (Kafka's zookeeper.connection.timeout.ms,
        the session timeout when unset), in attempts of at most ``ATTEMPT_S`` each."""
        hosts, slash, chroot = connect.partition("/")
        self.chroot = ("/" + chroot.strip("/")) if slash and chroot.strip("/") else ""
        self.hosts = hosts
        self.connection_timeout = (connection_timeout_ms or session_timeout_ms) / 1000
        self.zk = KazooClient(hosts=attempt_hosts(hosts, session_timeout_ms), timeout=session_timeout_ms / 1000,
                              connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1})

    def path(self, p: str) -> str:
        return self.chroot + p

    # ------------------------------------------------------------------ session
    def start(self) -> None:
        self.zk.start(timeout=self.connection_timeout)
        for p in PERSISTENT_PATHS:
            self.zk.ensure_path(self.path(p))

    def stop(self) -> None:
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:   # already closed or never connected: nothing to release
            pass

    @property
    def session_id(self) -> int | None:
        sid = self.zk.client_id
        return sid[0] if sid else None

    def add_listener(self, callback) -> None:
        self.zk.add_listener(callback)

    # ------------------------------------------------------------------ cluster id
    def get_or_create_cluster_id(self, proposed: str) -> str:
        p = self.path("/cluster/id")
        try:
            self.zk.create(p, dump_json({"version": "1", "id": proposed}), makepath=True)
            return proposed
        except NodeExistsError:
            return parse_json(self.zk.get(p)[0])["id"]

    # ------------------------------------------------------------------ brokers
    def register_broker(self, info: BrokerInfo, security_map: dict[str, str], wait_s: float) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; an old session's znode is waited out, not stolen.
        Returns the broker epoch: the zxid that created the znode, new with every registration."""
        p = self.path(f"/brokers/ids/{info.broker_id}")
        deadline = time.monotonic() + wait_s
        while True:
            try:
                _, stat = self.zk.create(p, info.to_json(security_map), ephemeral=True, include_data=True)
                return stat.czxid
            except NodeExistsError:
                try:
                    _, stat = self.zk.get(p)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self.session_id:
                    return stat.czxid
                if time.monotonic() > deadline:
                    raise RuntimeError(f"broker id {info.broker_id} is registered by another live session") \
                        from None
                time.sleep(0.2)

    def update_broker_registration(self, info: BrokerInfo, security_map: dict[str, str]) -> None:
        """Rewrite our own ``/brokers/ids/<id>`` (advertised endpoints changed); the controller, watching it,
        tells every broker."""
        self.zk.set(self.path(f"/brokers/ids/{info.broker_id}"), info.to_json(security_map))

    def broker_ids(self, watch=None) -> list[int]:
        return sorted(int(c) for c in self.zk.get_children(self.path("/brokers/ids"), watch=watch))

    def broker_info(self, broker_id: int, watch=None) -> BrokerInfo | None:
        try:
            data, stat = self.zk.get(self.path(f"/brokers/ids/{broker_id}"), watch=watch)
        except NoNodeError:
            return None
        info = BrokerInfo.from_json(broker_id, data)
        info.epoch = stat.czxid
        return info

    def live_brokers(self, watch=None) -> dict[int, BrokerInfo]:
        """Every registered broker; ``watch`` fires on a registration coming or going and on one's data
        changing (Kafka's controller watches both: BrokerChange and BrokerModifications)."""
        out = {}
        for broker_id in self.broker_ids(watch):
            info = self.broker_info(broker_id, watch)
            if info is not None:
                out[broker_id] = info
        return out

    # ------------------------------------------------------------------ controller
    def controller_id(self, watch=None) -> int:
        try:
            data, _ = self.zk.get(self.path("/controller"), watch=watch)
        except NoNodeError:
            if watch is not None:
                self.zk.exists(self.path("/controller"), watch=watch)
            return -1
        return int(parse_json(data)["brokerid"])

    def try_become_controller(self, broker_id: int) -> int | None:
        """Create ``/controller``; on success bump ``/controller_epoch`` (conditionally) and return it."""
        try:
            self.zk.create(self.path("/controller"), dump_json({"version": 1, "brokerid": broker_id,
                                                            "timestamp": str(int(time.time() * 1000))}),
                           ephemeral=True)
        except NodeExistsError:
            return None
        p = self.path("/controller_epoch")
        while True:
            try:
                data, stat = self.zk.get(p)
            except NoNodeError:
                try:
                    self.zk.create(p, b"1")
                    return 1
                except NodeExistsError:
                    continue
            epoch = int(data.decode()) + 1
            try:
                self.zk.set(p, str(epoch).encode(), version=stat.version)
                return epoch
            except BadVersionError:
                continue

    def controller_epoch(self) -> int:
        try:
            return int(self.zk.get(self.path("/controller_epoch"))[0].decode())
        except NoNodeError:
            return 0

    def resign_controller(self, broker_id: int) -> None:
        try:
            if self.controller_id() == broker_id:
                self.zk.delete(self.path("/controller"))
        except NoNodeError:
            pass

    # ------------------------------------------------------------------ topics
    def topic_names(self, watch=None) -> list[str]:
        return sorted(self.zk.get_children(self.path("/brokers/topics"), watch=watch))

    def topic_assignment(self, topic: str, watch=None) -> TopicAssignment | None:
        try:
            data, _ = self.zk.get(self.path(f"/brokers/topics/{topic}"), watch=watch)
        except NoNodeError:
            return None
        raw = parse_json(data)
        return TopicAssignment(topic, uuid_from_str(raw["topic_id"]) if raw.get("topic_id") else bytes(16),
                               {int(p): list(r) for p, r in raw["partitions"].items()},
                               {int(p): list(r) for p, r in (raw.get("adding_replicas") or {}).items() if r},
                               {int(p): list(r) for p, r in (raw.get("removing_replicas") or {}).items() if r})

    def create_topic(self, assignment: TopicAssignment, configs: dict[str, str]) -> None:
        """Configs first, then the assignment the controller watches for (as Kafka's AdminZkClient)."""
        self.set_topic_config(assignment.name, configs, notify=False)
        try:
            self.zk.create(self.path(f"/brokers/topics/{assignment.name}"), self._assignment_json(assignment))
        except NodeExistsError:
            raise TopicExists(assignment.name) from None

    def set_topic_assignment(self, assignment: TopicAssignment) -> None:
        self.zk.set(self.path(f"/brokers/topics/{assignment.name}"), self._assignment_json(assignment))

    @staticmethod
    def _assignment_json(a: TopicAssignment) -> bytes:
        return dump_json({"version": 3, "topic_id": uuid_to_str(a.topic_id),
                      "partitions": {str(p): r for p, r in sorted(a.partitions.items())},
                      "adding_replicas": {str(p): r for p, r in sorted(a.adding.items()) if r},
                      "removing_replicas": {str(p): r for p, r in sorted(a.removing.items()) if r}})

    def mark_topic_for_deletion(self, topic: str) -> None:
        try:
            self.zk.create(self.path(f"/admin/delete_topics/{topic}"))
        except NodeExistsError:
            pass

    def topics_to_delete(self, watch=None) -> list[str]:
        return sorted(self.zk.get_children(self.path("/admin/delete_topics"), watch=watch))

    def delete_topic_znodes(self, topic: str) -> None:
        for p in (f"/brokers/topics/{topic}", f"/config/topics/{topic}", f"/admin/delete_topics/{topic}"):
            try:
                self.zk.delete(self.path(p), recursive=True)
            except NoNodeError:
                pass

    # ------------------------------------------------------------------ log dir failures
    def propagate_log_dir_event(self, broker_id: int) -> None:
        """A log dir of ``broker_id`` failed: a sequential notification the controller consumes."""
        self.zk.create(self.path("/log_dir_event_notification/log_dir_event_"),
                       json.dumps({"version": 1, "broker": broker_id, "event": 1}).encode(), sequence=True)

    def take_log_dir_events(self, watch=None) -> set[int]:
        """The brokers with a pending log dir failure notification; the notifications are deleted."""
        parent = self.path("/log_dir_event_notification")
        brokers = set()
        for name in self.zk.get_children(parent, watch=watch):
            try:
                data, _ = self.zk.get(f"{parent}/{name}")
                brokers.add(int(parse_json(data)["broker"]))
                self.zk.delete(f"{parent}/{name}")
            except NoNodeError:
                pass
        return brokers

    # ------------------------------------------------------------------ partition state
    def _state_path(self, topic: str, partition: int) -> str:
        return self.path(f"/brokers/topics/{topic}/partitions/{partition}/state")

    def partition_state(self, topic: str, partition: int) -> LeaderIsr | None:
        return self.partition_states(topic, [partition])[partition]

    def partition_states(self, topic: str, partitions) -> dict[int, LeaderIsr | None]:
        """Each of ``partitions``' state (None where it has none), the reads pipelined on the session (one
        round trip's wait for them all, where a call each waited a round trip and a thread hop apiece)."""
        pending = {p: self.zk.get_async(self._state_path(topic, p)) for p in partitions}
        out = {}
        for p, result in pending.items():
            try:
                data, stat = result.get()
            except NoNodeError:
                out[p] = None
                continue
            raw = parse_json(data)
            out[p] = LeaderIsr(raw["leader"], raw["leader_epoch"], list(raw["isr"]), raw["controller_epoch"],
                               stat.version)
        return out

    def write_partition_states(self, writes) -> list[bool]:
        """Each ``(topic, partition, state)`` created where ``state.zk_version`` < 0, else written conditionally
        on it (the new version is stored in ``state``), the writes pipelined: whether each was made (a creation
        that found the znode there, or a conditional write that found another version, was not)."""
        pending = []
        for topic, partition, state in writes:
            path, data = self._state_path(topic, partition), state.to_json()
            pending.append((state, self.zk.create_async(path, data, makepath=True) if state.zk_version < 0
                            else self.zk.set_async(path, data, version=state.zk_version)))
        made = []
        for state, result in pending:
            try:
                stat = result.get()
            except (NodeExistsError, BadVersionError, NoNodeError):
                made.append(False)
                continue
            state.zk_version = 0 if state.zk_version < 0 else stat.version
            made.append(True)
        return made

    # ------------------------------------------------------------------ producer ids
    def allocate_producer_id_block(self, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> tuple[int, int]:
        """[start, end] of a block no other broker will ever get: a conditional update of the latest block."""
        p = self.path("/latest_producer_id_block")
        while True:
            try:
                data, stat = self.zk.get(p)
            except NoNodeError:
                try:
                    self.zk.create(p, b"")
                except NodeExistsError:
                    pass
                continue
            raw = parse_json(data)
            start = int(raw["block_end"]) + 1 if raw else 0
            block = {"version": 1, "broker": broker_id, "block_start": str(start),
                     "block_end": str(start + size - 1)}
            try:
                self.zk.set(p, dump_json(block), version=stat.version)
                return start, start + size - 1
            except BadVersionError:
                continue


class TopicExists(Exception):
    pass
