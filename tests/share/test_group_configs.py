"""The GROUP config resource (type 32): a share group's own settings through
IncrementalAlterConfigs and DescribeConfigs, Kafka's INVALID_CONFIG for unknown keys and values
out of bounds, and ``share.auto.offset.reset=earliest`` acting on the group."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import ShareConsumer

from tests.share.test_share_consumer import create_topic, produce
from trio_broker.client.blocking import BrokerConnection, parse_address
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode
from trio_broker.testing import ThreadedBroker

GROUP = 32
IAC = request_class(ApiKey.IncrementalAlterConfigs)
DC = request_class(ApiKey.DescribeConfigs)
SET, DELETE = 0, 1


def alter(conn: BrokerConnection, group: str, *ops: tuple[str, int, str | None]) -> Any:
    answer = conn.call(ApiKey.IncrementalAlterConfigs, 1, validate_only=False, resources=[
        IAC.AlterConfigsResource(resource_type=GROUP, resource_name=group, configs=[
            IAC.AlterConfigsResource.AlterableConfig(name=k, config_operation=op, value=v)
            for k, op, v in ops])])
    return answer.responses[0]


def describe(conn: BrokerConnection, group: str) -> dict[str, tuple[str, int]]:
    answer = conn.call(ApiKey.DescribeConfigs, 4, include_synonyms=False,
                       include_documentation=False, resources=[DC.DescribeConfigsResource(
                           resource_type=GROUP, resource_name=group, configuration_keys=None)])
    [result] = answer.results
    assert result.error_code == 0, result
    return {c.name: (c.value, c.config_source) for c in result.configs}


def test_group_configs_are_described_altered_and_stored(
        kafka_broker: ThreadedBroker, unique_topic: Callable[[str], str]) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    group = unique_topic("sg")
    with BrokerConnection(*parse_address(bootstrap)) as conn:
        assert describe(conn, group) == {
            "share.auto.offset.reset": ("latest", 5),
            "share.isolation.level": ("read_uncommitted", 5),
            "share.record.lock.duration.ms": ("30000", 5),
            "share.session.timeout.ms": ("45000", 5),
            "share.heartbeat.interval.ms": ("5000", 5),
            "consumer.session.timeout.ms": (
                str(kafka_broker.broker.config.group_consumer_session_timeout_ms), 5),
            "consumer.heartbeat.interval.ms": (
                str(kafka_broker.broker.config.group_consumer_heartbeat_interval_ms), 5)}
        bad = alter(conn, group, ("share.record.lock.duration.ms", SET, "20000"),
                    ("share.bogus", SET, "1"))
        assert bad.error_code == ErrorCode.INVALID_CONFIG
        assert "share.bogus" in bad.error_message
        for key, value in (("share.record.lock.duration.ms", "100"),
                           ("share.auto.offset.reset", "by_duration:PT1H"),
                           ("share.session.timeout.ms", "x"),
                           ("share.isolation.level", "read_committedd")):
            assert alter(conn, group, (key, SET, value)).error_code == ErrorCode.INVALID_CONFIG
        assert describe(conn, group)["share.record.lock.duration.ms"] == ("30000", 5)
        ok = alter(conn, group, ("share.record.lock.duration.ms", SET, "20000"),
                   ("share.auto.offset.reset", SET, "Earliest"))
        assert ok.error_code == 0, ok
        described = describe(conn, group)
        assert described["share.record.lock.duration.ms"] == ("20000", 8)  # GROUP_CONFIG
        assert described["share.auto.offset.reset"] == ("earliest", 8)
        refused = alter(conn, group, ("share.isolation.level", SET, "serializable"))
        assert refused.error_message == (
            "Invalid value serializable for configuration share.isolation.level: String must "
            "be one of: read_committed, read_uncommitted")
        assert alter(conn, group, ("share.isolation.level", SET, "read_committed")).error_code == 0
        assert describe(conn, group)["share.isolation.level"] == ("read_committed", 8)
        assert alter(conn, group, ("share.isolation.level", DELETE, None)).error_code == 0
        assert alter(conn, group, ("share.record.lock.duration.ms", DELETE, None)).error_code == 0
        assert describe(conn, group)["share.record.lock.duration.ms"] == ("30000", 5)
    assert kafka_broker.broker is not None
    path = kafka_broker.broker.state.shares.group_configs.path
    assert path is not None
    assert json.loads(path.read_text())[group] == {"share.auto.offset.reset": "earliest"}


def test_earliest_reads_what_was_there_before(kafka_broker: ThreadedBroker,
                                              unique_topic: Callable[[str], str]) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic, group = unique_topic("t"), unique_topic("sg")
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, range(5))
    with BrokerConnection(*parse_address(bootstrap)) as conn:
        assert alter(conn, group, ("share.auto.offset.reset", SET, "earliest")).error_code == 0
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    got: list[bytes] = []
    for _ in range(40):
        got += [m.value() for m in consumer.poll(0.5) if m.error() is None]
        if len(got) >= 5:
            break
    consumer.close()
    assert sorted(got) == [b"0", b"1", b"2", b"3", b"4"]


def test_the_configs_command_on_groups(kafka_broker: ThreadedBroker,
                                       unique_topic: Callable[[str], str],
                                       capsys: Any) -> None:
    from trio_broker.cli import main

    group = unique_topic("sg")
    server = ["--bootstrap-server", kafka_broker.bootstrap_servers]
    assert main(["configs", "alter", *server, "--entity-type", "groups", "--entity-name", group,
                 "--add-config", "share.heartbeat.interval.ms=6000"]) == 0
    assert f"Completed updating config for group {group}." in capsys.readouterr().out
    assert main(["configs", "describe", *server, "--entity-type", "groups",
                 "--entity-name", group, "--output", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["entity_type"] == "groups"
    assert [(c["name"], c["value"], c["source"]) for c in document["configs"]] == [
        ("share.heartbeat.interval.ms", "6000", "GROUP_CONFIG")]


def test_consumer_group_keys_through_confluent_kafkas_admin_client(
        kafka_broker: ThreadedBroker, unique_topic: Callable[[str], str]) -> None:
    """librdkafka's GROUP config resource: consumer.* keys set, described with their source, and
    refused outside the broker's group.consumer.min/max bounds."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
    group = unique_topic("cg-configs")
    assert kafka_broker.broker is not None
    config = kafka_broker.broker.config

    def alter(key: str, value: str) -> None:
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(15)

    alter("consumer.heartbeat.interval.ms", str(config.group_consumer_max_heartbeat_interval_ms))
    [(_, future)] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).items()
    described = future.result(15)
    assert described["consumer.heartbeat.interval.ms"].value == str(
        config.group_consumer_max_heartbeat_interval_ms)
    assert described["consumer.heartbeat.interval.ms"].source == 8  # GROUP_CONFIG
    assert described["consumer.session.timeout.ms"].source == 5  # DEFAULT_CONFIG
    with pytest.raises(KafkaException) as refused:
        alter("consumer.session.timeout.ms", str(config.group_consumer_max_session_timeout_ms + 1))
    assert refused.value.args[0].code() == ErrorCode.INVALID_CONFIG
    assert "consumer.session.timeout.ms must be greater than or equal to" in str(refused.value)
