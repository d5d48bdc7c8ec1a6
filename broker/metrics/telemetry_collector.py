"""Clients' pushed metrics (``client_telemetry``) as Prometheus families, beside the broker's own.

Each OTLP metric keeps its name with every character Prometheus does not allow made ``_``
(``org.apache.kafka.producer.node.request.latency.avg`` is
``org_apache_kafka_producer_node_request_latency_avg``); gauges and non-monotonic sums are gauges,
monotonic sums counters, histograms histograms. Every sample is labelled with the client's id, instance id,
software name and version, then its resource's and data point's own attributes. A name reported with two
different kinds keeps the first. The broker's own view is ``kafka_server_clientmetrics_*``.
"""

from __future__ import annotations

import re

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kbroker.protocol.otlp import GAUGE, HISTOGRAM, SUM

_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_]")
_IDENTITY = ("client_id", "client_instance_id", "client_software_name", "client_software_version")


def prometheus_name(name: str) -> str:
    name = _NOT_ALLOWED.sub("_", name)
    return "_" + name if name[:1].isdigit() else name


class ClientTelemetryCollector(Collector):
    def __init__(self, telemetry) -> None:
        self.telemetry = telemetry

    def collect(self):
        telemetry = self.telemetry
        live = telemetry.live()
        yield GaugeMetricFamily("kafka_server_clientmetrics_instancecount",
                                "Client instances that asked for their telemetry subscription",
                                value=len(telemetry.instances))
        for key, doc in (("pushes", "Telemetry pushes accepted"),
                         ("throttled", "Telemetry requests earlier than their push interval"),
                         ("unknown_subscription", "Telemetry pushes under a subscription id no longer current"),
                         ("errors", "Telemetry pushes whose metrics did not decode"),
                         ("not_kept", "Telemetry pushes accepted but not kept (kbroker.telemetry.max.points)")):
            yield CounterMetricFamily(f"kafka_server_clientmetrics_{key}", doc, value=telemetry.counts[key])
        families: dict[str, Metric] = {}
        for instance in live:
            identity = {k: instance.attributes.get(k, "") for k in _IDENTITY}
            for metric in instance.pushed:
                self._add(families, metric, identity)
        yield from families.values()

    @staticmethod
    def _add(families: dict[str, Metric], metric, identity: dict[str, str]) -> None:
        if not metric.kind or not metric.name:
            return
        name = prometheus_name(metric.name)
        counter = metric.kind == SUM and metric.monotonic
        kind = "histogram" if metric.kind == HISTOGRAM else "counter" if counter else "gauge"
        if counter and name.endswith("_total"):
            name = name[:-len("_total")]
        family = families.get(name)
        if family is None:
            family = families[name] = Metric(name, metric.description or metric.name, kind)
        elif family.type != kind:
            return
        for point in metric.points:
            labels = {prometheus_name(k): v for k, v in {**metric.resource, **point.attributes}.items()}
            labels.update(identity)
            if metric.kind in (GAUGE, SUM):
                family.add_sample(name + "_total" if counter else name, labels, point.value)
                continue
            cumulative = 0
            for bound, count in zip(point.bounds + [float("inf")], point.buckets):
                cumulative += count
                family.add_sample(name + "_bucket", {**labels, "le": _bound(bound)}, cumulative)
            family.add_sample(name + "_count", labels, point.count)
            family.add_sample(name + "_sum", labels, point.total)


def _bound(value: float) -> str:
    return "+Inf" if value == float("inf") else repr(value)
