"""Broker metrics under the names Kafka's dashboards know, in Prometheus text format.

Why Kafka's JMX exporter names: Grafana dashboards and alert rules for Kafka are written against
what Prometheus' JMX exporter makes of Kafka's MBeans (``kafka.server:type=BrokerTopicMetrics,
name=BytesInPerSec,topic=T`` -> ``kafka_server_brokertopicmetrics_bytesin_total{topic="T"}``),
so the same names here light those dashboards up. The mapping, series by series, is in
docs/architecture.md; ``docs/ops/`` holds a dashboard and alert rules checked against it.

Why a registry per broker: tests run many brokers in one process; each gets its own
``CollectorRegistry`` so nothing leaks between them. Hot-path counters (per request, per
produce, per fetch) are plain dictionaries and lists read only when scraped; what lives in the
log and the group coordinator (sizes, offsets, lag) is read at scrape time by collectors the
broker adds (``add_collector``).

May import the protocol only (API and error names): every layer of the broker above it records
into it.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import trio

from .idle import IdleMeter, IoWaitInstrument
from .requests import TIMINGS, RequestMetrics, RequestTimes, api_name, error_label
from .stalls import LoopStallMeter
from .values import Families, Family, Value

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import Metric

#: Kafka's BrokerState values (kafka.server:type=KafkaServer,name=BrokerState)
STARTING, RUNNING, SHUTTING_DOWN = 1, 3, 7


class TopicMetrics:
    """Kafka's BrokerTopicMetrics per topic and for all topics: bytes in and out, messages in,
    and the share-group requests."""

    def __init__(self) -> None:
        #: topic -> [bytes in, bytes out, messages in]
        self._topics: dict[str, list[int]] = {}
        #: topic -> [share fetch requests, failed, share acknowledgements, failed]
        self._share: dict[str, list[int]] = {}

    def share_requests(self, kind: int, topics: Iterable[str], failed: Iterable[str]) -> None:
        """Count one share request (``kind``: SHARE_FETCH or SHARE_ACKNOWLEDGEMENT) once for
        each topic it names, and once more as failed for each topic with a failed partition,
        as Kafka's SharePartitionManager marks them."""
        for i, names in ((kind, topics), (kind + 1, failed)):
            for topic in set(names):
                entry = self._share.get(topic)
                if entry is None:
                    entry = self._share[topic] = [0, 0, 0, 0]
                entry[i] += 1

    def bytes_in(self, topic: str, size: int, messages: int) -> None:
        entry = self._topics.get(topic)
        if entry is None:
            entry = self._topics[topic] = [0, 0, 0]
        entry[0] += size
        entry[2] += messages

    def bytes_out(self, topic: str, size: int) -> None:
        entry = self._topics.get(topic)
        if entry is None:
            entry = self._topics[topic] = [0, 0, 0]
        entry[1] += size

    def fetched(self, topics: Iterable[Any], name_of: Callable[[Any], str | None]) -> None:
        """BytesOutPerSec of one Fetch response: the records of each topic response
        (``topic``, or ``topic_id`` resolved by ``name_of`` from v13)."""
        for t in topics:
            size = sum(len(p.records or b"") for p in t.partitions)
            if size:
                name = t.topic or name_of(t.topic_id)
                if name:
                    self.bytes_out(name, size)

    def forget(self, keep: Iterable[str]) -> None:
        """Drop the counters of deleted topics, as Kafka removes their MBeans."""
        kept = set(keep)
        for counters in (self._topics, self._share):
            for topic in [t for t in counters if t not in kept]:
                del counters[topic]

    def totals(self, topic: str) -> tuple[int, int, int]:
        entry = self._topics.get(topic, [0, 0, 0])
        return entry[0], entry[1], entry[2]

    def collect(self) -> Iterator[Metric]:
        yield from _topic_families(_TOPIC_SERIES, self._topics)
        yield from _topic_families(_SHARE_SERIES, self._share)


