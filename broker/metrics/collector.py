"""The broker's metrics as Prometheus families, named after Kafka's JMX beans the way the Prometheus JMX
exporter's standard Kafka rules expose them (``kafka_server_brokertopicmetrics_bytesin_total{topic=...}``,
``kafka_server_replicamanager_underreplicatedpartitions`` ...), and consumer lag as the popular Kafka lag
exporters name it (``kafka_consumergroup_lag{consumergroup, topic, partition}``).

Everything but the request path's counters (``counters.BrokerCounters``) is read from the broker's state at
scrape time, on the event loop thread (``http`` calls ``generate_latest`` there): nothing is kept twice.
Consumer lag covers the groups this broker coordinates and the partitions it has a replica of (leader or
follower: a follower knows the high watermark from its fetches).
"""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from kbroker.broker.metrics.counters import PHASES
from kbroker.storage.open_files import OPEN_FILES

_PHASE_NAMES = {"queue": "requestqueuetimems", "local": "localtimems", "remote": "remotetimems",
                "response_send": "responsesendtimems", "total": "totaltimems"}
_TOPIC_COUNTERS = (("bytesin", "bytes_in", "Bytes appended from producers"),
                   ("bytesout", "bytes_out", "Bytes sent to consumers"),
                   ("messagesin", "messages_in", "Records appended from producers"),
                   ("totalproducerequests", "produce_requests", "Produce requests, per partition"),
                   ("totalfetchrequests", "fetch_requests", "Consumer fetch requests, per partition"),
                   ("failedproducerequests", "failed_produce", "Produce requests that failed, per partition"),
                   ("failedfetchrequests", "failed_fetch", "Fetch requests that failed, per partition"))


