"""The metrics an operator alerts on, read over HTTP from real brokers: idle ratios, per-topic
counters, partition logs, consumer lag, error names, health endpoints; and the shipped Grafana
dashboard and alert rules name only metrics the broker exports."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from trio_broker.broker.metrics import IdleMeter
from trio_broker.cli import main
from trio_broker.client.blocking import BlockingClient, TopicPartition
from trio_broker.protocol.records import build_batch
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

DOCS = Path(__file__).resolve().parents[2] / "docs" / "ops"


def http_get(address: tuple[str, int], path: str, method: str = "GET") -> tuple[int, str]:
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\n\r\n"
                     .encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


def scrape(broker: ThreadedBroker) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} from ``GET /metrics``."""
    assert broker.broker is not None
    assert broker.broker.metrics_address is not None
    status, text = http_get(broker.broker.metrics_address, "/metrics")
    assert status == 200
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[ThreadedBroker]:
    b = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                          "metrics_listener": "http://127.0.0.1:0", "num_io_threads": 4}).start()
    yield b
    b.stop()


def test_an_idle_broker_is_idle_and_reading_does_not_reset_it(broker):
    time.sleep(2.5)
    for _ in range(3):  # several scrapes in a row see the same idle broker
        samples = scrape(broker)
        handlers = value(samples,
                         "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent")
        network = value(samples, "kafka_network_socketserver_networkprocessoravgidle_percent")
        assert handlers > 0.95
        assert network > 0.9
    assert value(samples, "kafka_server_kafkaserver_brokerstate") == 3


def test_idle_meter_counts_waits_in_progress_over_the_last_minute():
    second = 1_000_000_000
    meter = IdleMeter(2)
    start = meter._created_ns
    meter.begin("a", start)
    meter.begin("b", start)
    assert meter.ratio(start + 10 * second) == pytest.approx(1.0)  # nothing ended yet
    meter.end("b", start + 10 * second)  # b works for 10 s
    assert meter.ratio(start + 20 * second) == pytest.approx(30 / 40)
    assert meter.ratio(start + 20 * second) == pytest.approx(30 / 40)  # reading changes nothing
    meter.begin("b", start + 20 * second)
    # two minutes later the busy 10 s have left the one-minute window
    assert meter.ratio(start + 140 * second) == pytest.approx(1.0)
    meter.end("a", start + 150 * second)
    meter.end("b", start + 150 * second)
    assert meter.ratio(start + 180 * second) == pytest.approx(0.5, abs=0.02)


def _batch(count: int, size: int) -> bytes:
    return build_batch([(None, b"x" * size)] * count)


def test_per_topic_counters_match_what_was_sent_and_fetched(broker):
    with BlockingClient(broker.bootstrap_servers) as client:
        client.create_topic("alpha", 2)
        client.create_topic("beta", 1)
        sent = {"alpha": [0, 0], "beta": [0, 0]}
        for topic, partition, count, size in (("alpha", 0, 5, 100), ("alpha", 1, 7, 30),
                                              ("alpha", 0, 1, 1000), ("beta", 0, 40, 10)):
            batch = _batch(count, size)
            [result] = client.produce({TopicPartition(topic, partition): batch}, acks=-1).values()
            assert result.error == 0
            sent[topic][0] += len(batch)
            sent[topic][1] += count
        fetched = sum(len(client.fetch(TopicPartition("alpha", p), 0, max_bytes=1 << 20).records)
                      for p in (0, 1))
    samples = scrape(broker)
    for topic, (size, count) in sent.items():
        assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) == size
        assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total",
                     topic=topic) == count
    assert value(samples, "kafka_server_brokertopicmetrics_bytesin_total") == sum(
        s for s, _ in sent.values())
    assert value(samples, "kafka_server_brokertopicmetrics_messagesin_total") == 53
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total",
                 topic="alpha") == fetched == sent["alpha"][0]
    assert value(samples, "kafka_server_brokertopicmetrics_bytesout_total", topic="beta") == 0
    # the partition logs: end offsets, start offsets, sizes of the segment files
    assert value(samples, "kafka_log_log_logendoffset", topic="alpha", partition="0") == 6
    assert value(samples, "kafka_log_log_logstartoffset", topic="alpha", partition="0") == 0
    log_dir = Path(broker.broker.config.log_dir_list[0]) / "beta-0"
    assert value(samples, "kafka_log_log_size", topic="beta", partition="0") == sum(
        f.stat().st_size for f in log_dir.glob("*.log"))
    assert value(samples, "kafka_server_replicamanager_partitioncount") == 3
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0


