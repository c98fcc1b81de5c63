"""The metrics a client pushes (KIP-714): a compressed OTLP ``MetricsData`` message, decoded into
points the broker can expose.

Why OTLP's generated classes (``opentelemetry-proto``): the payload is the OpenTelemetry
protobuf that every KIP-714 client writes (librdkafka, the Java client); parsing it with the
project's own generated classes keeps field numbers and oneofs right. They are imported by the
first push, not with the broker.

What is kept of each metric: gauges and sums as one value per data point (their attributes as
labels), histograms as their ``_count`` and ``_sum``. Names become Prometheus names (``.`` and
other characters to ``_``), so ``org.apache.kafka.producer.record.queue.time.avg`` is scraped as
``org_apache_kafka_producer_record_queue_time_avg``.
"""

from __future__ import annotations

import functools
import re
from typing import Any, NamedTuple

from ...protocol.compression import decompress
from ...protocol.errors import CorruptRecordError, UnsupportedCompressionError

GAUGE, COUNTER = "gauge", "counter"
_INVALID_NAME = re.compile(r"[^a-zA-Z0-9_:]")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]")


class InvalidMetrics(ValueError):
    """A payload that does not decompress or is not OTLP metrics (Kafka: INVALID_RECORD)."""


class Point(NamedTuple):
    """One value a client pushed."""

    name: str
    #: (label, value) pairs from the data point's attributes, sorted
    labels: tuple[tuple[str, str], ...]
    kind: str
    value: float
    #: a sum in delta temporality: add it to what the series holds
    delta: bool


# Clients push the same names at every push: each is converted once (bounded, as names are
# the clients' to choose).
@functools.lru_cache(maxsize=4096)
def prometheus_name(name: str) -> str:
    out = _INVALID_NAME.sub("_", name)
    return "_" + out if out[:1].isdigit() else out


@functools.lru_cache(maxsize=1024)
def label_name(name: str) -> str:
    out = _INVALID_LABEL.sub("_", name)
    return "_" + out if out[:1].isdigit() or out.startswith("__") else out


def _text(value: Any) -> str:
    which = value.WhichOneof("value")
    return "" if which is None else str(getattr(value, which))


def _labels(attributes: Any) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((label_name(a.key), _text(a.value)) for a in attributes))


def _number(point: Any) -> float:
    return float(point.as_double if point.WhichOneof("value") == "as_double" else point.as_int)


def decode(compression_type: int, payload: bytes, max_bytes: int) -> list[Point]:
    """The points of a pushed payload; ``max_bytes`` bounds its decompressed size."""
    try:
        raw = decompress(compression_type, payload, max_output=max_bytes)
    except (CorruptRecordError, UnsupportedCompressionError) as exc:
        raise InvalidMetrics(str(exc)) from None
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    data = metrics_pb2.MetricsData()
    try:
        data.ParseFromString(raw)
    except DecodeError as exc:
        raise InvalidMetrics(f"not OTLP metrics: {exc}") from None
    delta_temporality = metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
    points = []
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                name = prometheus_name(metric.name)
                which = metric.WhichOneof("data")
                if which == "gauge":
                    points += [Point(name, _labels(p.attributes), GAUGE, _number(p), False)
                               for p in metric.gauge.data_points]
                elif which == "sum":
                    kind = COUNTER if metric.sum.is_monotonic else GAUGE
                    delta = metric.sum.aggregation_temporality == delta_temporality
                    points += [Point(name, _labels(p.attributes), kind, _number(p), delta)
                               for p in metric.sum.data_points]
                elif which == "histogram":
                    delta = metric.histogram.aggregation_temporality == delta_temporality
                    for p in metric.histogram.data_points:
                        labels = _labels(p.attributes)
                        points.append(Point(name + "_count", labels, COUNTER, float(p.count),
                                            delta))
                        points.append(Point(name + "_sum", labels, COUNTER, p.sum, delta))
    return points
