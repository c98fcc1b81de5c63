"""KIP-714 client telemetry by raw requests: CLIENT_METRICS subscriptions as clients are told
them, pushes in every codec decoded, and Kafka's errors for bad pushes and bad subscriptions."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2

from tests.wire import RawClient
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.compression import Compression, compress
from trio_broker.protocol.errors import ErrorCode

CLIENT_METRICS = 16
SET, DELETE, APPEND = 0, 1, 2


def otlp(name: str, value: float, **attributes: str) -> bytes:
    """A MetricsData with one gauge point and one monotonic cumulative sum point."""
    data = metrics_pb2.MetricsData()
    scope = data.resource_metrics.add().scope_metrics.add()
    gauge = scope.metrics.add(name=name)
    point = gauge.gauge.data_points.add(as_double=value)
    point.attributes.extend(KeyValue(key=k, value=AnyValue(string_value=v))
                            for k, v in attributes.items())
    total = scope.metrics.add(name=name + ".total")
    total.sum.is_monotonic = True
    total.sum.aggregation_temporality = metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
    total.sum.data_points.add(as_int=7)
    return data.SerializeToString()


async def _alter(client: RawClient, name: str, *configs: tuple[str, int, str | None]):
    cls = request_class(ApiKey.IncrementalAlterConfigs)
    response = await client.request(ApiKey.IncrementalAlterConfigs, 1, validate_only=False,
                                     resources=[cls.AlterConfigsResource(
                                         resource_type=CLIENT_METRICS, resource_name=name,
                                         configs=[cls.AlterConfigsResource.AlterableConfig(
                                             name=k, config_operation=op, value=v)
                                             for k, op, v in configs])])
    [result] = response.responses
    return result.error_code, result.error_message


async def _describe(client: RawClient, name: str) -> dict[str, tuple[str | None, int]]:
    cls = request_class(ApiKey.DescribeConfigs)
    response = await client.request(ApiKey.DescribeConfigs, 4, include_synonyms=False,
                                    include_documentation=False, resources=[
                                        cls.DescribeConfigsResource(
                                            resource_type=CLIENT_METRICS, resource_name=name,
                                            configuration_keys=None)])
    [result] = response.results
    assert result.error_code == 0, result.error_message
    return {c.name: (c.value, c.config_source) for c in result.configs}


@pytest.fixture
async def client(trio_broker):
    c = await RawClient.connect(trio_broker.host, trio_broker.port)
    yield c
    await c.aclose()


async def test_subscriptions_round_trip_and_are_listed(client, trio_broker):
    assert await _alter(client, "producers", ("metrics", SET, "org.apache.kafka.producer."),
                        ("interval.ms", SET, "1000"),
                        ("match", SET, "client_id=app-.*")) == (0, None)
    assert await _alter(client, "producers", ("metrics", APPEND, "org.apache.kafka.consumer.")
                        ) == (0, None)
    assert await _describe(client, "producers") == {
        "metrics": ("org.apache.kafka.producer.,org.apache.kafka.consumer.", 7),
        "interval.ms": ("1000", 7), "match": ("client_id=app-.*", 7)}
    # a name never set is described with the defaults, as Kafka does
    assert await _describe(client, "other") == {"metrics": ("", 5), "interval.ms": ("300000", 5),
                                                "match": ("", 5)}
    for version, types in ((0, None), (1, [CLIENT_METRICS]), (1, [])):
        listed = await client.request(ApiKey.ListConfigResources, version, resource_types=types)
        assert listed.error_code == 0
        names = {(r.resource_type, r.resource_name) for r in listed.config_resources}
        assert (CLIENT_METRICS, "producers") in names
        assert (version, types) == (1, []) or names == {(CLIENT_METRICS, "producers")}
    refused = await client.request(ApiKey.ListConfigResources, 1, resource_types=[32])
    assert refused.error_code == ErrorCode.UNSUPPORTED_VERSION
    # persisted: a new store over the same file sees it
    from trio_broker.broker.server.client_metrics import ClientMetricsStore

    reloaded = ClientMetricsStore(trio_broker.state.client_metrics.path)
    assert reloaded.describe("producers")["interval.ms"] == "1000"
    # every key deleted: the subscription is gone
    assert await _alter(client, "producers", ("metrics", DELETE, None),
                        ("interval.ms", DELETE, None), ("match", DELETE, None)) == (0, None)
    listed = await client.request(ApiKey.ListConfigResources, 0)
    assert listed.config_resources == []


@pytest.mark.parametrize(("configs", "code", "message"), [
    ((("colour", SET, "red"),), ErrorCode.INVALID_REQUEST,
     "Unknown client metrics configuration: colour"),
    ((("interval.ms", SET, "50"),), ErrorCode.INVALID_REQUEST,
     "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    ((("match", SET, "hostname=x"),), ErrorCode.INVALID_CONFIG,
     "Illegal client matching pattern: hostname=x"),
    ((("match", SET, "client_id=(x"),), ErrorCode.INVALID_CONFIG, None),
    ((("interval.ms", APPEND, "5"),), ErrorCode.INVALID_CONFIG,
     "Config value append is not allowed for config key: interval.ms"),
])
async def test_bad_subscriptions_get_kafkas_errors(client, configs, code, message):
    got_code, got_message = await _alter(client, "bad", *configs)
    assert got_code == code
    if message is not None:
        assert got_message == message
    else:
        assert got_message.startswith("Client match pattern `client_id=(x` is not a valid")
    assert (await _alter(client, "", ("metrics", SET, "*")))[0] == ErrorCode.INVALID_REQUEST


async def _subscribe(client: RawClient, instance=None):
    return await client.request(ApiKey.GetTelemetrySubscriptions, 0, client_instance_id=instance)


async def _push(client: RawClient, answer, metrics: bytes, *, codec: int = 0,
                terminating: bool = False, subscription_id: int | None = None):
    response = await client.request(
        ApiKey.PushTelemetry, 0, client_instance_id=answer.client_instance_id,
        subscription_id=answer.subscription_id if subscription_id is None else subscription_id,
        terminating=terminating, compression_type=codec, metrics=metrics)
    return response.error_code


async def test_a_matching_client_is_told_the_subscription_and_every_codec_decodes(
        client, trio_broker, autojump_clock):
    assert await _alter(client, "raw", ("metrics", SET, "org.x.,org.y."),
                        ("interval.ms", SET, "200"), ("match", SET, "client_id=raw-.*")) == (
        0, None)
    assert await _alter(client, "fast", ("metrics", SET, "org.z."), ("interval.ms", SET, "100"),
                        ("match", SET, "client_id=nobody")) == (0, None)
    answer = await _subscribe(client)
    assert answer.error_code == 0
    assert (answer.requested_metrics, answer.push_interval_ms) == (["org.x.", "org.y."], 200)
    state = trio_broker.state.telemetry
    for codec in Compression:
        await trio.sleep(0.2)  # one push interval
        payload = otlp("org.x.queue.time", float(codec), node_id="0")
        assert await _push(client, answer, compress(codec, payload), codec=codec) == 0, codec
        series = state.instances[answer.client_instance_id].series
        assert series[("org_x_queue_time", (("node_id", "0"),))] == ["gauge", float(codec)]
        assert series[("org_x_queue_time_total", ())] == ["counter", 7.0]
    # a changed subscription: the push is refused, the client may ask again at once
    assert await _alter(client, "raw", ("metrics", SET, "*")) == (0, None)
    await trio.sleep(0.2)
    assert await _push(client, answer, b"") == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    again = await _subscribe(client, answer.client_instance_id)
    assert (again.error_code, again.requested_metrics) == (0, [""])  # "*": every metric


async def test_bad_pushes_get_kafkas_errors(client, trio_broker, autojump_clock):
    assert await _alter(client, "all", ("metrics", SET, "*"), ("interval.ms", SET, "1000")) == (
        0, None)
    answer = await _subscribe(client)
    early = await _subscribe(client, answer.client_instance_id)
    assert early.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    payload = otlp("org.m", 1.0)
    assert await _push(client, answer, payload, subscription_id=answer.subscription_id + 1) == (
        ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
    assert await _push(client, answer, payload) == ErrorCode.THROTTLING_QUOTA_EXCEEDED  # early
    await trio.sleep(1)
    assert await _push(client, answer, payload, codec=9) == (
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
    await trio.sleep(1)
    too_big = b"\0" * (trio_broker.state.config.telemetry_max_bytes + 1)
    assert await _push(client, answer, too_big) == ErrorCode.TELEMETRY_TOO_LARGE
    await trio.sleep(1)
    assert await _push(client, answer, b"\x28\xb5\x2f\xfd garbage", codec=Compression.ZSTD) == (
        ErrorCode.INVALID_RECORD)
    await trio.sleep(1)
    assert await _push(client, answer, b"\xff\xff not protobuf") == ErrorCode.INVALID_RECORD
    # terminating: accepted at once, then nothing more; the series go one interval later
    assert await _push(client, answer, payload, terminating=True) == 0
    assert await _push(client, answer, payload) == ErrorCode.INVALID_REQUEST
    state = trio_broker.state.telemetry
    instance = state.instances[answer.client_instance_id]
    assert instance.series
    assert state.expire(instance.terminated_ms + 999) == 0
    assert state.expire(instance.terminated_ms + 1000) == 1
    assert answer.client_instance_id not in state.instances


async def test_a_client_gone_without_a_terminating_push_expires_after_its_connection(
        trio_broker, autojump_clock):
    """A killed client sends no terminating push: its series go one push interval after the
    connection it pushed on closed; a client that reconnects and pushes again stays."""
    first = await RawClient.connect(trio_broker.host, trio_broker.port)
    assert await _alter(first, "all", ("metrics", SET, "*"), ("interval.ms", SET, "1000")) == (
        0, None)
    answer = await _subscribe(first)
    assert await _push(first, answer, otlp("org.m", 1.0)) == 0
    state = trio_broker.state.telemetry
    instance = state.instances[answer.client_instance_id]
    await trio.sleep(0.6)
    await first.aclose()
    await trio.testing.wait_all_tasks_blocked()  # the broker saw the connection close
    assert instance.disconnected_ms
    # back within the interval, on a new connection: kept
    second = await RawClient.connect(trio_broker.host, trio_broker.port)
    await trio.sleep(0.5)
    assert await _push(second, answer, otlp("org.m", 2.0)) == 0
    assert instance.disconnected_ms == 0
    await second.aclose()
    await trio.testing.wait_all_tasks_blocked()  # the broker saw the connection close
    assert instance.disconnected_ms
    assert state.expire(instance.disconnected_ms + 999) == 0
    assert state.expire(instance.disconnected_ms + 1000) == 1
