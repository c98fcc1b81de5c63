"""``produce`` with Kafka's console-producer properties and exact counts when it stops early;
``consume`` with a group, kcat's format, JSON lines, a start time, exit-at-end, and across a
broker restart."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
import uuid

import confluent_kafka
import pytest

from tests.broker_process import BrokerProcess
from tests.cli.conftest import Cli
from tests.stamps import BASE_MS, iso
from trio_broker.cli import main
from trio_broker.client.blocking import BlockingClient


def _one_line_error(err: str) -> str:
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    return err


def _stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))


def _read_all(config: dict[str, str], topic: str, partitions: int, expected: int) -> list:
    consumer = confluent_kafka.Consumer({**config, "group.id": "unused",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(partitions)])
    got: list = []
    deadline = time.monotonic() + 20
    while len(got) < expected and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=1000, timeout=0.3):
            assert m.error() is None, m.error()
            got.append(m)
    # nothing beyond what was expected arrives
    got += [m for m in consumer.consume(num_messages=1000, timeout=0.5) if m.error() is None]
    consumer.close()
    return got


def test_produce_parses_keys_and_headers_as_kafkas_console_producer(
        kafka_broker, unique_topic, capsys, monkeypatch):
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("props"), 1)
    _stdin(monkeypatch, "h1:a,h2:b\tk1\tv1\n"
                        "\tk2\tv2\n"
                        "h1:NULL\tNULL\tv3\n"
                        "h3:c\tk4\tNULL\n")
    assert main(["produce", "--topic", topic, "--property", "parse.key=true",
                 "--property", "parse.headers=true", "--property", "null.marker=NULL",
                 "--header", "source=cli", "--bootstrap-server", bootstrap]) == 0
    assert capsys.readouterr().err == f"Produced 4 record(s) to {topic}.\n"
    got = _read_all({"bootstrap.servers": bootstrap}, topic, 1, 4)
    assert [(m.key(), m.value(), m.headers()) for m in got] == [
        (b"k1", b"v1", [("source", b"cli"), ("h1", b"a"), ("h2", b"b")]),
        (b"k2", b"v2", [("source", b"cli")]),
        (None, b"v3", [("source", b"cli"), ("h1", None)]),
        (b"k4", None, [("source", b"cli"), ("h3", b"c")]),
    ]


def test_produce_key_separator_and_ignore_error(kafka_broker, unique_topic, capsys,
                                                 monkeypatch):
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("ignore"), 1)
    _stdin(monkeypatch, "a:1\nno separator\nb:2\n")
    assert main(["produce", topic, "--property", "parse.key=true", "--property",
                 "key.separator=:", "--property", "ignore.error=true",
                 "--bootstrap-server", bootstrap]) == 0
    got = _read_all({"bootstrap.servers": bootstrap}, topic, 1, 3)
    assert [(m.key(), m.value()) for m in got] == [
        (b"a", b"1"), (None, b"no separator"), (b"b", b"2")]
    capsys.readouterr()
    _stdin(monkeypatch, "h1\tv\n")
    assert main(["produce", topic, "--property", "parse.headers=true",
                 "--bootstrap-server", bootstrap]) == 1
    assert "no header key separator found in pair 'h1' on line number 1" in _one_line_error(
        capsys.readouterr().err)


def test_a_bad_line_stops_after_every_line_before_it_was_acknowledged(
        kafka_broker, unique_topic, capsys, monkeypatch):
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("stop"), 3)
    lines = [f"k{i}:v{i}" for i in range(20_000)] + ["line 20001 has none", "k:after"]
    _stdin(monkeypatch, "\n".join(lines) + "\n")
    assert main(["produce", topic, "--key-separator", ":", "--bootstrap-server",
                 bootstrap]) == 1
    err = _one_line_error(capsys.readouterr().err)
    assert "no key separator found on line number 20001: 'line 20001 has none'" in err
    assert f"20000 record(s) were acknowledged by {topic} before that" in err
    assert len(_read_all({"bootstrap.servers": bootstrap}, topic, 3, 20_000)) == 20_000


def test_a_refused_batch_reports_exactly_what_was_stored(kafka_broker, unique_topic, capsys,
                                                         monkeypatch):
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("refused"), 1, {"max.message.bytes": "300"})
    _stdin(monkeypatch, "".join(f"small {i}\n" for i in range(7)) + "x" * 600 + "\nlater\n")
    assert main(["produce", topic, "--batch-size", "1", "--bootstrap-server",
                 bootstrap]) == 1
    err = _one_line_error(capsys.readouterr().err)
    assert "MESSAGE_TOO_LARGE" in err
    assert f"; 7 record(s) were acknowledged by {topic} before that" in err
    assert len(_read_all({"bootstrap.servers": bootstrap}, topic, 1, 7)) == 7


def test_acks_0_says_sent_not_produced(kafka_broker, unique_topic, capsys, monkeypatch):
    topic = kafka_broker.create_topic(unique_topic("acks0"), 1)
    _stdin(monkeypatch, "a\nb\n")
    assert main(["produce", topic, "--request-required-acks", "0", "--bootstrap-server",
                 kafka_broker.bootstrap_servers]) == 0
    assert capsys.readouterr().err == (f"Sent 2 record(s) to {topic} (acks=0: the broker does "
                                       "not say whether it stored them).\n")


@pytest.fixture
def varied_topic(kafka_broker, unique_topic) -> str:
    topic = kafka_broker.create_topic(unique_topic("formats"), 2)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce(topic, key=b"k0", value=b"v0", partition=0, timestamp=BASE_MS,
                     headers=[("h", b"1"), ("n", None)])
    producer.produce(topic, key=None, value=None, partition=0, timestamp=BASE_MS + 1)
    producer.produce(topic, key=b"k2", value=b"\xff\xfe", partition=1,
                     timestamp=BASE_MS + 60_000)
    assert producer.flush(10) == 0
    return topic


def test_consume_with_kcat_format_tokens(kafka_broker, varied_topic, capsysbinary):
    assert main(["consume", "--topic", varied_topic, "--from-beginning", "--exit-at-end",
                 "--format", r"%t|%p|%o|%T|%k(%K)|%s(%S)|%h\n", "--bootstrap-server",
                 kafka_broker.bootstrap_servers]) == 0
    out, err = capsysbinary.readouterr()
    assert sorted(out.split(b"\n")[:-1]) == sorted([
        f"{varied_topic}|0|0|{BASE_MS}|k0(2)|v0(2)|h=1,n=".encode(),
        f"{varied_topic}|0|1|{BASE_MS + 1}|(-1)|(-1)|".encode(),
        f"{varied_topic}|1|0|{BASE_MS + 60000}|k2(2)|".encode() + b"\xff\xfe(2)|"])
    assert err == b"Processed a total of 3 messages\n"


def test_consume_json_lines(kafka_broker, varied_topic, capsys):
    assert main(["consume", varied_topic, "--from-beginning", "--max-messages", "3",
                 "--output", "json", "--bootstrap-server", kafka_broker.bootstrap_servers]) == 0
    docs = sorted((json.loads(line) for line in capsys.readouterr().out.splitlines()),
                  key=lambda d: (d["partition"], d["offset"]))
    assert docs == [
        {"topic": varied_topic, "partition": 0, "offset": 0, "tstype": "create",
         "ts": BASE_MS, "broker": 0, "headers": ["h", "1", "n", None], "key": "k0",
         "payload": "v0"},
        {"topic": varied_topic, "partition": 0, "offset": 1, "tstype": "create",
         "ts": BASE_MS + 1, "broker": 0, "key": None, "payload": None},
        {"topic": varied_topic, "partition": 1, "offset": 0, "tstype": "create",
         "ts": BASE_MS + 60_000, "broker": 0, "key": "k2", "payload": "//4=",
         "payload_encoding": "base64"}]


def test_consume_from_a_timestamp(kafka_broker, varied_topic, capsys):
    bs = ["--bootstrap-server", kafka_broker.bootstrap_servers, "--exit-at-end",
          "--format", "%p:%o"]
    assert main(["consume", varied_topic, "--from-timestamp", f"{BASE_MS + 1}", *bs]) == 0
    assert sorted(capsys.readouterr().out.splitlines()) == ["0:1", "1:0"]
    assert main(["consume", varied_topic, "--from-timestamp", iso(BASE_MS + 40_000),
                 *bs]) == 0
    assert capsys.readouterr().out == "1:0\n"
    assert main(["consume", varied_topic, "--from-timestamp", iso(BASE_MS + 86_400_000), *bs]) == 0
    assert capsys.readouterr() == ("", "Processed a total of 0 messages\n")


@pytest.mark.parametrize(("argv", "message"), [
    (["--group", "g", "--partition", "0"], "--group and --partition/--offset exclude"),
    (["--group", "g", "--from-timestamp", "0"], "--group and --from-timestamp exclude"),
    (["--from-timestamp", "soon"], "bad --from-timestamp"),
    (["--from-timestamp", "0", "--from-beginning"], "excludes --from-beginning"),
    (["--format", "%q"], "unknown token %q"),
    (["--format", "%s", "--output", "json"], "exclude each other"),
])
def test_consume_usage_errors(kafka_broker, varied_topic, capsys, argv, message):
    assert main(["consume", varied_topic, *argv, "--bootstrap-server",
                 kafka_broker.bootstrap_servers]) == 2
    assert message in _one_line_error(capsys.readouterr().err)


def test_consume_with_a_group_commits_and_resumes(kafka_broker, unique_topic, capsys,
                                                  monkeypatch):
    bs = ["--bootstrap-server", kafka_broker.bootstrap_servers]
    topic = kafka_broker.create_topic(unique_topic("group"), 3)
    _stdin(monkeypatch, "".join(f"{i}\n" for i in range(30)))
    assert main(["produce", topic, "--batch-size", "1", *bs]) == 0
    group = f"console-{uuid.uuid4().hex[:8]}"
    assert main(["consume", topic, "--group", group, "--from-beginning", "--max-messages",
                 "12", *bs]) == 0
    first = capsys.readouterr().out.split()
    assert len(first) == 12
    assert main(["groups", "describe", group, "-o", "json", *bs]) == 0
    [doc] = json.loads(capsys.readouterr().out)
    assert doc["state"] == "Empty"  # it left the group
    assert sum(o["current_offset"] for o in doc["offsets"]) == 12
    assert main(["consume", topic, "--group", group, "--exit-at-end", *bs]) == 0
    rest = capsys.readouterr().out.split()
    assert sorted(first + rest, key=int) == [str(i) for i in range(30)]
    assert main(["groups", "describe", group, "-o", "json", *bs]) == 0
    [doc] = json.loads(capsys.readouterr().out)
    assert {o["lag"] for o in doc["offsets"]} == {0}


def test_two_console_members_share_the_partitions(kafka_broker, unique_topic):
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("shared"), 4)
    group = f"shared-{uuid.uuid4().hex[:8]}"
    command = [sys.executable, "-m", "trio_broker", "consume", topic, "--group", group,
               "--format", "%p", "--max-messages", "20", "--timeout-ms", "60000",
               "--bootstrap-server", bootstrap]  # the range assignor: 2 partitions each
    members = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for _ in range(2)]
    with BlockingClient(bootstrap) as client:  # wait until both hold partitions
        deadline = time.monotonic() + 45
        while True:
            described = client.describe_group(group)
            if described.state == "Stable" and len(described.members) == 2 and all(
                    m.assignment for m in described.members):
                break
            assert time.monotonic() < deadline, described
            time.sleep(0.2)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        producer.produce(topic, value=b"x", partition=i % 4)
    assert producer.flush(10) == 0
    outputs = [m.communicate(timeout=60)[0].split() for m in members]
    assert sorted(outputs[0] + outputs[1]) == sorted(str(i % 4) for i in range(40))
    assert all(outputs), outputs
    assert not set(outputs[0]) & set(outputs[1])  # each partition read by one member


def test_consume_reconnects_across_a_broker_restart(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        bootstrap = broker.bootstrap_servers
        producer_config = {"bootstrap.servers": bootstrap}
        producer = confluent_kafka.Producer(producer_config)
        producer.produce("restart", value=b"before-1")
        producer.produce("restart", value=b"before-2")
        assert producer.flush(10) == 0
        consumer = subprocess.Popen(
            [sys.executable, "-m", "trio_broker", "consume", "restart", "--group", "survivor",
             "--from-beginning", "--max-messages", "4", "--bootstrap-server", bootstrap],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert consumer.stdout is not None
        assert consumer.stderr is not None
        # the records before the restart are printed (flushed after each fetch) ...
        shown = [consumer.stdout.readline() for _ in range(2)]
        assert broker.stop() == 0
        # ... and the consumer has lost the broker before it comes back
        said: list[str] = []
        while not said or "reconnecting" not in said[-1]:
            said.append(consumer.stderr.readline())
            assert said[-1], "".join(said)
        broker.start()
        producer = confluent_kafka.Producer(producer_config)
        producer.produce("restart", value=b"after-1")
        producer.produce("restart", value=b"after-2")
        assert producer.flush(10) == 0
        out, err = consumer.communicate(timeout=60)
        out, err = "".join(shown) + out, "".join(said) + err
    finally:
        broker.kill()
    assert consumer.returncode == 0, err
    assert out.split() == ["before-1", "before-2", "after-1", "after-2"]
    assert "reconnecting" in err
    assert "reconnected" in err
    assert err.endswith("Processed a total of 4 messages\n")


def test_consume_gives_up_after_the_reconnect_timeout(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        assert main(["topics", "create", "gone", "--bootstrap-server",
                     broker.bootstrap_servers]) == 0
        consumer = subprocess.Popen(
            [sys.executable, "-m", "trio_broker", "consume", "gone", "--reconnect-timeout-ms",
             "2000", "--bootstrap-server", broker.bootstrap_servers],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        broker.kill()
        started = time.monotonic()
        _, err = consumer.communicate(timeout=60)
    finally:
        broker.kill()
    assert consumer.returncode == 1
    assert time.monotonic() - started < 30
    assert err.splitlines()[-1].startswith("trio-broker consume: error: ")
    assert "gave up reconnecting after 2000 ms" in err


def test_produce_and_consume_a_group_over_sasl_ssl(sasl_ssl_broker, secure_cli: Cli,
                                                   unique_topic):
    topic = sasl_ssl_broker.create_topic(unique_topic("secure-console"), 2)
    done = secure_cli("produce", topic, "--property", "parse.key=true", "--property",
                      "key.separator=:", "--header", "via=sasl", stdin="a:1\nb:2\nc:3\n")
    assert done.stderr == f"Produced 3 record(s) to {topic}.\n"
    group = f"secure-{uuid.uuid4().hex[:8]}"
    done = secure_cli("consume", topic, "--group", group, "--from-beginning", "--exit-at-end",
                      "--format", "%k=%s %h")
    assert sorted(done.stdout.splitlines()) == ["a=1 via=sasl", "b=2 via=sasl", "c=3 via=sasl"]
    assert done.stderr == "Processed a total of 3 messages\n"
    described = json.loads(secure_cli("groups", "describe", group, "-o", "json").stdout)
    assert sum(o["current_offset"] for o in described[0]["offsets"]) == 3
