"""``trio-broker produce|consume|dump-log`` against the broker, librdkafka's mock cluster and
real clients."""

from __future__ import annotations

import io
import socket
import sys
import time
from pathlib import Path

import confluent_kafka
import pytest

from tests.stamps import BASE_MS
from trio_broker.cli import main


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_line_error(err: str) -> str:
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    return err


def _stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
        "fetch.queue.backoff.ms": 1})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(partitions)])
    got: list = []
    deadline = time.monotonic() + 20
    while len(got) < expected and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=1000, timeout=0.5):
            assert m.error() is None, m.error()
            got.append(m)
    consumer.close()
    return got


def test_produce_keyed_lines_land_where_java_clients_put_them(kafka_broker, unique_topic,
                                                               capsys, monkeypatch):
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("produce"), 3)
    lines = [f"key-{i}:value {i}" for i in range(300)]
    _stdin(monkeypatch, "\n".join(lines) + "\n")
    assert main(["produce", topic, "--key-separator", ":", "--compression", "lz4",
                 "--bootstrap-server", bootstrap]) == 0
    assert "Produced 300 record(s)" in capsys.readouterr().err
    got = _consume_all(bootstrap, topic, 3, 300)
    assert sorted((m.key(), m.value()) for m in got) == sorted(
        (f"key-{i}".encode(), f"value {i}".encode()) for i in range(300))
    # librdkafka's murmur2_random partitioner is the Java client's: the same keys, same partitions
    reference = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                          "partitioner": "murmur2_random"})
    placed: dict[bytes, int] = {}
    for i in range(300):
        reference.produce(topic, key=f"key-{i}".encode(), value=b"",
                          on_delivery=lambda err, m: placed.__setitem__(m.key(), m.partition()))
    assert reference.flush(10) == 0
    assert {m.key(): m.partition() for m in got} == placed
    # order within each partition is the input order
    for p in range(3):
        keys = [int(m.key()[4:]) for m in sorted(got, key=lambda m: m.offset())
                if m.partition() == p]
        assert keys == sorted(keys)


def test_produce_without_keys_uses_every_partition_and_keeps_blank_lines(
        kafka_broker, unique_topic, capsys, monkeypatch):
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("produce"), 2)
    _stdin(monkeypatch, "".join(f"line {i}\n" for i in range(2000)) + "\nlast-without-newline")
    assert main(["produce", topic, "--batch-size", "1000", "--compression", "zstd",
                 "--bootstrap-server", bootstrap]) == 0
    got = _consume_all(bootstrap, topic, 2, 2002)
    assert len(got) == 2002
    assert {m.partition() for m in got} == {0, 1}
    assert sorted(m.value() for m in got) == sorted(
        [f"line {i}".encode() for i in range(2000)] + [b"", b"last-without-newline"])
    assert all(m.key() is None for m in got)


def test_produce_to_one_partition_with_acks_0(kafka_broker, unique_topic, capsys,
                                              monkeypatch):
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("produce"), 3)
    _stdin(monkeypatch, "a\nb\nc\n")
    assert main(["produce", topic, "--partition", "2", "--acks", "0",
                 "--bootstrap-server", bootstrap]) == 0
    got = _consume_all(bootstrap, topic, 3, 3)
    assert [(m.partition(), m.value()) for m in got] == [(2, b"a"), (2, b"b"), (2, b"c")]


def test_produce_errors_are_one_line(kafka_broker, unique_topic, capsys, monkeypatch):
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("produce"), 1,
                                      {"max.message.bytes": "200"})
    _stdin(monkeypatch, "k:v\nno separator here\n")
    assert main(["produce", topic, "--key-separator", ":", "--bootstrap-server", bootstrap]) == 1
    err = _one_line_error(capsys.readouterr().err)
    assert "no key separator found on line number 2: 'no separator here'" in err
    assert f"1 record(s) were acknowledged by {topic} before that" in err

    _stdin(monkeypatch, "x" * 500 + "\n")
    assert main(["produce", topic, "--bootstrap-server", bootstrap]) == 1
    assert "MESSAGE_TOO_LARGE" in _one_line_error(capsys.readouterr().err)

    _stdin(monkeypatch, "x\n")
    assert main(["produce", topic, "--partition", "5", "--bootstrap-server", bootstrap]) == 2
    assert "has no partition 5" in _one_line_error(capsys.readouterr().err)

    port = _closed_port()
    _stdin(monkeypatch, "x\n")
    assert main(["produce", topic, "--bootstrap-server", f"127.0.0.1:{port}"]) == 1
    assert "cannot connect" in _one_line_error(capsys.readouterr().err)


