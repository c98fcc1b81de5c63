"""``trio-broker topics``: create, list, describe, delete through the Kafka protocol."""

from __future__ import annotations

import socket

import pytest

from trio_broker.cli import main


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_line_error(err: str) -> str:
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    return err


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")


def test_create_list_describe_delete(kafka_broker, unique_topic, capsys):
    bs = ["--bootstrap-server", kafka_broker.bootstrap_servers]
    topic = unique_topic("cli")
    assert main(["topics", "create", topic, "--partitions", "3", "--config", "retention.ms=60000",
                 "--config", "cleanup.policy=delete", *bs]) == 0
    assert capsys.readouterr().out == f"Created topic {topic}.\n"
    assert kafka_broker.call(lambda: kafka_broker.broker.state.logs.topics()[topic]) == 3

    assert main(["topics", "list", *bs]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if topic in line)
    assert row.split("│")[2].strip() == "3"  # partitions column

    assert main(["topics", "describe", topic, *bs]) == 0
    out = capsys.readouterr().out
    assert f"Topic: {topic}  PartitionCount: 3  ReplicationFactor: 1" in out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if "│" in line}
    assert "DYNAMIC_TOPIC_CONFIG" in rows["retention.ms"]
    assert "60000" in rows["retention.ms"]
    assert "DEFAULT_CONFIG" in rows["segment.bytes"]
    assert {p for p in ("0", "1", "2") if p in rows} == {"0", "1", "2"}

    assert main(["topics", "delete", topic, *bs]) == 0
    assert capsys.readouterr().out == f"Deleted topic {topic}.\n"
    assert topic not in kafka_broker.call(kafka_broker.broker.state.logs.topics)


def test_describe_shows_offsets(kafka_broker, unique_topic, capsys):
    import confluent_kafka

    topic = kafka_broker.create_topic(unique_topic("cli"), 2)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for i in range(7):
        producer.produce(topic, value=b"v", partition=1 if i < 5 else 0)
    assert producer.flush(10) == 0
    assert main(["topics", "describe", topic, "--bootstrap-server",
                 kafka_broker.bootstrap_servers]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.count("│") == 7]
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in lines]
    assert cells == [["0", "0", "0", "0", "0", "2"], ["1", "0", "0", "0", "0", "5"]]


def test_create_twice_and_if_not_exists(kafka_broker, unique_topic, capsys):
    bs = ["--bootstrap-server", kafka_broker.bootstrap_servers]
    topic = unique_topic("cli")
    assert main(["topics", "create", topic, *bs]) == 0
    capsys.readouterr()
    assert main(["topics", "create", topic, *bs]) == 1
    err = _one_line_error(capsys.readouterr().err)
    assert "TOPIC_ALREADY_EXISTS" in err
    assert main(["topics", "create", topic, "--if-not-exists", *bs]) == 0


@pytest.mark.parametrize(("config", "code", "message"), [
    ("retention.ms", 2, "expected KEY=VALUE"),
    ("=5", 2, "expected KEY=VALUE"),
    ("no.such.config=1", 1, "INVALID_CONFIG"),
    ("retention.ms=soon", 1, "INVALID_CONFIG"),
])
def test_bad_config(kafka_broker, unique_topic, capsys, config, code, message):
    topic = unique_topic("cli")
    assert main(["topics", "create", topic, "--config", config, "--bootstrap-server",
                 kafka_broker.bootstrap_servers]) == code
    err = _one_line_error(capsys.readouterr().err)
    assert message in err
    assert topic not in kafka_broker.call(kafka_broker.broker.state.logs.topics)


def test_replication_factor_two_is_refused(kafka_broker, unique_topic, capsys):
    assert main(["topics", "create", unique_topic("cli"), "--replication-factor", "2",
                 "--bootstrap-server", kafka_broker.bootstrap_servers]) == 1
    assert "INVALID_REPLICATION_FACTOR" in _one_line_error(capsys.readouterr().err)


def test_unknown_topic(kafka_broker, unique_topic, capsys):
    bs = ["--bootstrap-server", kafka_broker.bootstrap_servers]
    topic = unique_topic("missing")
    assert main(["topics", "describe", topic, *bs]) == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in _one_line_error(capsys.readouterr().err)
    assert main(["topics", "delete", topic, *bs]) == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in _one_line_error(capsys.readouterr().err)
    assert main(["topics", "delete", topic, "--if-exists", *bs]) == 0


@pytest.mark.parametrize("action", [["list"], ["describe", "t"], ["create", "t"],
                                    ["delete", "t"]])
def test_unreachable_broker(capsys, action):
    port = _closed_port()
    assert main(["topics", *action, "--bootstrap-server", f"127.0.0.1:{port}"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert f"cannot connect to the broker at 127.0.0.1:{port}" in _one_line_error(err)


def test_bad_bootstrap_server(capsys):
    assert main(["topics", "list", "--bootstrap-server", "localhost"]) == 2
    assert "expected HOST:PORT" in _one_line_error(capsys.readouterr().err)


def test_describe_shows_the_dirty_ratio_of_a_compacted_topic(kafka_broker, unique_topic,
                                                             capsys):
    """All inactive segments dirty: 1.0; compacted: 0.0; a few new segments: in between. The
    cleaner itself never runs (a ratio must exceed min.cleanable.dirty.ratio=1 to be due)."""
    import json

    import confluent_kafka

    bs = ["--bootstrap-server", kafka_broker.bootstrap_servers]
    topic = kafka_broker.create_topic(unique_topic("cli"), 1, {
        "cleanup.policy": "compact", "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "1"})
    plain = kafka_broker.create_topic(unique_topic("cli"), 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                                         "linger.ms": 0})

    def produce(n: int) -> None:
        for i in range(n):
            producer.produce(topic, key=f"k{i % 5}", value=b"v" * 100)
            producer.flush(10)  # one batch each: segments roll every few records

    def ratios() -> list[float | None]:
        assert main(["topics", "describe", topic, "-o", "json", *bs]) == 0
        [doc] = json.loads(capsys.readouterr().out)
        assert doc["compacted"] is True
        return [p["dirty_ratio"] for p in doc["partitions"]]

    produce(60)
    assert ratios() == [1.0]
    # Kafka's clients skip the tagged field: kafka-python (DescribeLogDirs v5) reads the rest
    import kafka.admin

    admin = kafka.admin.KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        [described] = admin.describe_log_dirs()
    finally:
        admin.close()
    [part] = [p for d in described["log_dirs"] for t in d["topics"] if t["name"] == topic
              for p in t["partitions"]]
    assert part["partition_size"] > 6000
    kafka_broker.compact(topic)
    assert ratios() == [0.0]
    produce(30)
    [ratio] = ratios()
    assert ratio is not None
    assert 0 < ratio < 1

    assert main(["topics", "describe", topic, *bs]) == 0
    out = capsys.readouterr().out
    assert "dirty ratio" in out
    assert f"{ratio:.3f}" in out
    assert main(["topics", "describe", plain, "-o", "json", *bs]) == 0
    [doc] = json.loads(capsys.readouterr().out)
    assert (doc["compacted"], doc["partitions"][0]["dirty_ratio"]) == (False, None)
    assert main(["topics", "describe", plain, *bs]) == 0
    assert "dirty ratio" not in capsys.readouterr().out
