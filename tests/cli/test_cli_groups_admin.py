"""``groups reset-offsets`` in every mode, each checked by a consumer that then starts exactly
where the reset put it; ``groups delete`` and ``delete-offsets``; Kafka's refusals."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime

import confluent_kafka
import pytest

from tests.cli.conftest import Cli
from trio_broker.cli import main

PARTITIONS = 3
PER_PARTITION = 10
MINUTE_MS = 60_000


def _one_line_error(err: str) -> str:
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    return err


@pytest.fixture
def timed_topic(kafka_broker, unique_topic) -> tuple[str, int]:
    """3 partitions of 10 records; record n of each partition was written n minutes after
    ``base``, and ``base`` is ten minutes ago."""
    topic = kafka_broker.create_topic(unique_topic("reset"), PARTITIONS)
    base = int(time.time() * 1000) - 10 * MINUTE_MS
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for p in range(PARTITIONS):
        for n in range(PER_PARTITION):
            producer.produce(topic, value=f"{p}-{n}".encode(), partition=p,
                             timestamp=base + n * MINUTE_MS)
    assert producer.flush(10) == 0
    return topic, base


def _group(kafka_broker, topic: str, offsets: dict[int, int]) -> str:
    """A new group with ``offsets`` committed (and no member)."""
    group = f"reset-{uuid.uuid4().hex[:8]}"
    consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                                         "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, p, o)
                             for p, o in offsets.items()], asynchronous=False)
    consumer.close()
    return group


def _where_a_consumer_starts(kafka_broker, group: str, topic: str,
                             partitions: set[int]) -> dict[int, int]:
    """The offset of the first record a member of ``group`` is given on each partition
    (``auto.offset.reset=error``: only a committed offset can say where to start)."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": group,
        "enable.auto.commit": False, "auto.offset.reset": "error"})
    consumer.subscribe([topic])
    first: dict[int, int] = {}
    deadline = time.monotonic() + 30
    try:
        while set(first) != partitions:
            assert time.monotonic() < deadline, f"only {first} of {partitions}"
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            first.setdefault(message.partition(), message.offset())
    finally:
        consumer.close()
    return first


def _reset(kafka_broker, capsys, group: str, *argv: str) -> list[dict]:
    assert main(["groups", "reset-offsets", group, *argv, "--execute", "-o", "json",
                 "--bootstrap-server", kafka_broker.bootstrap_servers]) == 0
    return json.loads(capsys.readouterr().out)


ALL = set(range(PARTITIONS))


@pytest.mark.parametrize(("mode", "expected"), [
    (["--to-earliest"], {0: 0, 1: 0, 2: 0}),
    (["--to-current"], {0: 2, 1: 4, 2: 6}),
    (["--to-offset", "7"], {0: 7, 1: 7, 2: 7}),
    (["--shift-by", "3"], {0: 5, 1: 7, 2: 9}),
    (["--shift-by", "-3"], {0: 0, 1: 1, 2: 3}),  # clamped to the log start, as Kafka does
])
def test_reset_modes_by_offset(kafka_broker, timed_topic, capsys, mode, expected):
    topic, _ = timed_topic
    group = _group(kafka_broker, topic, {0: 2, 1: 4, 2: 6})
    plan = _reset(kafka_broker, capsys, group, "--topic", topic, *mode)
    assert {r["partition"]: r["new_offset"] for r in plan} == expected
    assert _where_a_consumer_starts(kafka_broker, group, topic, ALL) == expected


def test_reset_to_latest_starts_at_the_next_record(kafka_broker, timed_topic, capsys):
    topic, _ = timed_topic
    group = _group(kafka_broker, topic, {0: 1, 1: 1, 2: 1})
    plan = _reset(kafka_broker, capsys, group, "--all-topics", "--to-latest")
    assert {r["partition"]: r["new_offset"] for r in plan} == dict.fromkeys(ALL, PER_PARTITION)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for p in ALL:
        producer.produce(topic, value=b"new", partition=p)
    assert producer.flush(10) == 0
    assert _where_a_consumer_starts(kafka_broker, group, topic, ALL) == dict.fromkeys(
        ALL, PER_PARTITION)