class BrokerCollector(Collector):
    def __init__(self, broker) -> None:
        self.broker = broker

    def collect(self):
        yield from self._topic_counters()
        yield from self._requests()
        yield from self._replicas()
        yield from self._logs()
        yield from self._cluster()
        yield from self._groups()
        yield from self._transactions()
        yield from self._network()
        yield from self._open_files()

    # ------------------------------------------------------------------ request path counters
    def _topic_counters(self):
        counters = self.broker.metrics
        for short, attr, doc in _TOPIC_COUNTERS:
            family = Metric(f"kafka_server_brokertopicmetrics_{short}", doc, "counter")
            total = 0
            for topic, c in sorted(counters.topics.items()):
                value = getattr(c, attr)
                total += value
                family.add_sample(f"kafka_server_brokertopicmetrics_{short}_total", {"topic": topic}, value)
            family.add_sample(f"kafka_server_brokertopicmetrics_{short}_total", {}, total)   # all topics
            yield family
        rm = self.broker.replica_manager
        for short, value, doc in (("replicationbytesin", rm.replication_bytes_in, "Bytes fetched as follower"),
                                  ("replicationbytesout", counters.replication_bytes_out, "Bytes sent to followers")):
            yield CounterMetricFamily(f"kafka_server_brokertopicmetrics_{short}", doc, value=value)

    def _requests(self):
        counters = self.broker.metrics
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests answered",
                                       labels=["request", "version"])
        for (api, version), n in sorted(counters.requests.items()):
            requests.add_metric([api, str(version)], n)
        yield requests
        for phase in PHASES:
            name = f"kafka_network_requestmetrics_{_PHASE_NAMES[phase]}"
            family = HistogramMetricFamily(name, f"Request {phase.replace('_', ' ')} time in ms", labels=["request"])
            for api, phases in sorted(counters.times.items()):
                h = phases[phase]
                family.add_metric([api], h.cumulative(), h.total)
            yield family

    # ------------------------------------------------------------------ partitions and logs
    def _replicas(self):
        broker = self.broker
        partitions = list(broker.replica_manager.partitions.values())
        leaders = [p for p in partitions if p.is_leader]
        under = [p for p in leaders if len(p.isr) < len(p.replicas)]
        under_min = [p for p in leaders if len(p.isr) < p.min_isr]
        for name, value, doc in (
                ("partitioncount", len(partitions), "Replicas on this broker"),
                ("leadercount", len(leaders), "Partitions this broker leads"),
                ("underreplicatedpartitions", len(under), "Led partitions whose ISR is smaller than their replicas"),
                ("underminisrpartitioncount", len(under_min), "Led partitions with fewer in sync than min.insync")):
            yield GaugeMetricFamily(f"kafka_server_replicamanager_{name}", doc, value=value)
        per_partition = GaugeMetricFamily("kafka_cluster_partition_underreplicated",
                                          "1 if this led partition is under-replicated", labels=["topic", "partition"])
        for p in leaders:
            per_partition.add_metric([p.topic, str(p.index)], 1 if p in under else 0)
        yield per_partition
        rm = broker.replica_manager
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks", "ISR shrinks", value=rm.isr_shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands", "ISR expansions", value=rm.isr_expands)
        purgatory = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                                      "Requests parked in a purgatory", labels=["delayedOperation"])
        purgatory.add_metric(["Fetch"], rm.fetch_purgatory.watched())
        purgatory.add_metric(["Produce"], rm.produce_purgatory.watched())
        yield purgatory

    def _logs(self):
        families = {name: GaugeMetricFamily(f"kafka_log_log_{name}", doc, labels=["topic", "partition"])
                    for name, doc in (("size", "Bytes of the partition's log"),
                                      ("numlogsegments", "Segments of the partition's log"),
                                      ("logendoffset", "The partition's log end offset"),
                                      ("logstartoffset", "The partition's log start offset"))}
        for p in self.broker.replica_manager.partitions.values():
            labels = [p.topic, str(p.index)]
            log = p.log
            families["size"].add_metric(labels, log.size_in_bytes)
            families["numlogsegments"].add_metric(labels, len(log.segments))
            families["logendoffset"].add_metric(labels, log.log_end_offset)
            families["logstartoffset"].add_metric(labels, log.log_start_offset)
        yield from families.values()
        yield GaugeMetricFamily("kafka_log_logmanager_offlinelogdirectorycount",
                                "Log dirs taken offline by an I/O error",
                                value=len(self.broker.log_manager.offline_dirs))

    # ------------------------------------------------------------------ cluster, groups, transactions
    def _cluster(self):
        member = self.broker.cluster
        controller = member.controller if member is not None else None
        active = controller is not None and controller.active
        if member is None:
            active = True   # a single broker is its own controller
        offline = 0
        if active and controller is not None:
            offline = sum(1 for s in controller.states.values() if s.leader < 0)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                                "1 on the active controller", value=1 if active else 0)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                "Partitions without a leader (counted by the active controller)", value=offline)
        fetchers = member.fetchers.fetchers.values() if member is not None else ()
        yield CounterMetricFamily("kbroker_replicafetcher_idlerounds",
                                  "Idle fetch rounds this broker's replica fetchers (those running now) sent again "
                                  "from their connections' callbacks", value=sum(f.idle.repeated for f in fetchers))
        yield CounterMetricFamily("kbroker_fetch_idleroundsheld",
                                  "Followers' idle fetches this broker held and answered from their connections' "
                                  "callbacks", value=self.broker.metrics.idle_fetches_held)
        sessions = self.broker.fetch_sessions
        yield GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                                "Incremental fetch sessions held (followers' and consumers')",
                                value=len(sessions.sessions))
        yield GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                                "Partitions held in incremental fetch sessions",
                                value=sum(len(s.partitions) for s in sessions.sessions.values()))

    def _groups(self):
        broker = self.broker
        coordinator = broker.group_coordinator
        groups = GaugeMetricFamily("kafka_coordinator_group_groupmetadatamanager_numgroups",
                                   "Groups coordinated here", value=len(coordinator.groups))
        yield groups
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark less the group's committed offset",
                                labels=["consumergroup", "topic", "partition"])
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "The group's committed offset",
                                    labels=["consumergroup", "topic", "partition"])
        for group_id in sorted(coordinator.groups):
            for (topic, index), committed in sorted(coordinator.fetch_offsets(group_id, None).items()):
                if committed is None:
                    continue
                labels = [group_id, topic, str(index)]
                current.add_metric(labels, committed.offset)
                # The high watermark of the replica here: the leader's own, or a follower's as the leader last
                # sent it (at most one fetch round behind). A partition with no replica here has no lag here.
                partition = broker.replica_manager.get(topic, index)
                if partition is not None:
                    lag.add_metric(labels, max(partition.log.high_watermark - committed.offset, 0))
        yield lag
        yield current

    def _transactions(self):
        states = GaugeMetricFamily("kbroker_transaction_coordinator_transactions",
                                   "Transactional ids coordinated here, by state", labels=["state"])
        counts: dict[str, int] = {}
        for meta in self.broker.txn_coordinator.transactions.values():
            counts[meta.state.label] = counts.get(meta.state.label, 0) + 1
        for state, n in sorted(counts.items()):
            states.add_metric([state], n)
        yield states

    def _open_files(self):
        yield GaugeMetricFamily("kbroker_log_open_files", "Segment and index files open now", value=len(OPEN_FILES))
        yield CounterMetricFamily("kbroker_log_files_opened", "Segment and index files opened (cache misses)",
                                  value=OPEN_FILES.opened)
        yield CounterMetricFamily("kbroker_log_descriptor_failures",
                                  "Log operations that failed for want of a file descriptor",
                                  value=self.broker.log_manager.descriptor_failures)

    def _network(self):
        connections = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                        "Open client connections", labels=["listener"])
        counts: dict[str, int] = {name: 0 for name, _, _ in self.broker.config.listeners}
        for conn in self.broker.connections:
            counts[conn.listener] = counts.get(conn.listener, 0) + 1
        for listener, n in sorted(counts.items()):
            connections.add_metric([listener], n)
        yield connections
        refused = CounterMetricFamily("kafka_server_socket_server_metrics_connections_refused",
                                      "Connections closed at once by a connection limit", labels=["listener", "limit"])
        for (listener, limit), n in sorted(self.broker.connection_limits.refused.items()):
            refused.add_metric([listener, limit], n)
        yield refused
        memory = self.broker.send_memory
        yield GaugeMetricFamily("kbroker_fetch_send_memory_bytes",
                                "Bytes of log read into memory for fetch answers being written",
                                value=memory.used)
        yield CounterMetricFamily("kbroker_fetch_send_memory_waits",
                                  "Times a fetch answer waited for kbroker.fetch.send.memory.bytes", value=memory.waits)
        budget = self.broker.receive_budget
        if budget is not None:
            # Kafka's SocketServer MemoryPoolUsed / MemoryPoolAvailable, for queued.max.request.bytes
            yield GaugeMetricFamily("kafka_network_socketserver_memorypoolused",
                                    "Bytes held by requests being received or waiting to be handled",
                                    value=budget.used)
            yield GaugeMetricFamily("kafka_network_socketserver_memorypoolavailable",
                                    "What queued.max.request.bytes leaves of the request memory",
                                    value=max(0, budget.limit - budget.used) if budget.limit > 0 else -1)
            yield CounterMetricFamily("kafka_network_socketserver_memorypooldepleted",
                                      "Times a connection stopped reading to wait for request memory",
                                      value=budget.pauses)
