"""Scriptable output of every list and describe command, over a SASL_SSL listener, from the real
``trio-broker`` process: ``| head -1`` ends quietly with status 0, a pipe gets every id whole
(no wrapping, no cutting, however narrow ``COLUMNS`` is), and ``plain`` / ``json`` carry the
same facts as the table."""

from __future__ import annotations

import json
import time
from importlib.metadata import version
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient

from tests.cli.conftest import Cli, run_cli
from trio_broker.testing import ThreadedBroker

#: a legal topic name far wider than any terminal (Kafka allows 249 characters)
LONG = "orders-" + "x" * 150
GROUP = "g-" + "y" * 120
RECORDS = 20_000


@pytest.fixture(scope="module")
def loaded(sasl_ssl_broker: ThreadedBroker, secure_librdkafka: dict[str, str]) -> str:
    """A long-named topic with many records, 150 more topics, a group with commits."""
    for i in range(150):
        sasl_ssl_broker.create_topic(f"filler-{i:03d}", 1)
    sasl_ssl_broker.create_topic(LONG, 3)
    producer = confluent_kafka.Producer({**secure_librdkafka, "linger.ms": 20})
    for i in range(RECORDS):
        producer.produce(LONG, key=f"k{i}".encode(), value=f"value-{i:05d}".encode(),
                         partition=i % 3)
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({**secure_librdkafka, "group.id": GROUP,
                                         "enable.auto.commit": False})
    consumer.commit(offsets=[confluent_kafka.TopicPartition(LONG, 0, 100),
                             confluent_kafka.TopicPartition(LONG, 1, 7)], asynchronous=False)
    consumer.close()
    return LONG


HEAD_COMMANDS = [
    ["topics", "list"],
    ["topics", "list", "-o", "json"],
    ["topics", "describe"],
    ["topics", "describe", "-o", "plain"],
    ["topics", "describe", "-o", "json"],
    ["configs", "describe", "--entity-type", "topics", "--all"],
    ["configs", "describe", "--entity-type", "brokers", "--entity-name", "0", "--all"],
    ["cluster", "describe"],
    ["cluster", "api-versions", "-o", "plain"],
    ["groups", "list"],
    ["groups", "describe", GROUP],
    ["groups", "describe", "--all-groups", "--state", "-o", "plain"],
    ["groups", "describe", "--all-groups", "--members"],
    ["groups", "reset-offsets", GROUP, "--all-topics", "--to-earliest", "--dry-run"],
    ["consume", LONG, "--from-beginning"],
    ["consume", LONG, "--from-beginning", "--output", "json"],
    ["consume", LONG, "--from-beginning", "--format", "%t %p %o %k %s"],
]


@pytest.mark.parametrize("argv", HEAD_COMMANDS, ids=lambda a: " ".join(a)[:60])
def test_head_one_ends_quietly(loaded, secure_cli: Cli, argv):
    done = secure_cli(*argv, pipe="head -1")
    assert (done.returncode, done.stderr) == (0, ""), done
    assert done.stdout.count("\n") == 1


def test_dump_log_and_the_version_through_head(loaded, sasl_ssl_broker):
    log_dir = Path(sasl_ssl_broker.broker.config.log_dir_list[0])
    segment = next((log_dir / f"{LONG}-0").glob("*.log"))
    done = run_cli("dump-log", "--print-data-log", str(segment), pipe="head -1")
    assert (done.returncode, done.stderr, done.stdout) == (0, "", f"Dumping {segment}\n")
    done = run_cli("--version")
    assert (done.returncode, done.stdout) == (0, f"trio-broker {version('trio-broker')}\n")


def test_consume_through_head_is_closed_early(loaded, secure_cli: Cli):
    """The pipe closes long before 20,000 records are written: the consumer notices the
    broken pipe, stops and says nothing (no traceback, no summary line)."""
    started = time.monotonic()
    done = secure_cli("consume", LONG, "--partition", "0", "--offset", "0", pipe="head -2")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "value-00000\nvalue-00003\n"
    assert time.monotonic() - started < 30