def test_reset_by_time(kafka_broker, timed_topic, capsys):
    topic, base = timed_topic
    group = _group(kafka_broker, topic, dict.fromkeys(ALL, 9))
    # ISO with a zone, and Kafka's zone-less form (local time)
    at_3 = datetime.fromtimestamp((base + 3 * MINUTE_MS) / 1000, tz=UTC).isoformat()
    plan = _reset(kafka_broker, capsys, group, "--topic", f"{topic}:0,1", "--to-datetime", at_3)
    assert {r["partition"]: r["new_offset"] for r in plan} == {0: 3, 1: 3}
    local_6 = datetime.fromtimestamp((base + 6 * MINUTE_MS - 500) / 1000).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3]
    plan = _reset(kafka_broker, capsys, group, "--topic", f"{topic}:2", "--to-datetime", local_6)
    assert plan == [{"group": group, "topic": topic, "partition": 2, "new_offset": 6}]
    assert _where_a_consumer_starts(kafka_broker, group, topic, ALL) == {0: 3, 1: 3, 2: 6}
    # now minus 5.5 minutes: record 5 was written 5 minutes ago, record 4 six
    plan = _reset(kafka_broker, capsys, group, "--topic", topic, "--by-duration", "PT5M30S")
    assert {r["partition"]: r["new_offset"] for r in plan} == dict.fromkeys(ALL, 5)
    assert _where_a_consumer_starts(kafka_broker, group, topic, ALL) == dict.fromkeys(ALL, 5)
    # a time after every record: the log end
    plan = _reset(kafka_broker, capsys, group, "--topic", topic, "--to-datetime",
                  str(int(time.time() * 1000) + 60_000))
    assert {r["new_offset"] for r in plan} == {PER_PARTITION}


def test_export_then_reset_from_the_file(kafka_broker, timed_topic, capsys, tmp_path):
    topic, _ = timed_topic
    group = _group(kafka_broker, topic, dict.fromkeys(ALL, 8))
    bs = ["--bootstrap-server", kafka_broker.bootstrap_servers]
    assert main(["groups", "reset-offsets", group, "--topic", topic, "--shift-by", "-6",
                 "--dry-run", "--export", *bs]) == 0
    exported = capsys.readouterr().out
    assert exported.splitlines() == [f"{topic},{p},2" for p in range(PARTITIONS)]
    plan_file = tmp_path / "plan.csv"
    plan_file.write_text(exported.replace(f"{topic},1,2", f"{topic},1,4"))
    # the dry run committed nothing
    assert _where_a_consumer_starts(kafka_broker, group, topic, ALL) == dict.fromkeys(ALL, 8)
    plan = _reset(kafka_broker, capsys, group, "--from-file", str(plan_file))
    assert {r["partition"]: r["new_offset"] for r in plan} == {0: 2, 1: 4, 2: 2}
    assert _where_a_consumer_starts(kafka_broker, group, topic, ALL) == {0: 2, 1: 4, 2: 2}


def test_an_active_group_is_refused_as_kafka_refuses_it(kafka_broker, timed_topic, capsys):
    topic, _ = timed_topic
    group = _group(kafka_broker, topic, dict.fromkeys(ALL, 1))
    member = confluent_kafka.Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                                       "group.id": group})
    member.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while not member.assignment():
            assert time.monotonic() < deadline
            member.poll(0.1)
        bs = ["--bootstrap-server", kafka_broker.bootstrap_servers]
        assert main(["groups", "reset-offsets", group, "--topic", topic, "--to-earliest",
                     "--execute", *bs]) == 1
        assert (f"assignments can only be reset if the group '{group}' is inactive, but the "
                "current state is Stable") in _one_line_error(capsys.readouterr().err)
        assert main(["groups", "delete", group, *bs]) == 1
        assert (f"group '{group}' could not be deleted due to: NON_EMPTY_GROUP"
                in _one_line_error(capsys.readouterr().err))
        assert main(["groups", "delete-offsets", group, "--topic", topic, *bs]) == 1
        out, err = capsys.readouterr()
        assert "GROUP_SUBSCRIBED_TO_TOPIC" in _one_line_error(err)
        assert out.count("GROUP_SUBSCRIBED_TO_TOPIC") == PARTITIONS
    finally:
        member.close()


@pytest.mark.parametrize(("argv", "message"), [
    (["--to-earliest"], "one of the reset scopes is needed"),
    (["--all-topics", "--shift-by", "1"], "has no committed offset"),
    (["--topic", "x:a", "--to-earliest"], "partitions are numbers"),
    (["--all-topics", "--by-duration", "1 hour"], "bad --by-duration"),
    (["--all-topics", "--to-datetime", "yesterday"], "bad --to-datetime"),
])
def test_reset_bad_input(kafka_broker, capsys, argv, message):
    group = f"fresh-{uuid.uuid4().hex[:8]}"
    if "--shift-by" in argv:  # a group with a topic committed but one partition not
        topic = kafka_broker.create_topic(f"shift-{group}", 2)
        _commit_one(kafka_broker, group, topic)
        argv = ["--topic", topic, "--shift-by", "1"]
    code = main(["groups", "reset-offsets", group, *argv, "--bootstrap-server",
                 kafka_broker.bootstrap_servers])
    assert code in (1, 2)
    assert message in _one_line_error(capsys.readouterr().err)


