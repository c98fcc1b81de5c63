"""``trio-broker groups``: errors without a broker, and a live group as the command shows it."""

from __future__ import annotations

import socket
import time
import uuid

import pytest

from trio_broker.cli import main


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("action", [["list"], ["describe", "g"]])
def test_unreachable_broker_is_one_line(capsys, action):
    port = _closed_port()
    code = main(["groups", *action, "--bootstrap-server", f"127.0.0.1:{port}"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert f"cannot connect to the broker at 127.0.0.1:{port}" in err


@pytest.mark.parametrize("servers", ["host:port", "localhost", "::1:9092"])
def test_a_malformed_bootstrap_server_is_bad_input(capsys, servers):
    assert main(["groups", "list", "--bootstrap-server", servers]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert f"bad bootstrap server {servers!r}" in err


def test_list_and_describe_a_live_group(kafka_broker, unique_topic, capsys, monkeypatch):
    import confluent_kafka

    monkeypatch.setenv("COLUMNS", "250")
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("cli"), 3)
    group = f"cli-{uuid.uuid4().hex[:8]}"
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(30):
        producer.produce(topic, value=b"x", partition=i % 3)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": "cli-member",
        "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 3:
            assert time.monotonic() < deadline, "no assignment"
            consumer.poll(0.1)
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 4),
                                 confluent_kafka.TopicPartition(topic, 1, 10)],
                        asynchronous=False)
        assert main(["groups", "describe", group, "--bootstrap-server", bootstrap]) == 0
        described = capsys.readouterr().out
        assert main(["groups", "list", "--bootstrap-server", bootstrap]) == 0
        listed = capsys.readouterr().out
    finally:
        consumer.close()
    assert f"group {group}: state Stable, protocol consumer/range, 1 members" in described
    member_row = next(line for line in described.splitlines() if "cli-member" in line)
    assert f"{topic}(0,1,2)" in member_row
    assert "/127.0.0.1" in member_row
    rows = {tuple(cell.strip() for cell in line.strip("│ ").split("│")[:5])
            for line in described.splitlines() if line.startswith("│") and topic in line
            and "cli-member" in line.split("│")[-2]}
    assert rows == {(topic, "0", "4", "10", "6"), (topic, "1", "10", "10", "0"),
                    (topic, "2", "-", "10", "-")}
    group_row = next(line for line in listed.splitlines() if group in line)
    assert [c.strip() for c in group_row.strip("│ ").split("│")] == [
        group, "consumer", "Stable", "1"]


def test_describe_a_kip848_group_shows_epochs_and_both_assignments(kafka_broker, unique_topic,
                                                                   capsys, monkeypatch):
    import confluent_kafka

    monkeypatch.setenv("COLUMNS", "300")
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("cli848"), 4)
    group = f"cli848-{uuid.uuid4().hex[:8]}"
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": "kip848-member",
        "group.protocol": "consumer", "group.remote.assignor": "range",
        "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 4:
            assert time.monotonic() < deadline, "no assignment"
            consumer.poll(0.1)
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 2, 0)],
                        asynchronous=False)
        assert main(["groups", "describe", group, "--bootstrap-server", bootstrap]) == 0
        described = capsys.readouterr().out
        assert main(["groups", "list", "--bootstrap-server", bootstrap]) == 0
        listed = capsys.readouterr().out
    finally:
        consumer.close()
    header = described.splitlines()[0]
    assert header.startswith(f"group {group}: state Stable, protocol consumer (KIP-848), "
                             "assignor range, group epoch 1, assignment epoch 1, 1 members")
    member_row = next(line for line in described.splitlines() if "kip848-member" in line)
    cells = [c.strip() for c in member_row.strip("│ ").split("│")]
    assert cells[1:] == ["-", "kip848-member", cells[3], "1", topic, f"{topic}(0,1,2,3)",
                         "same"]
    offsets = [c.strip() for line in described.splitlines()
               if line.startswith("│") and f"│ {topic}" in line and "  2 " in line
               for c in line.strip("│ ").split("│")]
    assert offsets[:3] == [topic, "2", "0"]
    group_row = next(line for line in listed.splitlines() if group in line)
    assert [c.strip() for c in group_row.strip("│ ").split("│")] == [
        group, "consumer", "Stable", "1"]