def _lines_with(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


def test_tables_off_a_terminal_keep_every_id_whole(loaded, secure_cli: Cli,
                                                   secure_librdkafka: dict[str, str]):
    listed = secure_cli("topics", "list")
    row = _lines_with(listed.stdout, LONG)
    assert len(row) == 1  # one line
    assert row[0].split("│")[1].strip() == LONG  # the whole name
    described = secure_cli("topics", "describe", LONG)
    assert _lines_with(described.stdout, "Topic: ") == [
        f"Topic: {LONG}  PartitionCount: 3  ReplicationFactor: 1"]
    # a live member: its id (client.id + a uuid) is longer than COLUMNS and must stay whole
    client_id = "member-" + "z" * 90
    consumer = confluent_kafka.Consumer({**secure_librdkafka, "group.id": "live-" + GROUP,
                                         "client.id": client_id})
    consumer.subscribe([LONG])
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline, "no assignment"
            consumer.poll(0.1)
        members = secure_cli("groups", "describe", "live-" + GROUP, "--members")
        state = secure_cli("groups", "describe", "live-" + GROUP, "--state", "-o", "plain")
    finally:
        consumer.close()
    headline = _lines_with(members.stdout, "coordinator")
    assert len(headline) == 1
    assert headline[0].startswith(f"group live-{GROUP}: state Stable")
    assert headline[0].endswith(f"coordinator {_address(secure_cli)} (id 0)")
    member_row = _lines_with(members.stdout, client_id)
    assert len(member_row) == 1
    member_id = member_row[0].split("│")[1].strip()
    assert member_id.startswith(client_id + "-")
    assert len(member_id) == len(client_id) + 37
    assert f"{LONG}(0,1,2)" in member_row[0]
    assert state.stdout.split("\n")[1].split() == [
        f"live-{GROUP}", _address(secure_cli), "0", "range", "Stable", "1"]


def _address(cli: Cli) -> str:
    found = json.loads(cli("cluster", "describe", "-o", "json").stdout)["brokers"][0]
    return f"{found['host']}:{found['port']}"


def test_plain_and_json_carry_the_table_facts(loaded, secure_cli: Cli):
    plain = secure_cli("groups", "describe", GROUP, "-o", "plain").stdout.splitlines()
    assert plain[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    rows = sorted(line.split() for line in plain[1:])
    end = {0: 6667, 1: 6667, 2: 6666}
    assert rows == [[GROUP, LONG, "0", "100", str(end[0]), str(end[0] - 100), "-", "-", "-"],
                    [GROUP, LONG, "1", "7", str(end[1]), str(end[1] - 7), "-", "-", "-"]]
    [doc] = json.loads(secure_cli("groups", "describe", GROUP, "-o", "json").stdout)
    assert doc["state"] == "Empty"
    assert [(o["partition"], o["current_offset"], o["lag"]) for o in doc["offsets"]] == [
        (0, 100, end[0] - 100), (1, 7, end[1] - 7)]
    topics = json.loads(secure_cli("topics", "describe", LONG, "-o", "json").stdout)
    assert [(p["partition"], p["log_start_offset"], p["log_end_offset"])
            for p in topics[0]["partitions"]] == [(0, 0, end[0]), (1, 0, end[1]), (2, 0, end[2])]
    listed = json.loads(secure_cli("topics", "list", "-o", "json").stdout)
    assert {"topic": LONG, "partitions": 3, "replication_factor": 1,
            "internal": False} in listed
    plain_topics = secure_cli("topics", "describe", LONG, "-o", "plain").stdout
    tables = plain_topics.split("\n\n")
    # plain output keeps one column set for scripts: a topic that is not compacted has no
    # dirty ratio ("-")
    assert tables[0].splitlines()[1].split() == [LONG, "0", "0", "0", "0", "0", str(end[0]), "-"]
    assert any(line.split()[:3] == [LONG, "cleanup.policy", "delete"]
               for line in tables[1].splitlines())


def test_list_commands_print_bare_names_in_plain_form_as_kafkas_tools_do(
        loaded, secure_cli: Cli, secure_librdkafka: dict[str, str]):
    """``kafka-topics --list`` and ``kafka-consumer-groups --list`` print one name a line and
    no header; with ``--state``, the groups tool prints GROUP and STATE columns."""
    admin = AdminClient(secure_librdkafka)
    seen = admin.list_topics(timeout=15).topics
    topics = secure_cli("topics", "list", "-o", "plain").stdout.splitlines()
    assert topics == sorted(seen)
    assert LONG in topics
    excluded = secure_cli("topics", "list", "-o", "plain", "--exclude-internal").stdout
    assert excluded.splitlines() == sorted(t for t in seen if not t.startswith("__"))
    groups = secure_cli("groups", "list", "-o", "plain").stdout.splitlines()
    listed = admin.list_consumer_groups().result(15).valid
    assert groups == sorted(g.group_id for g in listed)
    assert GROUP in groups
    by_state = secure_cli("groups", "list", "--state", "Empty", "-o", "plain").stdout
    empty = [g["group"] for g in json.loads(
        secure_cli("groups", "list", "--state", "Empty", "-o", "json").stdout)]
    width = max(15, *(len(g) for g in empty))  # the longest id, at least 15
    assert by_state.splitlines() == [f"{'GROUP':<{width}} STATE",
                                     *(f"{g:<{width}} Empty" for g in empty)]
    assert GROUP in empty
    # the table and json forms keep their columns
    assert "│" in secure_cli("topics", "list").stdout
    assert json.loads(secure_cli("groups", "list", "-o", "json").stdout)[0].keys() == {
        "group", "protocol_type", "state", "members"}
