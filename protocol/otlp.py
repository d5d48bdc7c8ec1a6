"""OTLP metrics as clients push them (KIP-714's PushTelemetry carries an OpenTelemetry ``MetricsData``
message): a reader of the protobuf wire format for the parts a metrics receiver needs, and nothing else.

What is read: each resource's attributes, each metric's name, description and data, and for every data
point its attributes and value: gauges and sums (``NumberDataPoint``, as double or int), histograms
(``HistogramDataPoint``: count, sum, bucket counts and bounds). Exponential histograms, summaries and
exemplars are skipped, as are fields this reader does not know (the protobuf rule).

Invariant: bad input (a truncated field, a wrong wire type, a length past the end) raises ``OtlpError``
and nothing else; the reader never reads past the buffer it was given.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from construct import StreamError

from kbroker.protocol.codegen import read_uvarint

_DOUBLE = struct.Struct("<d")
_FIXED64 = struct.Struct("<Q")
_SFIXED64 = struct.Struct("<q")
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
GAUGE, SUM, HISTOGRAM = "gauge", "sum", "histogram"


class OtlpError(ValueError):
    """The bytes are not an OTLP MetricsData message."""


@dataclass
class Point:
    """One data point: ``value`` for gauges and sums; ``count``, ``total``, ``buckets`` (per-bucket counts)
    and ``bounds`` (their upper bounds, one fewer) for histograms."""
    attributes: dict[str, str]
    value: float = 0.0
    count: int = 0
    total: float = 0.0
    buckets: list[int] = field(default_factory=list)
    bounds: list[float] = field(default_factory=list)


@dataclass
class Metric:
    name: str
    description: str = ""
    kind: str = ""                # GAUGE, SUM or HISTOGRAM; "" for a kind this reader skips
    monotonic: bool = False
    cumulative: bool = True       # AggregationTemporality 2 (sums, histograms)
    resource: dict[str, str] = field(default_factory=dict)
    points: list[Point] = field(default_factory=list)


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    try:
        return read_uvarint(data, pos, len(data))
    except StreamError as exc:
        raise OtlpError(str(exc)) from None


def _fields(data: memoryview):
    """(field number, wire type, value) of each field: an int for varints and fixed widths, a memoryview for
    length-delimited ones."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            value, pos = _varint(data, pos)
        elif wire == FIXED64:
            if pos + 8 > len(data):
                raise OtlpError("truncated fixed64")
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == LENGTH:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise OtlpError("a length past the end of the message")
            value, pos = data[pos:pos + size], pos + size
        elif wire == FIXED32:
            if pos + 4 > len(data):
                raise OtlpError("truncated fixed32")
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise OtlpError(f"wire type {wire} is not one protobuf 3 writes")
        yield number, wire, value


def _text(value) -> str:
    if not isinstance(value, memoryview):
        raise OtlpError("a string field with a numeric wire type")
    return bytes(value).decode("utf-8", "replace")


def _any_value(data: memoryview) -> str:
    for number, wire, value in _fields(data):
        if number == 1 and wire == LENGTH:
            return _text(value)
        if number == 2 and wire == VARINT:
            return "true" if value else "false"
        if number == 3 and wire == VARINT:
            return str(value - (1 << 64) if value >= 1 << 63 else value)
        if number == 4 and wire == FIXED64:
            return repr(_DOUBLE.unpack(value)[0])
    return ""


def _attributes(pairs: list[memoryview]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, val = "", ""
        for number, wire, value in _fields(pair):
            if number == 1 and wire == LENGTH:
                key = _text(value)
            elif number == 2 and wire == LENGTH:
                val = _any_value(value)
        if key:
            out[key] = val
    return out


def _number_point(data: memoryview) -> Point:
    point, pairs = Point({}), []
    for number, wire, value in _fields(data):
        if number == 7 and wire == LENGTH:
            pairs.append(value)
        elif number == 4 and wire == FIXED64:
            point.value = _DOUBLE.unpack(value)[0]
        elif number == 6 and wire == FIXED64:
            point.value = float(_SFIXED64.unpack(value)[0])
    point.attributes = _attributes(pairs)
    return point


def _packed(value, wire: int, unpack) -> list:
    if wire == FIXED64:   # (one element, not packed)
        return [unpack(value)[0]]
    return [unpack(value[i:i + 8])[0] for i in range(0, len(value) - len(value) % 8, 8)]


def _histogram_point(data: memoryview) -> Point:
    point, pairs = Point({}), []
    for number, wire, value in _fields(data):
        if number == 9 and wire == LENGTH:
            pairs.append(value)
        elif number == 4 and wire == FIXED64:
            point.count = _FIXED64.unpack(value)[0]
        elif number == 5 and wire == FIXED64:
            point.total = _DOUBLE.unpack(value)[0]
        elif number == 6 and wire in (LENGTH, FIXED64):
            point.buckets += _packed(value, wire, _FIXED64.unpack)
        elif number == 7 and wire in (LENGTH, FIXED64):
            point.bounds += _packed(value, wire, _DOUBLE.unpack)
    point.attributes = _attributes(pairs)
    return point


def _data(metric: Metric, kind: str, data: memoryview) -> None:
    metric.kind = kind
    reader = _histogram_point if kind == HISTOGRAM else _number_point
    for number, wire, value in _fields(data):
        if number == 1 and wire == LENGTH:
            metric.points.append(reader(value))
        elif number == 2 and wire == VARINT:
            metric.cumulative = value == 2
        elif number == 3 and wire == VARINT:
            metric.monotonic = bool(value)


def _metric(data: memoryview, resource: dict[str, str]) -> Metric:
    metric = Metric("", resource=resource)
    for number, wire, value in _fields(data):
        if number == 1 and wire == LENGTH:
            metric.name = _text(value)
        elif number == 2 and wire == LENGTH:
            metric.description = _text(value)
        elif number == 5 and wire == LENGTH:
            _data(metric, GAUGE, value)
        elif number == 7 and wire == LENGTH:
            _data(metric, SUM, value)
        elif number == 9 and wire == LENGTH:
            _data(metric, HISTOGRAM, value)
    return metric


def metrics_data(payload: bytes) -> list[Metric]:
    """Every metric of a ``MetricsData`` message, with its resource's attributes."""
    out = []
    for number, wire, resource_metrics in _fields(memoryview(payload)):
        if number != 1 or wire != LENGTH:
            continue
        resource, scopes = {}, []
        for n, w, value in _fields(resource_metrics):
            if n == 1 and w == LENGTH:
                resource = _attributes([v for nn, ww, v in _fields(value) if nn == 1 and ww == LENGTH])
            elif n == 2 and w == LENGTH:
                scopes.append(value)
        for scope in scopes:
            out += [_metric(value, resource) for n, w, value in _fields(scope) if n == 2 and w == LENGTH]
    return out
