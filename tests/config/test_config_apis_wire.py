"""DescribeConfigs v0-4, AlterConfigs v0-2 and IncrementalAlterConfigs v0-1 on the wire: each
version's fields, Kafka's sources and synonyms, its checks and error texts, dynamic broker
configs that persist, and the broker's loggers."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.wire import RawClient
from trio_broker import open_broker
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.message_types import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
_DR = DescribeConfigsRequest.DescribeConfigsResource
_AR = AlterConfigsRequest.AlterConfigsResource
_IR = IncrementalAlterConfigsRequest.AlterConfigsResource


async def describe(client: RawClient, version: int, resource_type: int, name: str,
                   keys: list[str] | None = None, *, synonyms: bool = True,
                   documentation: bool = True) -> Any:
    body = DescribeConfigsRequest(
        resources=[_DR(resource_type=resource_type, resource_name=name,
                       configuration_keys=keys)],
        include_synonyms=synonyms, include_documentation=documentation)
    response = await client.request(ApiKey.DescribeConfigs, version, body=body)
    [result] = response.results
    return result


def by_name(result: Any) -> dict[str, Any]:
    return {c.name: c for c in result.configs}


async def alter(client: RawClient, version: int, resources: list[tuple[int, str, dict]],
                validate_only: bool = False) -> list[tuple[int, str | None]]:
    body = AlterConfigsRequest(resources=[
        _AR(resource_type=t, resource_name=n,
            configs=[_AR.AlterableConfig(name=k, value=v) for k, v in c.items()])
        for t, n, c in resources], validate_only=validate_only)
    response = await client.request(ApiKey.AlterConfigs, version, body=body)
    return [(r.error_code, r.error_message) for r in response.responses]


async def incremental(client: RawClient, version: int, resource_type: int, name: str,
                      ops: list[tuple[str, int, str | None]],
                      validate_only: bool = False) -> tuple[int, str | None]:
    body = IncrementalAlterConfigsRequest(resources=[_IR(
        resource_type=resource_type, resource_name=name,
        configs=[_IR.AlterableConfig(name=k, config_operation=op, value=v)
                 for k, op, v in ops])], validate_only=validate_only)
    response = await client.request(ApiKey.IncrementalAlterConfigs, version, body=body)
    [result] = response.responses
    return result.error_code, result.error_message


@pytest.fixture
async def client(trio_broker):
    trio_broker.state.logs.create_topic("orders", 1, {"retention.ms": "3600000"})
    raw = await RawClient.connect(trio_broker.host, trio_broker.port)
    yield raw
    await raw.aclose()


@pytest.mark.parametrize("version", range(5))
async def test_describe_topic_every_version(client, version):
    result = await describe(client, version, TOPIC, "orders")
    assert (result.error_code, result.resource_name) == (0, "orders")
    configs = by_name(result)
    assert len(configs) >= 36  # every Kafka 3.9/4.x topic config
    retention, segment = configs["retention.ms"], configs["segment.bytes"]
    assert (retention.value, segment.value) == ("3600000", "1073741824")
    assert not retention.read_only
    assert not retention.is_sensitive
    if version == 0:
        assert (retention.is_default, segment.is_default) == (False, True)
        return
    assert (retention.config_source, segment.config_source) == (TOPIC_CONFIG, DEFAULT)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "3600000", TOPIC_CONFIG)]  # log.retention.hours is cut, as in Kafka
    assert [(s.name, s.source) for s in segment.synonyms] == [("log.segment.bytes", DEFAULT)]
    if version >= 3:
        assert (retention.config_type, configs["cleanup.policy"].config_type) == (5, 7)
        assert "older than this" in retention.documentation
        assert "not acted on" in configs["unclean.leader.election.enable"].documentation


async def test_describe_leaves_out_what_was_not_asked(client):
    result = await describe(client, 4, TOPIC, "orders", ["retention.ms", "no.such"],
                            synonyms=False, documentation=False)
    [entry] = result.configs
    assert (entry.name, entry.synonyms, entry.documentation) == ("retention.ms", [], None)


@pytest.mark.parametrize(("resource_type", "name", "code", "message"), [
    (TOPIC, "missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
    (TOPIC, "no/slash", ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name "no/slash" is illegal, it '
     "contains a character other than ASCII alphanumerics, '.', '_' and '-'"),
    (BROKER, "7", ErrorCode.INVALID_REQUEST,
     "Unexpected broker id, expected 0 or empty string, but received 7"),
    (BROKER, "x", ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: x"),
    (BROKER_LOGGER, "", ErrorCode.INVALID_REQUEST, "Broker id must not be empty"),
])
async def test_describe_errors(client, resource_type, name, code, message):
    result = await describe(client, 4, resource_type, name)
    assert (result.error_code, result.error_message, result.configs) == (code, message, [])


async def test_describe_broker(trio_broker, client):
    result = await describe(client, 4, BROKER, "0")
    configs = by_name(result)
    assert len(configs) > 300  # every Kafka broker key, accepted ones included
    assert configs["log.dirs"].config_source == STATIC  # set by the fixture
    assert configs["num.io.threads"].config_source == DEFAULT
    assert configs["num.io.threads"].read_only is False  # Kafka updates it dynamically
    assert configs["node.id"].read_only is True
    assert configs["ssl.key.password"].is_sensitive
    assert configs["ssl.key.password"].value is None
    assert configs["broker.id"].value == "0"
    hours = configs["log.retention.hours"]
    assert [(s.name, s.source) for s in hours.synonyms] == [("log.retention.hours", DEFAULT)]
    assert configs["zookeeper.connect"].documentation.endswith("with no meaning on one broker.")
    # only KIP-966's cluster-level min.insync.replicas, as a new Kafka 4.1+ cluster has it
    assert [(c.name, c.value, c.config_source)
            for c in (await describe(client, 4, BROKER, "")).configs] == [
        ("min.insync.replicas", "1", DYNAMIC_DEFAULT)]


@pytest.mark.parametrize("version", range(3))
async def test_alter_configs_replaces_the_topic_overrides(trio_broker, client, version):
    assert await alter(client, version, [(TOPIC, "orders", {"cleanup.policy": "compact,delete",
                                                            "min.insync.replicas": "2"})]) == [
        (0, None)]
    assert trio_broker.state.logs.topic_overrides("orders") == {
        "cleanup.policy": "compact,delete", "min.insync.replicas": "2"}  # retention.ms gone
    assert trio_broker.state.logs.topic_config("orders").retention_ms == 604_800_000
    assert await alter(client, version, [(TOPIC, "orders", {"retention.ms": "1"})],
                       validate_only=True) == [(0, None)]
    assert "retention.ms" not in trio_broker.state.logs.topic_overrides("orders")


@pytest.mark.parametrize("version", range(2))
async def test_incremental_alter_configs_operations(trio_broker, client, version):
    logs = trio_broker.state.logs
    assert await incremental(client, version, TOPIC, "orders", [
        ("cleanup.policy", APPEND, "compact"), ("segment.ms", SET, "60000"),
        ("retention.ms", DELETE, None)]) == (0, None)
    assert logs.topic_overrides("orders") == {"cleanup.policy": "delete,compact",
                                              "segment.ms": "60000"}
    assert await incremental(client, version, TOPIC, "orders",
                             [("cleanup.policy", SUBTRACT, "delete")]) == (0, None)
    assert logs.topic_config("orders").cleanup_policy == "compact"
    assert await incremental(client, version, TOPIC, "orders", [
        ("leader.replication.throttled.replicas", APPEND, "0:0,1:0")]) == (0, None)
    assert logs.topic_overrides("orders")["leader.replication.throttled.replicas"] == "0:0,1:0"


@pytest.mark.parametrize(("ops", "code", "message"), [
    ([("retention.ms", APPEND, "5")], ErrorCode.INVALID_CONFIG,
     "Can't APPEND to key retention.ms because its type is not LIST."),
    ([("retention.ms", SET, "soon")], ErrorCode.INVALID_CONFIG,
     "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    ([("no.such.config", SET, "1")], ErrorCode.INVALID_CONFIG,
     "Unknown topic config name: no.such.config"),
    ([("min.compaction.lag.ms", SET, "10"), ("max.compaction.lag.ms", SET, "5")],
     ErrorCode.INVALID_CONFIG,
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
    ([("remote.storage.enable", SET, "true")], ErrorCode.INVALID_CONFIG,
     "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with "
     "remote log storage."),
    ([("retention.ms", SET, "1"), ("retention.ms", SET, "2")], ErrorCode.INVALID_REQUEST,
     "Error due to duplicate config keys"),
    ([("retention.ms", SET, None)], ErrorCode.INVALID_REQUEST,
     "Null value not supported for : retention.ms"),
    ([("retention.ms", 7, "1")], ErrorCode.INVALID_REQUEST, "Unknown operations type 7"),
])
async def test_incremental_topic_errors_change_nothing(trio_broker, client, ops, code, message):
    assert await incremental(client, 1, TOPIC, "orders", ops) == (code, message)
    assert trio_broker.state.logs.topic_overrides("orders") == {"retention.ms": "3600000"}


async def test_alter_errors(client):
    assert await incremental(client, 1, TOPIC, "missing", [("retention.ms", SET, "1")]) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist.")
    assert await incremental(client, 1, TOPIC, "", [("retention.ms", SET, "1")]) == (
        ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    assert await alter(client, 2, [(TOPIC, "orders", {"retention.ms": "1"}),
                                   (TOPIC, "orders", {"retention.ms": "2"})]) == [
        (ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    assert await alter(client, 2, [(BROKER_LOGGER, "0", {"root": "DEBUG"})]) == [
        (ErrorCode.INVALID_REQUEST, "Unknown resource type 8")]
    assert await incremental(client, 1, BROKER, "0", [("node.id", SET, "3")]) == (
        ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(node.id)")
    assert await incremental(client, 1, BROKER, "", [("listeners", SET, "PLAINTEXT://:1")]) == (
        ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, "
        "broker id must be specified: Set(listeners)")
    assert await incremental(client, 1, BROKER, "0", [("ssl.keystore.location", SET, "/k")]) == (
        ErrorCode.INVALID_REQUEST, "These security configs can be dynamically updated only "
        "per-listener using the listener prefix: Set(ssl.keystore.location)")
    assert await incremental(client, 1, BROKER, "", [("log.retention.ms", APPEND, "1")]) == (
        ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: "
        "log.retention.ms")
    assert await incremental(client, 1, BROKER, "", [("message.max.bytes", SET, "-5")]) == (
        ErrorCode.INVALID_REQUEST,
        "Invalid value -5 for configuration message.max.bytes: Value must be at least 0")
    assert await incremental(client, 1, BROKER, "9", [("num.io.threads", SET, "2")]) == (
        ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 0, but received 9")


async def test_dynamic_broker_configs_apply_to_topics_and_persist(tmp_path):
    data = str(tmp_path / "data")
    async with open_broker(log_dirs=data) as broker:
        broker.state.logs.create_topic("plain", 1, {})
        broker.state.logs.create_topic("own", 1, {"retention.ms": "5000"})
        client = await RawClient.connect(broker.host, broker.port)
        assert await incremental(client, 1, BROKER, "", [
            ("log.retention.ms", SET, "7200000"), ("log.cleaner.threads", SET, "2")]) == (0, None)
        assert await incremental(client, 1, BROKER, "0", [
            ("log.cleanup.policy", SET, "compact"), ("num.io.threads", SET, "4")]) == (0, None)
        logs = broker.state.logs
        assert logs.topic_config("plain").retention_ms == 7_200_000  # applied at once
        assert logs.topic_config("plain").cleanup_policy == "compact"
        assert logs.topic_config("own").retention_ms == 5000  # the topic's override wins
        plain = by_name(await describe(client, 4, TOPIC, "plain"))["retention.ms"]
        assert (plain.value, plain.config_source) == ("7200000", DYNAMIC_DEFAULT)
        assert [(s.name, s.value, s.source) for s in plain.synonyms] == [
            ("log.retention.ms", "7200000", DYNAMIC_DEFAULT),
            ("log.retention.hours", "168", DEFAULT)]
        default = by_name(await describe(client, 4, BROKER, ""))
        assert sorted(default) == ["log.cleaner.threads", "log.retention.ms",
                                   "min.insync.replicas"]
        assert default["log.retention.ms"].config_source == DYNAMIC_DEFAULT
        await client.aclose()
    async with open_broker(log_dirs=data) as broker:  # a restart keeps and applies them
        assert broker.state.logs.topic_config("plain").retention_ms == 7_200_000
        assert broker.config.num_io_threads == 4
        client = await RawClient.connect(broker.host, broker.port)
        configs = by_name(await describe(client, 4, BROKER, "0"))
        policy = configs["log.cleanup.policy"]
        assert (policy.value, policy.config_source) == ("compact", DYNAMIC_BROKER)
        assert [(s.source) for s in policy.synonyms] == [DYNAMIC_BROKER, DEFAULT]
        assert configs["log.cleaner.threads"].config_source == DYNAMIC_DEFAULT
        assert await alter(client, 2, [(BROKER, "", {})]) == [(0, None)]  # legacy: replace all
        assert broker.state.logs.topic_config("plain").retention_ms == 604_800_000
        await client.aclose()


async def test_broker_loggers(client):
    logging.getLogger("trio_broker.broker.apis").setLevel(logging.NOTSET)
    result = await describe(client, 4, BROKER_LOGGER, "0")
    configs = by_name(result)
    assert configs["root"].config_source == 6
    assert await incremental(client, 1, BROKER_LOGGER, "0",
                             [("trio_broker.broker.apis", SET, "TRACE")]) == (0, None)
    assert logging.getLogger("trio_broker.broker.apis").level == 5
    result = await describe(client, 4, BROKER_LOGGER, "0", ["trio_broker.broker.apis"])
    assert [(c.name, c.value) for c in result.configs] == [("trio_broker.broker.apis", "TRACE")]
    assert await incremental(client, 1, BROKER_LOGGER, "0",
                             [("trio_broker.broker.apis", DELETE, None)]) == (0, None)
    assert logging.getLogger("trio_broker.broker.apis").level == logging.NOTSET
    assert await incremental(client, 1, BROKER_LOGGER, "0", [("root", DELETE, None)]) == (
        ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
    assert await incremental(client, 1, BROKER_LOGGER, "0", [("root", SET, "LOUD")]) == (
        ErrorCode.INVALID_CONFIG, "Cannot set the log level of root to LOUD as it is not a "
        "supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN")
    assert await incremental(client, 1, BROKER_LOGGER, "0", [("no.such.logger", SET, "INFO")]) == (
        ErrorCode.INVALID_CONFIG, "Logger no.such.logger does not exist!")
