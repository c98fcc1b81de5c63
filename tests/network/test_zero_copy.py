"""Zero-copy fetch: records go from segment files to plain sockets with ``sendfile``.

Real clients consume big and small, plain and compressed records from several partitions
through the ``sendfile`` path, and every byte is checked; the broker's
``kafka_server_socket_server_metrics_sendfile_byte`` counter proves the path was taken (and
that a TLS listener stays on the copy path). A topic deleted while a response is still being
sent (the client reads slowly) is sent whole from the descriptor the response holds, and every
region is closed by the path that sends or drops it. A response in parts is the response in
bytes.
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import time
from collections.abc import Callable

import confluent_kafka
import pytest
import trio
import trio.testing

from tests.wire import RawClient, fetch_body, produce_one, records_of
from trio_broker.broker.metrics import BrokerMetrics
from trio_broker.broker.network.send_file import send_parts
from trio_broker.broker.storage import FileRegion
from trio_broker.protocol.api_keys import ApiKey, is_flexible
from trio_broker.protocol.messages import (
    RequestHeader,
    decode_response,
    encode_response,
    encode_response_parts,
    make_response,
    response_type,
)
from trio_broker.protocol.records import build_batch
from trio_broker.testing import TEST_DEFAULTS, ThreadedBroker

SENDFILE = "kafka_server_socket_server_metrics_sendfile_byte_total"
OUT = "kafka_server_socket_server_metrics_outgoing_byte_total"
PARTITIONS = 3
BIG = 300_000
SMALL = 100

Records = dict[int, list[bytes]]  # partition -> values in offset order


def counter(metrics: BrokerMetrics, name: str) -> float:
    return metrics.registry.get_sample_value(name) or 0.0


def produce(bootstrap: str, topic: str, compression: str, extra: dict[str, str] | None = None
            ) -> Records:
    """Random (incompressible) values: per partition 100 small, then 4 big, then 100 small."""
    sent: Records = {p: [] for p in range(PARTITIONS)}
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                         "compression.type": compression, "linger.ms": 5,
                                         **(extra or {})})
    for p in range(PARTITIONS):
        for size, count in ((SMALL, 100), (BIG, 4), (SMALL, 100)):
            for _ in range(count):
                value = os.urandom(size)
                sent[p].append(value)
                producer.produce(topic, value, partition=p)
        producer.flush(30)
    assert producer.flush(30) == 0
    return sent


def consume_confluent(bootstrap: str, topic: str, total: int,
                      extra: dict[str, str] | None = None) -> Records:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "zc",
                                         "enable.auto.commit": False, **(extra or {})})
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: Records = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, got.values())) < total and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got[message.partition()].append(message.value())
    finally:
        consumer.close()
    return got


def consume_kafka_python(bootstrap: str, topic: str, total: int) -> Records:
    import kafka

    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    consumer.assign([kafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    got: Records = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, got.values())) < total and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                got[tp.partition].extend(r.value for r in records)
    finally:
        consumer.close()
    return got


def consume_aiokafka(bootstrap: str, topic: str, total: int) -> Records:
    import aiokafka

    async def run() -> Records:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap,
                                             enable_auto_commit=False)
        await consumer.start()
        got: Records = {p: [] for p in range(PARTITIONS)}
        try:
            consumer.assign([aiokafka.TopicPartition(topic, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + 60
            while sum(map(len, got.values())) < total and time.monotonic() < deadline:
                for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                    got[tp.partition].extend(r.value for r in records)
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


CONSUMERS: dict[str, Callable[[str, str, int], Records]] = {
    "confluent-kafka": consume_confluent,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
}


@pytest.fixture
def broker(tmp_path):
    broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(tmp_path / "data")}).start()
    yield broker
    broker.stop()


@pytest.mark.parametrize(("client", "compression"), [
    ("confluent-kafka", "none"), ("confluent-kafka", "lz4"), ("kafka-python", "gzip"),
    ("aiokafka", "none")])
def test_real_clients_consume_through_sendfile(broker, client, compression):
    topic = broker.create_topic(f"zc-{compression}", PARTITIONS)
    sent = produce(broker.bootstrap_servers, topic, compression)
    assert broker.broker is not None
    metrics = broker.broker.state.metrics
    before, out_before = counter(metrics, SENDFILE), counter(metrics, OUT)
    total = sum(map(len, sent.values()))
    got = CONSUMERS[client](broker.bootstrap_servers, topic, total)
    assert {p: len(v) for p, v in got.items()} == {p: len(v) for p, v in sent.items()}
    assert got == sent
    by_sendfile = counter(metrics, SENDFILE) - before
    # every big record went out in a region (random bytes do not compress)
    assert by_sendfile >= PARTITIONS * 4 * BIG
    assert counter(metrics, OUT) - out_before >= by_sendfile


def test_tls_listener_stays_on_the_copy_path(tmp_path, tls_files):
    broker = ThreadedBroker(**{**TEST_DEFAULTS, "listeners": "SSL://127.0.0.1:0",
                               "ssl_certfile": str(tls_files.server_pem),
                               "log_dirs": str(tmp_path / "data")}).start()
    try:
        tls = {"security.protocol": "SSL", "ssl.ca.location": str(tls_files.ca_pem)}
        topic = broker.create_topic("zc-tls", PARTITIONS)
        sent = produce(broker.bootstrap_servers, topic, "none", tls)
        got = consume_confluent(broker.bootstrap_servers, topic,
                                sum(map(len, sent.values())), tls)
        assert got == sent
        assert broker.broker is not None
        metrics = broker.broker.state.metrics
        assert counter(metrics, OUT) > PARTITIONS * 4 * BIG
        assert counter(metrics, SENDFILE) == 0
    finally:
        broker.stop()


async def _slow_reader(host: str, port: int) -> RawClient:
    """A connection whose receive buffer is tiny, so a big response stays in flight."""
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await sock.connect((host, port))
    return RawClient(trio.SocketStream(sock))


async def test_a_topic_deleted_mid_send_is_sent_whole(trio_broker):
    state = trio_broker.state
    state.logs.create_topic("doomed", 1, {})
    writer = await RawClient.connect(trio_broker.host, trio_broker.port)
    values = []
    for _ in range(12):  # 12 batches of ~0.9 MB: far more than the socket buffers hold
        batch_values = [os.urandom(100_000) for _ in range(9)]
        values.extend(batch_values)
        code, _ = await produce_one(writer, "doomed", build_batch(
            [(None, v) for v in batch_values]), acks=1)
        assert code == 0
    log = state.logs.get_log("doomed", 0)
    segment_file = log.directory / "00000000000000000000.log"
    assert segment_file.exists()
    metrics = state.metrics
    reader = await _slow_reader(trio_broker.host, trio_broker.port)
    body = fetch_body("doomed", {0: 0}, partition_max_bytes=32 << 20, max_bytes=32 << 20)
    await reader.send(ApiKey.Fetch, 11, body=body)
    with trio.fail_after(10):  # the response has started: its size prefix has arrived
        first = await reader.stream.receive_some(4)
        reader.conn.receive_data(first)
    assert counter(metrics, SENDFILE) == 0  # counted once the send is done: still in flight
    state.logs.delete_topic("doomed")
    assert not segment_file.exists()
    with trio.fail_after(30):
        frame = await reader.read_frame()
    assert frame is not None
    _, answer = decode_response(ApiKey.Fetch, 11, frame)
    [topic] = answer.responses
    [part] = topic.partitions
    assert part.error_code == 0
    assert [r.value for r in records_of(part.records)] == values
    assert counter(metrics, SENDFILE) >= len(values) * 100_000
    await reader.aclose()
    await writer.aclose()


async def test_send_parts_copies_a_region_to_a_stream_that_is_not_a_socket(tmp_path):
    path = tmp_path / "data"
    path.write_bytes(b"0123456789")
    fd = os.open(path, os.O_RDONLY)
    try:
        region = FileRegion.of(fd, 2, 5)
    finally:
        os.close(fd)  # the region holds its own descriptor
    send, receive = trio.testing.memory_stream_pair()
    assert await send_parts(send, [b"head", region, b"tail"]) == 0
    region.close()
    await send.aclose()
    got = b""
    while data := await receive.receive_some():
        got += data
    assert got == b"head23456tail"



async def test_a_region_whose_file_was_truncated_raises_instead_of_a_short_frame(tmp_path):
    path = tmp_path / "segment"
    path.write_bytes(os.urandom(300_000))
    fd = os.open(path, os.O_RDWR)
    region = FileRegion.of(fd, 0, 300_000)
    os.ftruncate(fd, 100_000)  # a log truncated below the range after it was read
    os.close(fd)
    a, b = trio.socket.socketpair()
    sender, reader = trio.SocketStream(a), trio.SocketStream(b)
    received = 0

    async def drain() -> None:
        nonlocal received
        while data := await reader.receive_some(1 << 20):
            received += len(data)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        with pytest.raises(OSError, match="truncated"):
            await send_parts(sender, [b"head", region, b"tail"])
        await sender.aclose()
    region.close()
    assert received == 4 + 100_000  # the connection is closed, never padded or finished

@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_a_response_in_parts_is_the_response_in_bytes(tmp_path, version):
    path = tmp_path / "segment"
    records = [os.urandom(40_000), os.urandom(50_000)]
    path.write_bytes(b"xx" + records[0] + records[1])
    fd = os.open(path, os.O_RDONLY)
    regions = [FileRegion.of(fd, 2, 40_000), FileRegion.of(fd, 40_002, 50_000)]
    os.close(fd)
    header = RequestHeader(ApiKey.Fetch, version, 7, "c", is_flexible(ApiKey.Fetch, version), 0)
    part_type = response_type(ApiKey.Fetch).FetchableTopicResponse.PartitionData

    def body(values):
        parts = [part_type(partition_index=i, error_code=0, high_watermark=9,
                           last_stable_offset=9, log_start_offset=0, aborted_transactions=[],
                           preferred_read_replica=-1, records=v) for i, v in enumerate(values)]
        topic = response_type(ApiKey.Fetch).FetchableTopicResponse(topic="t", partitions=parts)
        return make_response(ApiKey.Fetch, version, throttle_time_ms=0, error_code=0,
                             session_id=0, responses=[topic])

    parts = encode_response_parts(header, body(regions))
    assert [type(p) for p in parts] == [bytes, FileRegion, bytes, FileRegion, bytes]
    joined = b"".join(p.read() if isinstance(p, FileRegion) else p for p in parts)
    assert joined == encode_response(header, body(records))
    for region in regions:
        region.close()


async def test_every_file_region_is_closed_by_whoever_drops_or_sends_it(trio_broker,
                                                                         monkeypatch):
    """Sent, parked and read again, or written after its client left: each region's
    descriptor is closed on that path, not left to the finaliser."""
    left_open: list[int] = []

    def finaliser(region: FileRegion) -> None:
        if region.fd >= 0:
            left_open.append(region.size)
            region.close()

    monkeypatch.setattr(FileRegion, "__del__", finaliser)
    state = trio_broker.state
    state.logs.create_topic("regions", 1, {})
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    for _ in range(3):
        code, _ = await produce_one(client, "regions", build_batch(
            [(None, os.urandom(100_000)) for _ in range(3)]), acks=1)
        assert code == 0
    big = {"partition_max_bytes": 4 << 20, "max_bytes": 4 << 20}
    # answered at once: its regions are sent
    _, answer = decode_response(ApiKey.Fetch, 11, await _fetch_frame(
        client, fetch_body("regions", {0: 0}, **big)))
    assert len(records_of(answer.responses[0].partitions[0].records)) == 9
    sent = counter(state.metrics, SENDFILE)
    assert sent >= 900_000
    # too little for min_bytes: the first read is dropped when parked, the second sent
    _, answer = decode_response(ApiKey.Fetch, 11, await _fetch_frame(
        client, fetch_body("regions", {0: 0}, min_bytes=10 << 20, max_wait_ms=100, **big)))
    assert len(records_of(answer.responses[0].partitions[0].records)) == 9
    assert counter(state.metrics, SENDFILE) >= 2 * sent
    # parked, and its client gone before the answer: written to a closed peer, then closed
    leaving = await RawClient.connect(trio_broker.host, trio_broker.port)
    await leaving.send(ApiKey.Fetch, 11, body=fetch_body("regions", {0: 0}, min_bytes=10 << 20,
                                                         max_wait_ms=100, **big))
    await trio.sleep(0.02)
    await leaving.aclose()
    await trio.sleep(0.3)
    await client.aclose()
    gc.collect()
    assert left_open == []


async def _fetch_frame(client: RawClient, body) -> bytes:
    await client.send(ApiKey.Fetch, 11, body=body)
    with trio.fail_after(10):
        frame = await client.read_frame()
    assert frame is not None
    return frame


async def test_parts_on_a_tcp_socket_arrive_whole_and_in_order_past_a_full_buffer(tmp_path):
    """``send_parts`` on a real loopback TCP connection: a header larger than the socket
    buffer, a region and a tail wait for a slow reader (partial sends, EAGAIN) and arrive byte
    for byte, in order."""
    data = os.urandom(3_000_000)
    path = tmp_path / "segment"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    region = FileRegion.of(fd, 1000, 2_000_000)
    os.close(fd)
    head, tail = os.urandom(700_000), b"\0\0\0"
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = trio.socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    await client.connect(listener.getsockname())
    server, _ = await listener.accept()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    received = bytearray()
    expected = head + data[1000:2_001_000] + tail

    async def drain() -> None:
        while len(received) < len(expected):
            await trio.sleep(0.001)  # a slow reader: the sender meets a full buffer
            chunk = await client.recv(256 * 1024)
            if not chunk:
                return
            received.extend(chunk)

    try:
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(drain)
                sent = await send_parts(trio.SocketStream(server), [head, region, tail])
    finally:
        region.close()
        for s in (server, client, listener):
            s.close()
    assert sent == 2_000_000
    assert bytes(received) == expected