@pytest.mark.broker_config(auto_create_topics_enable=False)
def test_produce_to_unknown_topic_without_auto_create(kafka_broker, capsys, monkeypatch):
    _stdin(monkeypatch, "x\n")
    assert main(["produce", "nowhere", "--bootstrap-server",
                 kafka_broker.bootstrap_servers]) == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in _one_line_error(capsys.readouterr().err)


def _produce_with_headers(bootstrap: str, topic: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, key=b"k0", value=b"v0", partition=0, timestamp=BASE_MS,
                     headers=[("h", b"1"), ("n", None)])
    producer.produce(topic, key=None, value=None, partition=0, timestamp=BASE_MS + 1)
    producer.produce(topic, key=b"k2", value=b"v2", partition=1, timestamp=BASE_MS + 2)
    assert producer.flush(10) == 0


def test_consume_prints_what_was_asked(kafka_broker, unique_topic, capsys):
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("consume"), 2)
    _produce_with_headers(bootstrap, topic)
    assert main(["consume", topic, "--from-beginning", "--max-messages", "3",
                 "--property", "print.key=true", "--property", "print.timestamp=true",
                 "--property", "print.partition=true", "--property", "print.offset=true",
                 "--property", "print.headers=true", "--property", "key.separator=|",
                 "--bootstrap-server", bootstrap]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"CreateTime:{BASE_MS}|Partition:0|Offset:0|h:1,n:null|k0|v0",
        f"CreateTime:{BASE_MS + 1}|Partition:0|Offset:1|NO_HEADERS|null|null",
        f"CreateTime:{BASE_MS + 2}|Partition:1|Offset:0|NO_HEADERS|k2|v2",
    ]
    assert err == "Processed a total of 3 messages\n"


def test_consume_partition_offset_and_timeout(kafka_broker, unique_topic, capsys):
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("consume"), 2)
    _produce_with_headers(bootstrap, topic)
    bs = ["--bootstrap-server", bootstrap]
    started = time.monotonic()
    assert main(["consume", topic, "--partition", "0", "--offset", "1", "--timeout-ms", "300",
                 *bs]) == 0
    assert time.monotonic() - started < 5
    out, err = capsys.readouterr()
    assert out == "null\n"
    assert err == "Processed a total of 1 messages\n"
    # the default start is the end of the log: nothing old is printed
    assert main(["consume", topic, "--timeout-ms", "200", *bs]) == 0
    assert capsys.readouterr() == ("", "Processed a total of 0 messages\n")


def test_consume_waits_for_new_records(kafka_broker, unique_topic, capsys):
    import threading

    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("consume"), 1)

    def produce_later() -> None:
        time.sleep(0.3)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
        producer.produce(topic, value=b"late")
        producer.flush(10)

    thread = threading.Thread(target=produce_later)
    thread.start()
    assert main(["consume", topic, "--max-messages", "1", "--timeout-ms", "10000",
                 "--bootstrap-server", bootstrap]) == 0
    thread.join()
    assert capsys.readouterr().out == "late\n"


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["--offset", "3"], 2, "--offset needs --partition"),
    (["--partition", "0", "--offset", "soon"], 2, "bad --offset"),
    (["--partition", "7"], 2, "has no partition 7"),
    (["--property", "print.colour=true"], 2, "bad --property"),
    (["--property", "print.key=maybe"], 2, "expected true or false"),
])
def test_consume_usage_errors(kafka_broker, unique_topic, capsys, argv, code, message):
    topic = kafka_broker.create_topic(unique_topic("consume"), 1)
    assert main(["consume", topic, "--timeout-ms", "100", *argv, "--bootstrap-server",
                 kafka_broker.bootstrap_servers]) == code
    assert message in _one_line_error(capsys.readouterr().err)


def test_consume_unknown_topic_and_unreachable_broker(kafka_broker, unique_topic, capsys):
    assert main(["consume", unique_topic("missing"), "--timeout-ms", "100",
                 "--bootstrap-server", kafka_broker.bootstrap_servers]) == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in _one_line_error(capsys.readouterr().err)
    port = _closed_port()
    assert main(["consume", "t", "--bootstrap-server", f"127.0.0.1:{port}"]) == 1
    assert "cannot connect" in _one_line_error(capsys.readouterr().err)


