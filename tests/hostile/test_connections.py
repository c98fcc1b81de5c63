"""Hostile peers over real sockets: slowloris, half-open, never-reading, connection floods.

Each test checks three things: the abuse is limited as configured, other clients are served
throughout, and nothing leaks (connection count, quota slots, file descriptors).
"""

from __future__ import annotations

import socket
import struct
from typing import Any

import trio
import trio.testing

from tests.hostile.process_stats import open_fds, vm_rss_kb
from tests.wire import RawClient, size_prefix
from trio_broker import open_broker
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.records import build_batch

API_VERSIONS = ApiKey.ApiVersions


def value(broker: Any, name: str, *labels: str) -> float:
    return getattr(broker.state.metrics, name).get(*labels)


async def served(broker: Any, *, local_address: str | None = None) -> bool:
    """A fresh, well-behaved client gets an answer."""
    stream = await trio.open_tcp_stream(broker.host, broker.port, local_address=local_address)
    client = RawClient(stream)
    try:
        with trio.fail_after(10):
            return (await client.request(API_VERSIONS, 0)).error_code == 0
    finally:
        await client.aclose()


async def wait_until(predicate: Any, timeout_s: float = 10) -> None:
    """Poll a broker gauge (it offers no event for "every connection task has finished")."""
    with trio.fail_after(timeout_s):
        while not predicate():  # noqa: ASYNC110
            await trio.sleep(0.005)


def metadata_frame() -> bytes:
    return RawClient(None).encode(ApiKey.Metadata, 5, topics=[],  # type: ignore[arg-type]
                                  allow_auto_topic_creation=False)[1]


async def test_slowloris_frame_is_cut_off_after_the_idle_time(tmp_path, autojump_clock):
    async with open_broker(log_dirs=str(tmp_path), connections_max_idle_ms=10_000) as broker:
        slow = await RawClient.connect(broker.host, broker.port)
        frame = metadata_frame()
        start = trio.current_time()
        sent = 0
        with trio.fail_after(60):
            try:
                for byte in frame:  # one byte per second, forever if allowed
                    await slow.send_raw(bytes([byte]))
                    sent += 1
                    if sent == 5:
                        assert await served(broker)  # others are served meanwhile
                    await trio.sleep(1)
            except trio.BrokenResourceError:
                pass
            assert await slow.is_closed_by_peer()
        assert sent < len(frame)
        assert 10 <= trio.current_time() - start <= 12
        assert value(broker, "connections_closed", "idle_timeout") == 1
        assert await served(broker)


async def test_half_open_and_half_closed_connections(tmp_path, autojump_clock):
    async with open_broker(log_dirs=str(tmp_path), connections_max_idle_ms=5_000,
                           max_connections_per_ip=3) as broker:
        # A peer that vanished without a FIN after a partial size prefix: idle timeout.
        ghosts = [await RawClient.connect(broker.host, broker.port) for _ in range(2)]
        for ghost in ghosts:
            await ghost.send_raw(b"\x00\x00")
        # A peer that half-closed mid-frame: nothing more can come, closed at once.
        half = await RawClient.connect(broker.host, broker.port)
        await half.send_raw(size_prefix(100) + b"xx")
        await half.stream.send_eof()
        assert await half.is_closed_by_peer()
        assert trio.current_time() < 1
        start = trio.current_time()
        for ghost in ghosts:
            assert await ghost.is_closed_by_peer()
        assert 5 <= trio.current_time() - start <= 6
        assert value(broker, "connections") == 0
        # every quota slot came back: three more connections from this address are served
        assert all([await served(broker) for _ in range(3)])