def test_lag_is_what_groups_describe_shows(broker, capsys):
    bootstrap = broker.bootstrap_servers
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    assert main(["topics", "create", "lagging", "--partitions", "3",
                 "--bootstrap-server", bootstrap]) == 0
    for i in range(60):
        producer.produce("lagging", value=b"v", partition=i % 3)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "laggard",
                                         "enable.auto.commit": False})
    consumer.commit(offsets=[confluent_kafka.TopicPartition("lagging", 0, 5),
                             confluent_kafka.TopicPartition("lagging", 1, 20)],
                    asynchronous=False)
    consumer.close()
    capsys.readouterr()
    assert main(["groups", "describe", "laggard", "-o", "json",
                 "--bootstrap-server", bootstrap]) == 0
    [described] = json.loads(capsys.readouterr().out)
    samples = scrape(broker)
    for row in described["offsets"]:
        labels = {"consumergroup": "laggard", "topic": row["topic"],
                  "partition": str(row["partition"])}
        assert value(samples, "kafka_consumergroup_lag", **labels) == row["lag"]
        assert value(samples, "kafka_consumergroup_current_offset",
                     **labels) == row["current_offset"]
    assert value(samples, "kafka_consumergroup_lag_sum", consumergroup="laggard",
                 topic="lagging") == 15 + 0
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") >= 1


def test_errors_are_labelled_by_name_and_requests_by_version(tmp_path):
    b = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                          "metrics_listener": "http://127.0.0.1:0",
                          "auto_create_topics_enable": False}).start()
    try:
        with BlockingClient(b.bootstrap_servers) as client:
            assert client.metadata(["nowhere"]).topics["nowhere"].error == 3
        samples = scrape(b)
    finally:
        b.stop()
    errors = {dict(labels)["error"]: v for (name, labels), v in samples.items()
              if name == "kafka_network_requestmetrics_errors_total"
              and dict(labels)["request"] == "Metadata"}
    assert errors.get("UNKNOWN_TOPIC_OR_PARTITION", 0) >= 1
    assert all(not name.isdigit() for name in errors)
    requests = {dict(labels)["version"]: v for (name, labels), v in samples.items()
                if name == "kafka_network_requestmetrics_requests_total"
                and dict(labels)["request"] == "ApiVersions"}
    assert requests == {"3": 1.0}
    total = value(samples, "kafka_network_requestmetrics_totaltimems_count", request="Metadata")
    assert total >= 1
    assert 0 <= value(samples, "kafka_network_requestmetrics_totaltimems", request="Metadata",
                      quantile="0.99") <= 30000


def test_health_readiness_and_process_metrics(broker):
    address = broker.broker.metrics_address
    assert http_get(address, "/healthz") == (200, "ok\n")
    assert http_get(address, "/ready") == (200, "ready\n")
    assert http_get(address, "/nothing")[0] == 404
    assert http_get(address, "/metrics", method="POST")[0] == 405
    samples = scrape(broker)
    assert value(samples, "process_resident_memory_bytes") > 0
    assert value(samples, "process_open_fds") > 0
    [(_, labels)] = [k for k in samples if k[0] == "trio_broker_build_info"]
    assert dict(labels)["version"] == "0.1.0"


def test_a_kafka_frame_on_the_metrics_port_is_answered_400_at_once(broker):
    """A Kafka client pointed at the metrics port hears HTTP straight away (and can say so),
    rather than after the server's wait for a request's end."""
    frame = (10).to_bytes(4, "big") + bytes(10)  # a length prefix, then a request header
    with socket.create_connection(broker.broker.metrics_address, timeout=10) as sock:
        sock.sendall(frame)
        sock.settimeout(3)  # the wait for an unfinished HTTP request is 5 s
        got = sock.recv(64)
        assert got.startswith(b"HTTP/1.1 400 "), got


def test_ready_is_503_while_the_broker_is_not_serving():
    from trio_broker.broker.metrics import BrokerMetrics
    from trio_broker.broker.network.metrics_http import metrics_response

    metrics = BrokerMetrics()
    answer = metrics_response("/ready", metrics)
    assert answer is not None
    assert (answer.status, answer.body) == (503, b"starting\n")
    metrics.readiness = lambda: (False, "shutting down")
    answer = metrics_response("/ready?verbose=1", metrics)
    assert answer is not None
    assert (answer.status, answer.body) == (503, b"shutting down\n")
    assert metrics_response("/console", metrics) is None  # for another server to route


_NAME = re.compile(r"\b([a-z_][a-z0-9_]*)\s*(?:\{|\[|\)|\s|/|$|>|<|!|=)")
_NOT_METRICS = {"sum", "by", "rate", "max", "and", "on", "or", "instance", "topic", "request",
                "error", "quantile", "consumergroup", "reason", "job", "up", "irate", "avg",
                "without", "bool", "unless", "increase", "ignoring", "group_left"}


def _names_in(expr: str) -> set[str]:
    expr = re.sub(r'"[^"]*"', '""', expr)  # label values are not names
    return {n for n in _NAME.findall(expr + " ") if n not in _NOT_METRICS}


