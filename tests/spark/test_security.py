"""The source on a SASL_SSL listener: ``kafka.*`` settings reach the driver's planning and the
executors' reads (``plan_batch`` and ``read_range`` are what Spark calls; no session needed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security_files import TlsFiles, password
from trio_broker.client.blocking import BlockingClient, TopicPartition
from trio_broker.protocol.records import build_batch
from trio_broker.spark._options import SourceOptionError, parse_options
from trio_broker.spark.source import _ReadSettings, plan_batch, read_range
from trio_broker.testing import ThreadedBroker

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def sasl_ssl_broker(tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles,
                    users_file: Path) -> Iterator[ThreadedBroker]:
    broker = ThreadedBroker(listeners="SASL_SSL://127.0.0.1:0",
                            log_dirs=str(tmp_path_factory.mktemp("spark-sasl-ssl")),
                            ssl_certfile=str(tls_files.server_pem),
                            sasl_credentials_file=str(users_file),
                            sasl_enabled_mechanisms="SCRAM-SHA-512",
                            connection_failed_authentication_delay_ms=0,
                            shutdown_timeout_ms=1000).start()
    yield broker
    broker.stop()


def test_the_source_reads_a_sasl_ssl_listener(sasl_ssl_broker, tls_files, unique_topic):
    topic = sasl_ssl_broker.create_topic(unique_topic("secure"), 2)
    security = {"kafka.ssl.ca.location": str(tls_files.ca_pem),
                "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.username": "bob",
                "kafka.sasl.password": password("bob")}
    client_config = {key.removeprefix("kafka."): value for key, value in security.items()}
    with BlockingClient("SASL_SSL://" + sasl_ssl_broker.bootstrap_servers,
                        config=client_config) as client:
        for p in range(2):
            tp = TopicPartition(topic, p)
            batch = build_batch([(None, f"{p}-{i}".encode()) for i in range(50)])
            assert client.produce({tp: batch}, acks=-1)[tp].error == 0

    opts = parse_options({"kafka.bootstrap.servers": sasl_ssl_broker.bootstrap_servers,
                          "kafka.security.protocol": "SASL_SSL", "subscribe": topic,
                          **security}, streaming=False)
    ranges = plan_batch(opts)
    assert sorted((r.partition, r.start, r.end) for r in ranges) == [(0, 0, 50), (1, 0, 50)]
    settings = _ReadSettings.of(opts)
    values = [v for r in ranges for batch in read_range(settings, r)
              for v in batch.column("value").to_pylist()]
    assert sorted(values) == sorted(f"{p}-{i}".encode() for p in range(2) for i in range(50))


def test_missing_credentials_fail_at_parse_time(sasl_ssl_broker):
    with pytest.raises(SourceOptionError, match=r"needs sasl\.username and sasl\.password"):
        parse_options({"kafka.bootstrap.servers": "SASL_SSL://" + sasl_ssl_broker
                       .bootstrap_servers, "subscribe": "t",
                       "kafka.sasl.mechanism": "PLAIN"}, streaming=False)
    with pytest.raises(SourceOptionError, match=r"bad bootstrap server 'nohost'.*"
                                                r"kafka\.bootstrap\.servers"):
        parse_options({"kafka.bootstrap.servers": "nohost", "subscribe": "t"},
                      streaming=False)


def test_export_takes_client_settings_like_every_client_tool(sasl_ssl_broker, tls_files,
                                                              tmp_path, capsys):
    from trio_broker.cli import main as cli_main

    settings = tmp_path / "client.properties"
    settings.write_text(f"ssl.ca.location={tls_files.ca_pem}\nsasl.mechanism=SCRAM-SHA-512\n"
                        f"sasl.username=bob\nsasl.password={password('bob')}\n")
    args = ["--bootstrap-server", "SASL_SSL://" + sasl_ssl_broker.bootstrap_servers,
            "--topic", "no-such-topic", "--out", str(tmp_path / "out"),
            "--command-config", str(settings)]
    # planning runs before Spark starts: it reaches the listener with the file's settings
    assert cli_main(["export", *args]) == 1
    assert "error: topic 'no-such-topic' does not exist" in capsys.readouterr().err
    assert cli_main(["export", *args, "-X", "sasl.password=wrong"]) == 1
    assert "Authentication failed" in capsys.readouterr().err
    assert cli_main(["export", *args, "-X", "no.such.key=1"]) == 2
    assert "unknown client config 'no.such.key'" in capsys.readouterr().err


def test_the_sink_writes_to_a_sasl_ssl_listener(sasl_ssl_broker, tls_files, unique_topic):
    import pyarrow as pa

    from trio_broker.spark.sink import parse_sink_options, produce_batches

    topic = sasl_ssl_broker.create_topic(unique_topic("secure-sink"), 2)
    security = {"kafka.security.protocol": "SASL_SSL",
                "kafka.ssl.ca.location": str(tls_files.ca_pem),
                "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.username": "bob",
                "kafka.sasl.password": password("bob")}
    settings = parse_sink_options({"kafka.bootstrap.servers": sasl_ssl_broker.bootstrap_servers,
                                   "topic": topic, **security})
    batch = pa.record_batch({"value": pa.array([f"v{i}" for i in range(100)]),
                             "partition": pa.array([i % 2 for i in range(100)], pa.int32())})
    commit = produce_batches(settings, iter([batch]))  # what a write task runs
    assert commit.records == 100
    assert commit.ranges == {(topic, 0): [0, 49, 50], (topic, 1): [0, 49, 50]}
    opts = parse_options({"kafka.bootstrap.servers": sasl_ssl_broker.bootstrap_servers,
                          "subscribe": topic, **security}, streaming=False)
    values = [v for r in plan_batch(opts) for b in read_range(_ReadSettings.of(opts), r)
              for v in b.column("value").to_pylist()]
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(100))