async def test_client_that_never_reads_is_bounded_and_closed(tmp_path, autojump_clock):
    idle_s = 30
    async with open_broker(log_dirs=str(tmp_path), connections_max_idle_ms=idle_s * 1000,
                           num_partitions=1) as broker:
        topic = "big"
        broker.state.logs.create_topic(topic, 1, {})
        log = broker.state.logs.get_log(topic, 0)
        batch = bytearray(build_batch([(None, bytes(512 * 1024))]))
        from trio_broker.protocol.batch import read_batch_header

        log.append(batch, read_batch_header(batch), now_ms=0)
        hog = RawClient(await trio.open_tcp_stream(broker.host, broker.port))
        hog.stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        fetch = fetch_frame(topic)
        requests = 2000  # ~1 GB of responses if the broker were to buffer them
        written = 0

        async def flood() -> None:
            nonlocal written
            try:
                for _ in range(requests):
                    await hog.send_raw(fetch)
                    written += len(fetch)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

        rss_before_kb = vm_rss_kb()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(flood)
            await trio.testing.wait_all_tasks_blocked(cushion=0.01)
            # Everything is stuck on full socket buffers: the broker reads no more requests
            # and holds at most one response for this connection.
            bytes_out = value(broker, "bytes_out")
            assert bytes_out < 64 * 512 * 1024  # what socket buffers can hold, not 1 GB
            assert value(broker, "bytes_in") <= 2 * 65536  # at most a read or two
            assert vm_rss_kb() - rss_before_kb < 32 * 1024
            assert broker.state.metrics.request_queue_size.get() == 0
            assert written < requests * len(fetch)
            assert await served(broker)
            assert value(broker, "connections_closed", "idle_timeout") == 0
            await trio.sleep(idle_s + 0.5)  # virtual time
            assert value(broker, "connections_closed", "idle_timeout") == 1
            await hog.aclose()
        assert value(broker, "connections") == 0


def fetch_frame(topic: str) -> bytes:
    from trio_broker.protocol.api_keys import request_class

    cls = request_class(ApiKey.Fetch)
    part = cls.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                         log_start_offset=-1, partition_max_bytes=1 << 20)
    return RawClient(None).encode(  # type: ignore[arg-type]
        ApiKey.Fetch, 11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=[cls.FetchTopic(topic=topic, partitions=[part])], forgotten_topics_data=[],
        rack_id="")[1]


async def test_flood_of_connections_from_one_address(tmp_path, fd_limit):
    limit = 50
    attempts = 5000
    fds_before = open_fds()
    async with open_broker(log_dirs=str(tmp_path), max_connections_per_ip=limit) as broker:
        streams: list[trio.SocketStream] = []
        answered = closed = 0

        async def probe(stream: trio.SocketStream) -> None:
            nonlocal answered, closed
            client = RawClient(stream)
            try:
                await client.send(API_VERSIONS, 0)
                with trio.fail_after(20):
                    frame = await client.read_frame()
            except (trio.BrokenResourceError, ConnectionResetError):
                frame = None
            if frame is None:
                closed += 1
            else:
                answered += 1

        with trio.fail_after(60):
            start = trio.current_time()
            for i in range(attempts):
                streams.append(await trio.open_tcp_stream(broker.host, broker.port))
                if i == attempts // 2:  # another address is unaffected by the flood
                    assert await served(broker, local_address="127.0.0.2")
            async with trio.open_nursery() as nursery:
                for stream in streams:
                    nursery.start_soon(probe, stream)
            elapsed = trio.current_time() - start
        assert (answered, closed) == (limit, attempts - limit)
        assert value(broker, "connections_refused", "per_ip") == attempts - limit
        assert value(broker, "connections") == limit
        assert elapsed < 60
        for stream in streams:
            await stream.aclose()
        await wait_until(lambda: value(broker, "connections") == 0)
        assert await served(broker)
    assert open_fds() <= fds_before + 1


async def test_flood_of_connects_and_disconnects_leaks_nothing(tmp_path, fd_limit):
    fds_before = open_fds()
    cycles = 2000
    async with open_broker(log_dirs=str(tmp_path), max_connections_per_ip=20) as broker:

        async def churn(worker: int) -> None:
            for i in range(cycles // 10):
                stream = await trio.open_tcp_stream(broker.host, broker.port)
                kind = (i + worker) % 4
                try:
                    if kind == 1:
                        await stream.send_all(b"\x00\x00\x01")  # partial frame, then FIN
                    elif kind == 2:
                        await stream.send_all(metadata_frame()[:-3])
                    elif kind == 3:
                        # abortive close: RST instead of FIN
                        stream.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                          struct.pack("ii", 1, 0))
                except trio.BrokenResourceError:
                    pass
                await stream.aclose()

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for worker in range(10):
                    nursery.start_soon(churn, worker)
                assert await served(broker, local_address="127.0.0.2")
            await wait_until(lambda: value(broker, "connections") == 0)
        # No quota slot leaked: 20 simultaneous connections from this address still fit.
        clients = [await RawClient.connect(broker.host, broker.port) for _ in range(20)]
        for client in clients:
            assert (await client.request(API_VERSIONS, 0)).error_code == 0
            await client.aclose()
        await wait_until(lambda: value(broker, "connections") == 0)
        refused = value(broker, "connections_refused", "per_ip")
        assert refused <= cycles  # bursts may briefly exceed 20, never leak
    assert open_fds() <= fds_before + 1
