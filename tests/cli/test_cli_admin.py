"""``topics alter``, ``configs``, ``cluster`` and ``delete-records`` against real brokers: a
SASL_SSL listener from the real process, a plain one in-process, and Kafka clients checking
what the commands changed."""

from __future__ import annotations

import json
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.broker_process import BrokerProcess
from tests.cli.conftest import Cli, run_cli
from trio_broker.cli import main


def _one_line_error(err: str) -> str:
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    return err


def _topic_configs(bootstrap: str, topic: str) -> dict[str, tuple[str, bool]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.describe_configs([ConfigResource("topic", topic)]).values()
    return {k: (e.value, e.is_default) for k, e in future.result(10).items()}


def test_topics_alter_adds_partitions_and_changes_configs(kafka_broker, unique_topic, capsys):
    bs = ["--bootstrap-server", kafka_broker.bootstrap_servers]
    topic = kafka_broker.create_topic(unique_topic("alter"), 2, {"retention.ms": "60000"})
    assert main(["topics", "alter", topic, "--partitions", "5", "--config",
                 "segment.bytes=2000000", "--delete-config", "retention.ms", *bs]) == 0
    assert capsys.readouterr().out == (f"Altered topic {topic}: partitions 2 -> 5; "
                                       "set segment.bytes=2000000; deleted retention.ms.\n")
    md = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers}).list_topics(
        topic, timeout=10)
    assert len(md.topics[topic].partitions) == 5
    configs = _topic_configs(kafka_broker.bootstrap_servers, topic)
    assert configs["segment.bytes"] == ("2000000", False)
    assert configs["retention.ms"][1] is True  # back to the default
    # Kafka's rules: partitions only grow; nothing to do is bad input; a bad value is INVALID
    assert main(["topics", "alter", topic, "--partitions", "3", *bs]) == 2
    assert "can only add to them" in _one_line_error(capsys.readouterr().err)
    assert main(["topics", "alter", topic, *bs]) == 2
    assert "nothing to alter" in _one_line_error(capsys.readouterr().err)
    assert main(["topics", "alter", topic, "--config", "retention.ms=soon", *bs]) == 1
    assert "INVALID_CONFIG" in _one_line_error(capsys.readouterr().err)


def test_configs_describe_and_alter_topics_and_brokers(kafka_broker, unique_topic, capsys):
    bs = ["--bootstrap-server", kafka_broker.bootstrap_servers]
    topic = kafka_broker.create_topic(unique_topic("configs"), 1)
    assert main(["configs", "alter", "--entity-type", "topics", "--entity-name", topic,
                 "--add-config", "retention.ms=86400000,cleanup.policy=[compact,delete]",
                 *bs]) == 0
    assert capsys.readouterr().out == f"Completed updating config for topic {topic}.\n"
    assert main(["configs", "describe", "--topic", topic, "-o", "json", *bs]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {(c["name"], c["value"], c["source"]) for c in doc["configs"]} == {
        ("retention.ms", "86400000", "DYNAMIC_TOPIC_CONFIG"),
        ("cleanup.policy", "compact,delete", "DYNAMIC_TOPIC_CONFIG")}
    assert main(["configs", "alter", "--topic", topic, "--delete-config", "cleanup.policy",
                 *bs]) == 0
    capsys.readouterr()
    assert main(["configs", "describe", "--topic", topic, "-o", "plain", *bs]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        f"{topic}  retention.ms  86400000  DYNAMIC_TOPIC_CONFIG"]
    assert main(["configs", "describe", "--topic", topic, "--all", "-o", "json", *bs]) == 0
    everything = {c["name"]: c["source"] for c in json.loads(capsys.readouterr().out)["configs"]}
    assert everything["segment.bytes"] == "DEFAULT_CONFIG"
    assert len(everything) > 20


@pytest.mark.broker_config(num_partitions=1)
def test_configs_on_a_broker_and_the_cluster_default(kafka_broker, capsys):
    bs = ["--bootstrap-server", kafka_broker.bootstrap_servers]
    assert main(["configs", "alter", "--broker", "0", "--add-config",
                 "log.cleaner.threads=2", *bs]) == 0
    assert capsys.readouterr().out == "Completed updating config for broker 0.\n"
    assert main(["configs", "alter", "--entity-type", "brokers", "--entity-default",
                 "--add-config", "log.retention.ms=7200000", *bs]) == 0
    assert capsys.readouterr().out == (
        "Completed updating default config for brokers in the cluster.\n")
    assert main(["configs", "describe", "--entity-type", "brokers", "--entity-name", "0",
                 "-o", "json", *bs]) == 0
    shown = {c["name"]: (c["value"], c["source"])
             for c in json.loads(capsys.readouterr().out)["configs"]}
    # a broker's own settings, as kafka-configs lists them; the defaults it inherits apart
    assert shown == {"log.cleaner.threads": ("2", "DYNAMIC_BROKER_CONFIG")}
    assert main(["configs", "describe", "--broker-defaults", "-o", "plain", *bs]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1:] for line in lines[1:]] == [
        ["log.retention.ms", "7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG"],
        ["min.insync.replicas", "1", "DYNAMIC_DEFAULT_BROKER_CONFIG"]]  # KIP-966's