def _commit_one(kafka_broker, group: str, topic: str) -> None:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers,
                                         "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 0)], asynchronous=False)
    consumer.close()


def test_delete_offsets_then_delete_the_group(kafka_broker, timed_topic, capsys):
    topic, _ = timed_topic
    group = _group(kafka_broker, topic, dict.fromkeys(ALL, 4))
    bs = ["--bootstrap-server", kafka_broker.bootstrap_servers]
    assert main(["groups", "delete-offsets", group, "--topic", f"{topic}:0,2", "-o", "plain",
                 *bs]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "TOPIC" + " " * (len(topic) - 3) + "PARTITION  STATUS",
        f"{topic}  0          Successful", f"{topic}  2          Successful"]
    assert main(["groups", "describe", group, "-o", "json", *bs]) == 0
    [doc] = json.loads(capsys.readouterr().out)
    assert [(o["partition"], o["current_offset"]) for o in doc["offsets"]] == [(1, 4)]
    assert main(["groups", "delete", group, *bs]) == 0
    assert capsys.readouterr().out == (
        f"Deletion of requested consumer groups ('{group}') was successful.\n")
    assert main(["groups", "describe", group, *bs]) == 1
    assert f"consumer group '{group}' does not exist" in _one_line_error(
        capsys.readouterr().err)


def test_describe_all_groups_views(kafka_broker, timed_topic, capsys):
    topic, _ = timed_topic
    groups = sorted(_group(kafka_broker, topic, {p: p + 1 for p in ALL}) for _ in range(2))
    bs = ["--bootstrap-server", kafka_broker.bootstrap_servers]
    assert main(["groups", "describe", "--all-groups", "--offsets", "-o", "plain", *bs]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    mine = [r for r in rows if r[0] in groups]
    assert sorted((r[0], r[2], r[3], r[5]) for r in mine) == sorted(
        (g, str(p), str(p + 1), str(PER_PARTITION - p - 1)) for g in groups for p in ALL)
    assert main(["groups", "describe", "--all-groups", "--state", "-o", "json", *bs]) == 0
    states = {d["group"]: d["state"] for d in json.loads(capsys.readouterr().out)}
    assert all(states[g] == "Empty" for g in groups)
    assert main(["groups", "describe", *groups, "--members", *bs]) == 0
    out = capsys.readouterr().out
    assert all(f"group {g}: state Empty" in out for g in groups)
    assert main(["groups", "list", "--state", "Empty", "-o", "json", *bs]) == 0
    listed = {d["group"] for d in json.loads(capsys.readouterr().out)}
    assert set(groups) <= listed
    assert main(["groups", "list", "--state", "Stable", "-o", "json", *bs]) == 0
    assert not set(groups) & {d["group"] for d in json.loads(capsys.readouterr().out)}


def test_reset_and_delete_over_sasl_ssl(sasl_ssl_broker, secure_cli: Cli, secure_librdkafka,
                                        unique_topic):
    topic = sasl_ssl_broker.create_topic(unique_topic("secure-reset"), 1)
    assert secure_cli("produce", topic, stdin="a\nb\nc\nd\n").returncode == 0
    group = f"secure-{uuid.uuid4().hex[:8]}"
    consumer = confluent_kafka.Consumer({**secure_librdkafka, "group.id": group,
                                         "enable.auto.commit": False})
    consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 1)], asynchronous=False)
    consumer.close()
    done = secure_cli("groups", "reset-offsets", "--group", group, "--topic", topic,
                      "--to-offset", "3", "--execute", "-o", "plain")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[1].split() == [group, topic, "0", "3"]
    consumed = secure_cli("consume", topic, "--group", group, "--max-messages", "1",
                          "--timeout-ms", "10000")
    assert consumed.stdout == "d\n"
    done = secure_cli("groups", "delete-offsets", group, "--topic", topic)
    assert done.returncode == 0
    done = secure_cli("groups", "delete", "--group", group)
    assert done.stdout == f"Deletion of requested consumer groups ('{group}') was successful.\n"