def test_the_dashboard_and_alerts_name_only_exported_metrics(broker):
    # a broker with something of everything: topics, records, a group with commits
    bootstrap = broker.bootstrap_servers
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    producer.produce("shown", value=b"v")
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "shown",
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["shown"])
    deadline = time.monotonic() + 30
    while consumer.poll(0.2) is None:
        assert time.monotonic() < deadline
    consumer.commit(asynchronous=False)
    consumer.close()
    exported = {name for name, _ in scrape(broker)}
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    alerts = [line.split("expr:", 1)[1].strip()
              for line in (DOCS / "prometheus-alerts.yml").read_text().splitlines()
              if line.strip().startswith("expr:")]
    assert len(exprs) >= 15
    assert len(alerts) >= 10
    named = set().union(*(_names_in(e) for e in exprs + alerts))
    assert named, exprs
    missing = sorted(named - exported)
    assert not missing, f"named in docs/ops but not exported: {missing}"
    # the panels cover the standard series
    for name in ("kafka_server_brokertopicmetrics_bytesin_total",
                 "kafka_network_requestmetrics_requests_total", "kafka_log_log_size",
                 "kafka_server_replicamanager_underreplicatedpartitions",
                 "kafka_consumergroup_lag",
                 "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
                 "kafka_network_socketserver_networkprocessoravgidle_percent"):
        assert name in named


def test_request_time_quantiles_cover_the_last_minute_or_two():
    from trio_broker.broker.metrics import RequestMetrics
    from trio_broker.broker.metrics.requests import TIMINGS, WINDOW_NS

    metrics = RequestMetrics()
    start = 10 * WINDOW_NS
    for i in range(100):  # total times 1..100 ms in one window
        metrics.record(0, (0.0,) * 5 + (float(i + 1),), version=9, now_ns=start + i)
    assert TIMINGS[-1] == "TotalTimeMs"
    now = metrics.quantiles(0, "TotalTimeMs", start + WINDOW_NS // 2)
    assert 40 <= now["0.50"] <= 60  # interpolated within the (25, 50] and (50, 100] buckets
    assert 95 <= now["0.99"] <= 100
    later = metrics.quantiles(0, "TotalTimeMs", start + WINDOW_NS + 1)  # the previous window
    assert later == now
    # a fast request in a new window: the slow ones still count until their window is gone
    metrics.record(0, (0.0,) * 6, version=9, now_ns=start + WINDOW_NS + 2)
    assert metrics.quantiles(0, "TotalTimeMs", start + WINDOW_NS + 3)["0.99"] > 90
    gone = metrics.quantiles(0, "TotalTimeMs", start + 2 * WINDOW_NS + 3)
    assert gone["0.99"] <= 0.1  # only the fast one is left
    assert all(v != v for v in metrics.quantiles(0, "TotalTimeMs", start + 5 * WINDOW_NS)
               .values())  # NaN: nothing in the window, as Prometheus summaries report it
    assert metrics.count(0) == 101


def test_buckets_count_every_request_of_an_api_for_the_brokers_life():
    from trio_broker.broker.metrics import RequestMetrics
    from trio_broker.broker.metrics.requests import WINDOW_NS

    metrics = RequestMetrics()
    assert metrics.buckets(0) == [0] * (len(RequestMetrics.BOUNDS_MS) + 1)
    for window, total_ms in enumerate((0.05, 3.0, 3.0, 99_999.0)):  # windows do not reset them
        metrics.record(0, (1.0,) * 5 + (total_ms,), now_ns=window * WINDOW_NS)
    totals = metrics.buckets(0)
    bounds = RequestMetrics.BOUNDS_MS
    assert sum(totals) == 4
    assert totals[0] == 1  # <= 0.1 ms
    assert totals[bounds.index(5.0)] == 2  # (2.5, 5] ms
    assert totals[-1] == 1  # +Inf
    assert metrics.buckets(0, "LocalTimeMs")[bounds.index(1.0)] == 4
    assert metrics.buckets(1) == [0] * (len(bounds) + 1)


def test_the_metrics_endpoint_answers_only_its_own_host_names(broker):
    """DNS rebinding: a page that points its own name at loopback must not read the topic names
    in /metrics, so a Host that is not loopback, the bound host or an allowed name is 421."""
    host, port = broker.broker.metrics_address
    url = f"http://{host}:{port}"
    with httpx.Client(timeout=10) as http:
        refused = http.get(f"{url}/metrics", headers={"Host": f"rebind.evil.example:{port}"})
        assert refused.status_code == 421
        assert "kafka_" not in refused.text
        assert http.get(f"{url}/healthz", headers={"Host": "rebind.evil.example"}
                        ).status_code == 421
        assert http.get(f"{url}/metrics", headers={"Host": ""}).status_code == 421
        for name in (f"{host}:{port}", f"localhost:{port}", "[::1]", "127.0.0.1"):
            assert http.get(f"{url}/metrics", headers={"Host": name}).status_code == 200, name


def test_http_allowed_hosts_names_the_metrics_endpoint_too(tmp_path):
    b = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data"),
                          "metrics_listener": "http://127.0.0.1:0",
                          "http.allowed.hosts": "metrics.internal"}).start()
    try:
        host, port = b.broker.metrics_address
        with httpx.Client(timeout=10) as http:
            assert http.get(f"http://{host}:{port}/metrics",
                            headers={"Host": f"metrics.internal:{port}"}).status_code == 200
            assert http.get(f"http://{host}:{port}/metrics",
                            headers={"Host": "other.internal"}).status_code == 421
    finally:
        b.stop()