def test_configs_on_client_metrics_subscriptions(kafka_broker, capsys):
    """kafka-configs --entity-type client-metrics: set, describe, list, delete (the match
    selects no other test's clients)."""
    bs = ["--bootstrap-server", kafka_broker.bootstrap_servers]
    assert main(["configs", "alter", "--entity-type", "client-metrics", "--entity-name", "cli",
                 "--add-config", "metrics=[org.apache.kafka.producer.,org.apache.kafka.consumer.]"
                 ",interval.ms=1000,match=[client_id=cli-only-.*]", *bs]) == 0
    assert capsys.readouterr().out == "Completed updating config for client-metric cli.\n"
    assert main(["configs", "describe", "--entity-type", "client-metrics", "-o", "json",
                 *bs]) == 0
    [doc] = json.loads(capsys.readouterr().out)
    assert (doc["entity_type"], doc["entity_name"]) == ("client-metrics", "cli")
    assert {(c["name"], c["value"], c["source"]) for c in doc["configs"]} == {
        ("metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
         "DYNAMIC_CLIENT_METRICS_CONFIG"),
        ("interval.ms", "1000", "DYNAMIC_CLIENT_METRICS_CONFIG"),
        ("match", "client_id=cli-only-.*", "DYNAMIC_CLIENT_METRICS_CONFIG")}
    assert main(["configs", "alter", "--entity-type", "client-metrics", "--entity-name", "cli",
                 "--add-config", "interval.ms=5", *bs]) == 1
    assert "interval must be between 100 and 3600000" in _one_line_error(capsys.readouterr().err)
    assert main(["configs", "alter", "--entity-type", "client-metrics", "--entity-name", "cli",
                 "--delete-config", "metrics,interval.ms,match", *bs]) == 0
    capsys.readouterr()
    assert main(["configs", "describe", "--entity-type", "client-metrics", "-o", "json",
                 *bs]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize(("argv", "message"), [
    (["describe"], "name one entity"),
    (["describe", "--entity-name", "x"], "need --entity-type"),
    (["describe", "--entity-type", "brokers", "--entity-name", "zero"], "by its id"),
    (["describe", "--entity-type", "topics", "--entity-default"], "applies to --entity-type"),
    (["alter", "--topic", "t"], "nothing to alter"),
    (["alter", "--entity-type", "topics"], "alter needs one entity"),
    (["alter", "--topic", "t", "--add-config", "a=1", "--delete-config", "a"], "both added"),
])
def test_configs_bad_input(kafka_broker, capsys, argv, message):
    assert main(["configs", *argv, "--bootstrap-server", kafka_broker.bootstrap_servers]) == 2
    assert message in _one_line_error(capsys.readouterr().err)


def test_cluster_describe_names_id_controller_brokers_and_versions(kafka_broker, capsys):
    bs = ["--bootstrap-server", kafka_broker.bootstrap_servers]
    assert main(["cluster", "describe", "-o", "json", *bs]) == 0
    doc = json.loads(capsys.readouterr().out)
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    cluster = admin.describe_cluster().result(10)
    assert doc["cluster_id"] == cluster.cluster_id
    assert doc["controller_id"] == cluster.controller.id
    [broker] = doc["brokers"]
    assert f"{broker['host']}:{broker['port']}" == kafka_broker.bootstrap_servers
    versions = {v["api"]: (v["min"], v["max"], v["usable"]) for v in broker["api_versions"]}
    assert versions["DeleteRecords"][:2] == (0, 2)
    assert versions["Produce"][2] == 11  # the version this client sends
    assert main(["cluster", "describe", *bs]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"Cluster id: {cluster.cluster_id}  Controller: 0"
    assert main(["cluster", "api-versions", "-o", "plain", *bs]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == ["API", "KEY", "BROKER-0"]
    assert ["DescribeCluster", "60", "0-2"] in rows


def test_delete_records_moves_the_log_start_and_survives_a_restart(tmp_path, capsys):
    broker = BrokerProcess(tmp_path / "data").start()
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    try:
        assert main(["topics", "create", "purge", "--partitions", "2", *bs]) == 0
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(30):
            producer.produce("purge", value=f"v{i}".encode(), partition=i % 2)
        assert producer.flush(10) == 0
        capsys.readouterr()
        spec = tmp_path / "offsets.json"
        spec.write_text(json.dumps({"partitions": [
            {"topic": "purge", "partition": 0, "offset": 5},
            {"topic": "purge", "partition": 1, "offset": -1}], "version": 1}))
        assert main(["delete-records", "--offset-json-file", str(spec), "-o", "plain", *bs]) == 0
        assert capsys.readouterr().out.splitlines() == [
            "TOPIC  PARTITION  LOW-WATERMARK  ERROR", "purge  0          5              NONE",
            "purge  1          15             NONE"]
        # a reader below the new start is out of range; earliest is the new start
        assert main(["consume", "purge", "--partition", "0", "--offset", "2",
                     "--timeout-ms", "500", *bs]) == 0
        out, err = capsys.readouterr()
        assert "offset 2 of purge-0 is out of range; resetting to 15" in err
        broker.stop()
        broker.start()
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers,
                                             "group.id": "unused"})
        low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition("purge", 0),
                                                   timeout=10)
        consumer.close()
        assert (low, high) == (5, 15)
        assert main(["delete-records", "--topic", "purge", "--partition", "0", "--offset", "99",
                     *bs]) == 1
        out, err = capsys.readouterr()
        assert "purge-0 below offset 99: OFFSET_OUT_OF_RANGE" in _one_line_error(err)
        assert "OFFSET_OUT_OF_RANGE" in out  # the table still shows every partition
    finally:
        broker.kill()