def _topic_families(series: tuple[tuple[int, str, str], ...],
                    counts: Mapping[str, Sequence[int]]) -> Iterator[Metric]:
    """One counter family per ``series`` entry (index into each topic's counts, name, help),
    all topics' sum unlabelled and each topic's under ``topic``, as the JMX exporter shows
    Kafka's BrokerTopicMetrics."""
    from prometheus_client.core import Metric

    for i, name, doc in series:
        base = f"kafka_server_brokertopicmetrics_{name}"
        family = Metric(base, doc, "counter")
        family.add_sample(f"{base}_total", {}, float(sum(v[i] for v in counts.values())))
        for topic, values in sorted(counts.items()):
            family.add_sample(f"{base}_total", {"topic": topic}, float(values[i]))
        yield family


_TOPIC_SERIES = ((0, "bytesin", "Bytes appended (BytesInPerSec)."),
                 (1, "bytesout", "Bytes fetched (BytesOutPerSec)."),
                 (2, "messagesin", "Records appended (MessagesInPerSec)."))


#: TopicMetrics.share_requests kinds: the first of each pair of counters (total, failed)
SHARE_FETCH, SHARE_ACKNOWLEDGEMENT = 0, 2
_SHARE_SERIES = (
    (0, "totalsharefetchrequests", "ShareFetch requests, once per topic "
     "(TotalShareFetchRequestsPerSec)."),
    (1, "failedsharefetchrequests", "ShareFetch requests that failed a partition of the topic "
     "(FailedShareFetchRequestsPerSec)."),
    (2, "totalshareacknowledgementrequests", "Share acknowledgements (ShareAcknowledge, or "
     "ShareFetch carrying them), once per topic (TotalShareAcknowledgementRequestsPerSec)."),
    (3, "failedshareacknowledgementrequests", "Share acknowledgements that failed for a "
     "partition of the topic (FailedShareAcknowledgementRequestsPerSec)."))


