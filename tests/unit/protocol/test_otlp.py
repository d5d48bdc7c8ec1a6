"""The OTLP reader against messages OpenTelemetry's own protobuf classes encode, and against bad bytes."""

import pytest
from hypothesis import given, settings, strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from kbroker.protocol.otlp import GAUGE, HISTOGRAM, SUM, OtlpError, metrics_data


def attrs(**kv):
    out = []
    for k, v in kv.items():
        value = AnyValue(int_value=v) if isinstance(v, int) else AnyValue(string_value=v)
        out.append(KeyValue(key=k, value=value))
    return out


def message() -> bytes:
    gauge = pb.Metric(name="org.apache.kafka.producer.node.request.latency.avg", description="latency",
                      gauge=pb.Gauge(data_points=[pb.NumberDataPoint(as_double=1.5, attributes=attrs(node_id="2")),
                                                  pb.NumberDataPoint(as_int=-7, attributes=attrs(node_id=3))]))
    total = pb.Metric(name="org.apache.kafka.producer.connection.creation.total",
                      sum=pb.Sum(data_points=[pb.NumberDataPoint(as_int=4)], is_monotonic=True,
                                 aggregation_temporality=pb.AGGREGATION_TEMPORALITY_CUMULATIVE))
    histogram = pb.Metric(name="h", histogram=pb.Histogram(
        aggregation_temporality=pb.AGGREGATION_TEMPORALITY_DELTA,
        data_points=[pb.HistogramDataPoint(count=6, sum=12.5, bucket_counts=[1, 2, 3], explicit_bounds=[1.0, 5.0])]))
    summary = pb.Metric(name="skipped", summary=pb.Summary(data_points=[pb.SummaryDataPoint(count=1)]))
    data = pb.MetricsData(resource_metrics=[pb.ResourceMetrics(
        resource=Resource(attributes=attrs(**{"client_rack": "r1"})),
        scope_metrics=[pb.ScopeMetrics(metrics=[gauge, total]), pb.ScopeMetrics(metrics=[histogram, summary])])])
    return data.SerializeToString()


def test_gauges_sums_and_histograms_with_their_attributes():
    gauge, total, histogram, summary = metrics_data(message())
    assert (gauge.name, gauge.kind, gauge.description, gauge.resource) == \
        ("org.apache.kafka.producer.node.request.latency.avg", GAUGE, "latency", {"client_rack": "r1"})
    assert [(p.attributes, p.value) for p in gauge.points] == [({"node_id": "2"}, 1.5), ({"node_id": "3"}, -7.0)]
    assert (total.kind, total.monotonic, total.cumulative, total.points[0].value) == (SUM, True, True, 4.0)
    point = histogram.points[0]
    assert (histogram.kind, histogram.cumulative) == (HISTOGRAM, False)
    assert (point.count, point.total, point.buckets, point.bounds) == (6, 12.5, [1, 2, 3], [1.0, 5.0])
    assert (summary.name, summary.kind, summary.points) == ("skipped", "", [])


def test_an_empty_message_has_no_metrics():
    assert metrics_data(b"") == []


@pytest.mark.parametrize("cut", [1, 5, 17, 40])
def test_a_truncated_message_is_refused(cut):
    with pytest.raises(OtlpError):
        metrics_data(message()[:-cut])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_give_metrics_or_otlp_error(data):
    try:
        metrics_data(data)
    except OtlpError:
        pass