def test_delete_records_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"partitions": [{"topic": "t"}]}')
    for argv, message in ((["--topic", "t"], "--topic, --partition and --offset"),
                          (["--offset-json-file", str(bad)], "partitions[0] needs"),
                          (["--offset-json-file", str(tmp_path / "none.json")], "none.json"),
                          (["--topic", "t", "--partition", "0", "--offset", "-5"], "bad --offset")):
        assert main(["delete-records", *argv, "--bootstrap-server", "127.0.0.1:1"]) == 2
        assert message in _one_line_error(capsys.readouterr().err)


def test_admin_commands_over_sasl_ssl(sasl_ssl_broker, secure_cli: Cli, unique_topic):
    topic = unique_topic("secure-admin")
    assert secure_cli("topics", "create", topic, "--partitions", "1").returncode == 0
    done = secure_cli("topics", "alter", topic, "--partitions", "2", "--config",
                      "retention.ms=120000")
    assert (done.returncode, done.stderr) == (0, "")
    done = secure_cli("configs", "alter", "--topic", topic, "--add-config", "segment.ms=600000")
    assert done.stdout == f"Completed updating config for topic {topic}.\n"
    shown = json.loads(secure_cli("configs", "describe", "--topic", topic, "-o", "json").stdout)
    assert {c["name"] for c in shown["configs"]} == {"retention.ms", "segment.ms"}
    produced = secure_cli("produce", topic, "--partition", "1", stdin="a\nb\nc\n")
    assert produced.stderr == f"Produced 3 record(s) to {topic}.\n"
    done = secure_cli("delete-records", "--topic", topic, "--partition", "1", "--offset", "2",
                      "-o", "json")
    assert json.loads(done.stdout) == [{"topic": topic, "partition": 1, "low_watermark": 2,
                                        "error": "NONE"}]
    described = json.loads(secure_cli("topics", "describe", topic, "-o", "json").stdout)
    assert [(p["log_start_offset"], p["log_end_offset"]) for p in
            described[0]["partitions"]] == [(0, 0), (2, 3)]
    cluster = json.loads(secure_cli("cluster", "describe", "-o", "json").stdout)
    assert cluster["brokers"][0]["port"] == sasl_ssl_broker.broker.port
    assert secure_cli("topics", "delete", topic).returncode == 0


