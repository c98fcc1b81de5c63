"""``trio-broker share-groups`` (Kafka's ``kafka-share-groups.sh``) against a live share group:
list, describe (start offsets and lag, members, state), reset-offsets in each mode with the
group then starting where the reset put it, delete-offsets, delete, and Kafka's refusals."""

from __future__ import annotations

import json
import uuid

import confluent_kafka
import pytest

from trio_broker.cli import main
from trio_broker.client.blocking import BrokerConnection, parse_address
from trio_broker.protocol.api_keys import ApiKey


def _heartbeat(bootstrap: str, group: str, member: str, epoch: int, topic: str) -> None:
    with BrokerConnection(*parse_address(bootstrap)) as conn:
        answer = conn.call(ApiKey.ShareGroupHeartbeat, 1, group_id=group, member_id=member,
                           member_epoch=epoch,
                           subscribed_topic_names=[topic] if epoch == 0 else None)
    assert answer.error_code == 0


def _produce(bootstrap: str, topic: str, n: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for _ in range(n):
        producer.produce(topic, value=b"x")
    assert producer.flush(10) == 0


def _run(capsys: pytest.CaptureFixture[str], *argv: str, bootstrap: str) -> tuple[int, str, str]:
    code = main(["share-groups", *argv, "--bootstrap-server", bootstrap])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def _offsets(capsys: pytest.CaptureFixture[str], group: str,
             bootstrap: str) -> list[tuple[str, int, int | None, int | None]]:
    code, out, _ = _run(capsys, "describe", "--group", group, "--offsets", "--output", "json",
                        bootstrap=bootstrap)
    assert code == 0
    [doc] = json.loads(out)
    return [(o["topic"], o["partition"], o["start_offset"], o["lag"]) for o in doc["offsets"]]


def test_share_groups_tool(kafka_broker, unique_topic, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    bootstrap = kafka_broker.bootstrap_servers
    topic = kafka_broker.create_topic(unique_topic("share-cli"))
    group = f"share-cli-{uuid.uuid4().hex[:8]}"
    _produce(bootstrap, topic, 10)
    _heartbeat(bootstrap, group, "member-1", 0, topic)  # starts at the log end: 10
    _produce(bootstrap, topic, 5)

    code, out, _ = _run(capsys, "list", "--output", "plain", bootstrap=bootstrap)
    assert code == 0
    assert group in out.split()
    code, out, _ = _run(capsys, "list", "--state", "Stable", "--output", "plain",
                        bootstrap=bootstrap)
    assert code == 0
    assert out.splitlines()[0].split() == ["GROUP", "STATE"]
    assert [group, "Stable"] in [line.split() for line in out.splitlines()]
    code, out, _ = _run(capsys, "describe", "--group", group, "--output", "plain",
                        bootstrap=bootstrap)
    assert code == 0
    assert [line.split() for line in out.splitlines()] == [
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], [group, topic, "0", "10", "5"]]
    code, out, _ = _run(capsys, "describe", group, "--members", "--output", "plain",
                        bootstrap=bootstrap)
    assert code == 0
    assert "member-1" in out
    assert f"{topic}(0)" in out
    code, out, _ = _run(capsys, "describe", group, "--state", "--output", "plain",
                        bootstrap=bootstrap)
    assert code == 0
    assert "Stable" in out.splitlines()[1].split()

    # a group with members is not reset
    code, _, err = _run(capsys, "reset-offsets", "--group", group, "--topic", topic,
                        "--to-earliest", "--execute", bootstrap=bootstrap)
    assert (code, err.strip()) == (1, f"trio-broker share-groups: error: Share group "
                                      f"'{group}' is not empty.")
    _heartbeat(bootstrap, group, "member-1", -1, topic)

    code, out, err = _run(capsys, "reset-offsets", "--group", group, "--topic", topic,
                          "--to-earliest", "--output", "plain", bootstrap=bootstrap)
    assert code == 0
    assert "--execute option is missing" in err
    assert out.split()[-4:] == [group, topic, "0", "0"]
    assert _offsets(capsys, group, bootstrap) == [(topic, 0, 10, 5)]  # a dry run
    for mode, expected in [(["--to-earliest"], 0), (["--to-offset", "12"], 12),
                           (["--to-offset", "99"], 15), (["--to-datetime", "2000-01-01"], 0)]:
        code, _, _ = _run(capsys, "reset-offsets", "--group", group, "--all-topics", *mode,
                          "--execute", bootstrap=bootstrap)
        assert code == 0, mode
        assert _offsets(capsys, group, bootstrap) == [(topic, 0, expected, 15 - expected)]
    # the next member is handed the records from the reset start offset on
    consumer = confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap,
                                              "group.id": group})
    consumer.subscribe([topic])
    got: list[int] = []
    for _ in range(40):
        got += [m.offset() for m in consumer.poll(0.5) if m.error() is None]
        if len(got) >= 15:
            break
    consumer.close()
    assert sorted(got) == list(range(15))

    code, out, _ = _run(capsys, "delete-offsets", "--group", group, "--topic", topic,
                        "--output", "plain", bootstrap=bootstrap)
    assert code == 0
    assert out.split()[-2:] == [topic, "Successful"]
    assert _offsets(capsys, group, bootstrap) == []
    code, out, err = _run(capsys, "delete-offsets", "--group", group, "--topic", topic,
                          bootstrap=bootstrap)
    assert code == 1
    assert "Error: There is no offset information to delete." in out
    code, out, _ = _run(capsys, "delete", "--group", group, bootstrap=bootstrap)
    assert (code, out) == (0, f"Deletion of requested share groups ('{group}') was "
                              f"successful.\n")
    code, _, err = _run(capsys, "describe", group, bootstrap=bootstrap)
    assert (code, err.strip()) == (1, f"trio-broker share-groups: error: Share group "
                                      f"'{group}' does not exist.")