class BrokerMetrics:
    """The broker's counters, gauges and request timings."""

    def __init__(self, *, node_id: int = 0) -> None:
        self.node_id = node_id
        self.request_metrics = RequestMetrics()
        self.topics = TopicMetrics()
        f = self.families = Families()
        self.connections = f.gauge("kafka_server_socket_server_metrics_connection_count",
                                   "Open connections (socket-server-metrics connection-count).")
        self.connections_closed = f.counter("kafka_server_connections_closed",
                                            "Connections closed, by reason.", ["reason"])
        self.connections_refused = f.counter("kafka_server_connections_refused",
                                             "Connections refused by a quota.", ["reason"])
        self.bytes_in = f.counter("kafka_server_socket_server_metrics_incoming_byte",
                                  "Bytes received on every listener.")
        #: the event loop's stall detector (run by the broker: ``loop_stalls.run``), waking
        #: less often while no bytes arrive
        self.loop_stalls = LoopStallMeter(activity=self.bytes_in.get)
        self.bytes_out = f.counter("kafka_server_socket_server_metrics_outgoing_byte",
                                   "Bytes sent on every listener.")
        self.sendfile_bytes = f.counter("kafka_server_socket_server_metrics_sendfile_byte",
                                        "Of the bytes sent, fetched records sent straight from "
                                        "segment files with sendfile (zero-copy).")
        self.request_queue_size = f.gauge("kafka_network_requestchannel_requestqueuesize",
                                          "Requests waiting for a handler.")
        self.response_queue_size = f.gauge("kafka_network_requestchannel_responsequeuesize",
                                           "Responses waiting for their processor.")
        #: kafka.server:type=ShareGroupMetrics,name=RecordAcknowledgementsPerSec,ackType=T
        self.share_record_acknowledgements = f.counter(
            "kafka_server_sharegroupmetrics_recordacknowledgements",
            "Share-group records acknowledged, by type (RecordAcknowledgementsPerSec).",
            ["acktype"])
        self.handler_idle = IdleMeter(1)
        self.processor_idle = IdleMeter(1)
        f.gauge("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
                "RequestHandlerAvgIdlePercent: the handlers' share of the last minute spent "
                "waiting for work (0..1).").set_function(self.handler_idle.ratio)
        f.gauge("kafka_network_socketserver_networkprocessoravgidle_percent",
                "NetworkProcessorAvgIdlePercent: the share of the last minute the network "
                "loop waited for I/O (0..1).").set_function(self.processor_idle.ratio)
        #: BrokerState: starting until the broker is up, running, then shutting down
        self.broker_state = STARTING
        f.gauge("kafka_server_kafkaserver_brokerstate",
                "Kafka's BrokerState: 1 starting, 3 running, 7 shutting down.",
                ).set_function(lambda: self.broker_state)
        #: whether the broker serves (``/ready``) and, when it does not, why
        self.readiness: Callable[[], tuple[bool, str]] = lambda: (False, "starting")
        #: scrape-time readers, in the order added: the registry is made from them when first
        #: needed (the first scrape), so a start imports no prometheus-client
        self._collectors: list[Callable[[], Iterable[Metric]]] = [
            self.request_metrics.collect, self.topics.collect, self.loop_stalls.collect,
            self.families.collect]
        self._registry: CollectorRegistry | None = None

    @property
    def registry(self) -> CollectorRegistry:
        """This broker's ``CollectorRegistry`` (one per broker: tests run many in a process),
        made on first use with the process, platform and GC collectors prometheus-client's
        default registry has."""
        if self._registry is None:
            from prometheus_client import (
                GC_COLLECTOR,
                CollectorRegistry,
                PlatformCollector,
                ProcessCollector,
            )

            registry = CollectorRegistry(auto_describe=True)
            for collect in self._collectors:
                registry.register(_collector(collect))
            registry.register(_collector(_BuildInfo().collect))
            ProcessCollector(registry=registry)
            PlatformCollector(registry=registry)
            registry.register(_collector(GC_COLLECTOR.collect))
            self._registry = registry
        return self._registry

    def add_collector(self, collect: Callable[[], Iterable[Metric]]) -> None:
        """Read something at scrape time (log sizes, group lag): ``collect()`` yields families.
        """
        self._collectors.append(collect)
        if self._registry is not None:
            self._registry.register(_collector(collect))

    def count_errors(self, api_key: int, codes: list[int]) -> None:
        self.request_metrics.count_errors(api_key, codes)

    def io_wait_instrument(self) -> IoWaitInstrument:
        """The Trio instrument that measures the network loop's idle time."""
        return IoWaitInstrument(self.processor_idle)

    def expose(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        from prometheus_client.exposition import generate_latest

        return generate_latest(self.registry)


def _collector(collect: Callable[[], Iterable[Metric]]) -> Any:
    """A registry's collector of a function (prometheus-client calls ``collect()``)."""
    from prometheus_client.registry import Collector

    class _Collect(Collector):
        def collect(self) -> Iterable[Metric]:
            return collect()

    return _Collect()


class _BuildInfo:
    """``trio_broker_build_info``: read at the first scrape, as reading the installed version
    (``importlib.metadata``: tens of milliseconds to import) would lengthen every start."""

    _NAME = "trio_broker_build_info"
    _DOC = "The broker's version, as labels (always 1)."
    _LABELS = ("version", "python_version", "trio_version")

    def __init__(self) -> None:
        self._values: list[str] | None = None

    def collect(self) -> Iterable[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        if self._values is None:
            self._values = [_version(), platform.python_version(), trio.__version__]
        family = GaugeMetricFamily(self._NAME, self._DOC, labels=self._LABELS)
        family.add_metric(self._values, 1)
        return [family]


def _version() -> str:
    """The installed package's version (the package's own face is above this layer)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("trio-broker")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "unknown"


__all__ = ["RUNNING", "SHUTTING_DOWN", "STARTING", "TIMINGS", "BrokerMetrics", "Families",
           "Family", "IdleMeter", "IoWaitInstrument", "LoopStallMeter", "RequestMetrics",
           "RequestTimes", "TopicMetrics", "Value", "api_name", "error_label"]
