"""The blocking client against trio-broker, librdkafka's mock cluster (three brokers, leaders
spread over them) and servers that misbehave on purpose."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from tests.mock_cluster import MockCluster
from trio_broker.client.blocking import (
    EARLIEST,
    LATEST,
    BlockingClient,
    BrokerConnection,
    ConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    OffsetAndMetadata,
    TopicPartition,
    next_fetch_offset,
    source_name,
)
from trio_broker.client.core import errors
from trio_broker.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.records import build_batch, decode_batches


def values(records: bytes) -> list[bytes | None]:
    return [r.value for _, batch in decode_batches(records) for r in batch]


def test_topics_produce_offsets_and_fetch(kafka_broker, unique_topic):
    name = unique_topic("bc")
    with BlockingClient(kafka_broker.bootstrap_servers, timeout_s=10) as client:
        client.create_topic(name, 3, 1, {"retention.ms": "600000"})
        with pytest.raises(errors.TopicAlreadyExistsError,
                           match=rf"^cannot create topic '{name}': TOPIC_ALREADY_EXISTS"):
            client.create_topic(name, 1)
        info = client.topic(name)
        assert sorted(info.partitions) == [0, 1, 2]
        tps = client.partitions_for([name])
        assert tps == [TopicPartition(name, p) for p in range(3)]
        acked = client.produce({tp: build_batch([(None, b"v%d" % tp.partition)] * 2)
                                for tp in tps}, acks=-1)
        assert {tp: (r.error, r.base_offset) for tp, r in acked.items()} == dict.fromkeys(
            tps, (0, 0))
        unacked = client.produce({tps[0]: build_batch([(None, b"late")])}, acks=0)
        assert unacked[tps[0]] == (0, -1, -1)
        assert client.list_offsets(dict.fromkeys(tps, EARLIEST)) == dict.fromkeys(tps, 0)
        # acks=0: the broker may still be appending; the next request on the connection
        # is answered after it
        assert client.list_offsets(dict.fromkeys(tps, LATEST)) == {tps[0]: 3, tps[1]: 2,
                                                                  tps[2]: 2}
        # pipelined: both fetches are on the wire before either answer is read, and the
        # later answer may be collected first
        first = client.send_fetch(tps[0], 0, max_bytes=1 << 20)
        second = client.send_fetch(tps[0], 2, max_bytes=1 << 20)
        late = client.receive_fetch(second)
        early = client.receive_fetch(first)
        assert values(early.records) == [b"v0", b"v0", b"late"]
        assert values(late.records) == [b"late"]
        assert next_fetch_offset(early.records, 0) == 3 == early.high_watermark
        many = client.fetch_many(dict.fromkeys(tps, 0), max_wait_ms=0)
        assert {f.tp: values(f.records) for f in many} == {
            tps[0]: [b"v0", b"v0", b"late"], tps[1]: [b"v1"] * 2, tps[2]: [b"v2"] * 2}
        gone = client.fetch(tps[1], 99, max_bytes=1 << 20)
        assert gone.error == ErrorCode.OFFSET_OUT_OF_RANGE
        configs = {c.name: c for c in client.describe_configs(name)}
        assert configs["retention.ms"].value == "600000"
        assert source_name(configs["retention.ms"].source) == "DYNAMIC_TOPIC_CONFIG"
        assert source_name(configs["cleanup.policy"].source) == "DEFAULT_CONFIG"
        client.create_partitions(name, 4)
        assert len(client.topic(name).partitions) == 4
        client.delete_topic(name)
        with pytest.raises(errors.UnknownTopicOrPartitionError,
                           match=rf"^topic '{name}' does not exist$"):
            client.partitions_for([name])
        with pytest.raises(errors.UnknownTopicOrPartitionError, match="does not exist"):
            client.list_offsets({TopicPartition(name, 0): LATEST})


def test_groups_and_committed_offsets(kafka_broker, unique_topic):
    name = kafka_broker.create_topic(unique_topic("g"), 2)
    group = unique_topic("group")
    tp0, tp1 = TopicPartition(name, 0), TopicPartition(name, 1)
    with BlockingClient(kafka_broker.bootstrap_servers) as client:
        assert client.committed(group) == {}
        dead = client.describe_group(group)
        assert (dead.state, dead.members) == ("Dead", [])
        client.commit(group, {tp0: 5, tp1: OffsetAndMetadata(7, "note")})
        assert client.committed(group) == {tp0: (5, ""), tp1: (7, "note")}
        assert client.committed(group, [tp1]) == {tp1: OffsetAndMetadata(7, "note")}
        assert any(g.group_id == group for g in client.list_groups())
        assert client.describe_group(group).state == "Empty"


def test_versions_are_negotiated_per_connection(kafka_broker):
    with BrokerConnection("127.0.0.1", kafka_broker.broker.port) as conn:
        assert conn.versions[ApiKey.Fetch] == tuple(SUPPORTED_VERSIONS[ApiKey.Fetch])
        assert conn.version_for(ApiKey.Fetch) == 12  # the client's own maximum
        assert conn.version_for(ApiKey.Metadata) == 12
        body = conn.call(ApiKey.Metadata, 1, topics=[])  # a pinned version, for tools
        assert body.brokers[0].port == kafka_broker.broker.port


def test_leader_routing_on_a_three_broker_cluster(mock_cluster: MockCluster):
    topic = mock_cluster.spread_topic("spread")  # (the mock lacks CreateTopics)
    with BlockingClient(mock_cluster.bootstrap_servers, timeout_s=10) as client:
        info = client.topic(topic)
        leaders = {p.leader for p in info.partitions.values()}
        assert len(leaders) > 1
        tps = [TopicPartition(topic, p) for p in info.partitions]
        acked = client.produce({tp: build_batch([(b"k", b"%d" % tp.partition)]) for tp in tps},
                               acks=-1)
        assert all(r.error == 0 for r in acked.values())
        assert client.list_offsets(dict.fromkeys(tps, LATEST)) == dict.fromkeys(tps, 1)
        for tp in tps:
            assert values(client.fetch(tp, 0, max_bytes=1 << 20).records) == [
                b"%d" % tp.partition]
        assert len({(c.host, c.port) for c, _ in client.by_leader(tps).values()}) == len(
            leaders)


@pytest.fixture
def silent_server() -> Iterator[tuple[str, int, list[socket.socket]]]:
    """A listener that accepts connections and never answers (what the client may then see
    is up to each test)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield "127.0.0.1", listener.getsockname()[1], accepted
    stop.set()
    listener.close()
    for conn in accepted:
        conn.close()
    thread.join(5)