@pytest.mark.broker_config(num_partitions=1)
def test_dump_log(kafka_broker, unique_topic, capsys, monkeypatch):
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("dump"), 1)
    _stdin(monkeypatch, "alpha:one\nbeta:two\n")
    assert main(["produce", topic, "--key-separator", ":", "--compression", "gzip",
                 "--bootstrap-server", bootstrap]) == 0
    capsys.readouterr()
    log_dir = Path(kafka_broker.broker.config.log_dir_list[0])
    segment = log_dir / f"{topic}-0" / "00000000000000000000.log"
    assert main(["dump-log", str(segment)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"Dumping {segment}"
    batch = out[2]
    assert "baseOffset: 0 lastOffset: 1 count: 2" in batch
    assert "compresscodec: gzip" in batch
    assert "isvalid: true" in batch
    assert main(["dump-log", str(segment), "--print-data-log"]) == 0
    records = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert len(records) == 2
    assert "key: alpha payload: one" in records[0]
    assert "key: beta payload: two" in records[1]
    index = segment.with_suffix(".index")
    assert main(["dump-log", str(index)]) == 0
    assert capsys.readouterr().out.startswith(f"Dumping {index}")


def test_dump_log_bad_files(tmp_path, capsys):
    assert main(["dump-log", str(tmp_path / "missing.log")]) == 1
    assert "no such file" in _one_line_error(capsys.readouterr().err)
    other = tmp_path / "notes.txt"
    other.write_text("x")
    assert main(["dump-log", str(other)]) == 1
    assert "not a .log" in _one_line_error(capsys.readouterr().err)
    garbage = tmp_path / "00000000000000000000.log"
    garbage.write_bytes(b"\x00" * 10 + b"junk" * 30)
    assert main(["dump-log", str(garbage)]) == 0
    assert "invalid bytes at position 0" in capsys.readouterr().out


@pytest.fixture
def mock_cluster():
    """librdkafka's in-process mock cluster (3 brokers): a Kafka broker that is not ours."""
    holder = confluent_kafka.Producer({"test.mock.num.brokers": 3, "bootstrap.servers": "",
                                       "log_level": 0})
    brokers = holder.list_topics(timeout=10).brokers
    yield ",".join(f"{b.host}:{b.port}" for b in brokers.values())
    holder.flush(1)


def _topic_led_by_several_brokers(bootstrap: str) -> str:
    """An auto-created mock topic whose partitions have more than one leader.

    The mock picks each partition's leader at random (all four on one broker about 1 time in
    27), so try a few names rather than depend on the draw.
    """
    probe = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    for i in range(10):
        name = f"mocked-{i}"
        md = probe.list_topics(name, timeout=10).topics[name]
        if len({p.leader for p in md.partitions.values()}) > 1:
            return name
    raise AssertionError("the mock cluster put every partition of 10 topics on one broker")


def test_console_tools_against_a_three_broker_mock_cluster(mock_cluster, capsys, monkeypatch):
    # The mock cluster auto-creates topics (4 partitions, leaders spread over its 3 brokers),
    # so produce and consume must route each partition to its own leader.
    topic = _topic_led_by_several_brokers(mock_cluster)
    lines = [f"k{i},v{i}" for i in range(200)]
    _stdin(monkeypatch, "\n".join(lines) + "\n")
    assert main(["produce", topic, "--key-separator", ",", "--bootstrap-server",
                 mock_cluster]) == 0
    capsys.readouterr()
    assert main(["consume", topic, "--from-beginning", "--max-messages", "200",
                 "--timeout-ms", "10000", "--property", "print.key=true",
                 "--property", "key.separator=,", "--bootstrap-server", mock_cluster]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sorted(out) == sorted(lines)
    assert main(["topics", "describe", topic, "--bootstrap-server", mock_cluster]) == 0
    out = capsys.readouterr().out
    leaders = {line.split("│")[2].strip() for line in out.splitlines() if line.count("│") == 7}
    assert len(leaders) > 1  # really more than one broker was involved
    assert "does not implement DescribeConfigs" in out
    assert main(["topics", "create", "x", "--bootstrap-server", mock_cluster]) == 1
    assert "does not implement CreateTopics" in _one_line_error(capsys.readouterr().err)