def test_a_tool_pointed_at_the_metrics_port_says_it_is_http(tmp_path):
    broker = BrokerProcess(tmp_path / "data", "metrics.listener=http://127.0.0.1:0").start()
    try:
        line = broker.wait_for_line("metrics on")
        address = line.rsplit("http://", 1)[1].split("/")[0]
        done = run_cli("topics", "list", "--bootstrap-server", address)
    finally:
        broker.kill()
    assert done.returncode == 1
    assert done.stderr == (f"trio-broker topics: error: no broker reachable at {address}: the "
                           f"broker at {address} answered in HTTP, not the Kafka protocol: is "
                           "this a web or metrics port rather than a Kafka listener?\n")


def test_serve_names_the_key_of_a_busy_port_and_a_bad_log_dir(tmp_path, free_port):
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", free_port))
        held.listen()
        done = run_cli("serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port}",
                       "--override", f"log.dirs={tmp_path / 'data'}")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"trio-broker serve: error: cannot start: listeners=PLAINTEXT://127.0.0.1:{free_port} "
        "(--override): Address already in use")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = run_cli("serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                   env={"TRIO_BROKER_LOG_DIRS": str(blocker / "data")})
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"trio-broker serve: error: cannot start: log.dirs={blocker / 'data'} "
        "(environment TRIO_BROKER_LOG_DIRS): Not a directory")
    started = time.monotonic()
    done = run_cli("serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                   env={"TRIO_BROKER_NUM_PARTITIONS": "many"})
    assert time.monotonic() - started < 30
    assert done.returncode == 2
    assert "environment TRIO_BROKER_NUM_PARTITIONS" in done.stderr
    assert "num.partitions" in done.stderr


@pytest.mark.parametrize("brokers", [[], ["--brokers", "2"]])
@pytest.mark.parametrize(("key", "expected"), [
    ("control.listener", "http://host:port"), ("metrics.listener", "http://host:port"),
    ("http.listener", "http://host:port or https://host:port")])
def test_serve_refuses_a_bad_http_listener_in_one_line(tmp_path, brokers, key, expected):
    done = run_cli("serve", *brokers, "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                   "--override", f"log.dirs={tmp_path / 'data'}",
                   "--override", f"{key}=ftp://127.0.0.1:1")
    assert (done.returncode, done.stderr) == (
        2, f"trio-broker serve: error: --override: {key}='ftp://127.0.0.1:1': "
           f"expected {expected}\n")
    assert not (tmp_path / "data").exists()


def test_serve_says_when_a_set_endpoint_is_not_served(tmp_path):
    # start() returns once the broker listens, and the warning comes before it listens
    broker = BrokerProcess(tmp_path / "data", "control.listener=http://127.0.0.1:0").start()
    broker.kill()
    assert [x.split(" WARNING ", 1)[1].rstrip() for x in broker.output if " WARNING " in x] == [
        "trio_broker: control.listener=http://127.0.0.1:0 is not served: only a test cluster "
        "(serve --brokers N) has it"]