def test_a_broker_that_never_answers_times_out(silent_server):
    host, port, _ = silent_server
    with pytest.raises(KafkaTimeoutError,
                       match=rf"^no answer from the broker at {host}:{port} to ApiVersions "
                             "in time$") as info:
        BrokerConnection(host, port, timeout_s=0.3)
    assert info.value.retriable


def test_a_garbage_answer_closes_the_connection(silent_server):
    host, port, accepted = silent_server

    def answer_garbage() -> None:
        while not accepted:
            threading.Event().wait(0.01)
        accepted[0].recv(1024)
        accepted[0].sendall(((1 << 30) + 1).to_bytes(4, "big"))

    threading.Thread(target=answer_garbage, daemon=True).start()
    with pytest.raises(errors.InvalidResponseError, match="response frame of 1073741825 bytes"):
        BrokerConnection(host, port, timeout_s=5)


def test_unreachable_brokers_and_bad_settings_are_one_line_errors(free_port):
    with pytest.raises(KafkaConnectionError, match=rf"^no broker reachable at 127\.0\.0\.1:"
                                                   rf"{free_port}: cannot connect") as info:
        BlockingClient(f"127.0.0.1:{free_port}", retries=0).metadata()
    assert "\n" not in str(info.value)
    assert isinstance(info.value, KafkaError)
    with pytest.raises(ConfigError, match="bad bootstrap server 'h:x'"):
        BlockingClient("h:x")
    with pytest.raises(ConfigError, match=r"unknown client config 'ssl\.keymanager\.algorithm'"):
        BlockingClient("h:1", config={"ssl.keymanager.algorithm": "x"})
    with pytest.raises(ConfigError, match=r"^ssl\.keystore\.location x: No such file"):
        BlockingClient("h:1", config={"ssl.keystore.location": "x"})
    with pytest.raises(ConfigError, match=r"needs sasl\.username and sasl\.password"):
        BlockingClient("SASL_PLAINTEXT://h:1", config={"sasl.mechanism": "PLAIN"})
    with pytest.raises(ConfigError, match=r"sasl\.mechanism GSSAPI is not supported"):
        BlockingClient("h:1", config={"security.protocol": "SASL_SSL"})
