"""Failure and lifecycle: an idempotent producer whose connections keep being cut, and a Trio
app that runs the broker and the clients in one nursery and stops them all by cancelling it."""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Any

import trio

import trio_broker
from tests.hostile.process_stats import fd_targets
from trio_broker.client import TopicPartition, open_consumer, open_producer
from trio_broker.client.trio.admin import NewTopic, open_admin


class CuttingProxy:
    """Forwards loopback TCP to a broker, closing each connection after ``cut_every`` bytes
    (both directions counted), mid-frame when that is where the count runs out."""

    def __init__(self, target_port: int, cut_every: int) -> None:
        self.target_port = target_port
        self.cut_every = cut_every
        self.cutting = True
        self.cuts = 0

    async def serve(self, listener: trio.SocketListener) -> None:
        async with listener, trio.open_nursery() as nursery:
            while True:
                stream = await listener.accept()
                nursery.start_soon(self._relay, stream)

    async def _relay(self, client: trio.SocketStream) -> None:
        budget = [self.cut_every]
        server = await trio.open_tcp_stream("127.0.0.1", self.target_port)
        async with client, server, trio.open_nursery() as nursery:

            async def pump(source: trio.SocketStream, sink: trio.SocketStream) -> None:
                while True:
                    try:
                        data = await source.receive_some(65536)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        break
                    if not data:
                        break
                    if self.cutting and len(data) >= budget[0]:
                        self.cuts += 1
                        with contextlib.suppress(trio.BrokenResourceError,
                                                 trio.ClosedResourceError):
                            await sink.send_all(data[:budget[0]])
                        break
                    if self.cutting:
                        budget[0] -= len(data)
                    try:
                        await sink.send_all(data)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        break
                nursery.cancel_scope.cancel()

            nursery.start_soon(pump, client, server)
            nursery.start_soon(pump, server, client)


async def test_idempotent_producer_keeps_order_across_severed_connections(
        tmp_path: Path) -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    proxy_port = listener.socket.getsockname()[1]
    per_partition = 1500
    with trio.fail_after(90):
        async with trio_broker.open_broker(
                log_dirs=str(tmp_path), group_initial_rebalance_delay_ms=0,
                advertised_listeners=f"PLAINTEXT://127.0.0.1:{proxy_port}") as broker:
            proxy = CuttingProxy(broker.listeners[0][2], cut_every=15_000)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(proxy.serve, listener)
                bootstrap = f"127.0.0.1:{proxy_port}"
                async with open_admin(bootstrap) as admin:
                    await admin.create_topics([NewTopic("cut", 2, 1)])
                async with open_producer(bootstrap, batch_size=1024, linger_ms=1,
                                         retry_backoff_ms=5, reconnect_backoff_ms=5,
                                         reconnect_backoff_max_ms=20) as producer:
                    futures = [await producer.send_soon("cut", f"{p}:{i}".encode() * 4,
                                                        partition=p)
                               for i in range(per_partition) for p in (0, 1)]
                    await producer.flush()
                    assert all(f.exception() is None for f in futures)
                    metrics = producer.metrics()
                    assert metrics["record-retry-total"] > 0
                    assert metrics["record-send-total"] == 2 * per_partition
                assert proxy.cuts >= 5, "the proxy should have cut connections mid-stream"
                proxy.cutting = False
                async with open_consumer(bootstrap_servers=bootstrap,
                                         auto_offset_reset="earliest") as consumer:
                    consumer.assign([TopicPartition("cut", 0), TopicPartition("cut", 1)])
                    got: dict[int, list[bytes]] = {0: [], 1: []}
                    while sum(map(len, got.values())) < 2 * per_partition:
                        for tp, records in (await consumer.getmany(timeout_ms=5000)).items():
                            got[tp.partition].extend(r.value for r in records)
                    assert await consumer.end_offsets([TopicPartition("cut", 0)]) == {
                        TopicPartition("cut", 0): per_partition}
                nursery.cancel_scope.cancel()
    for p in (0, 1):
        assert got[p] == [f"{p}:{i}".encode() * 4 for i in range(per_partition)]


def _open_sockets() -> set[str]:
    return {target for target in fd_targets() if target.startswith("socket:")}


def _task_names(task: Any) -> list[str]:
    names = [task.name]
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            names.extend(_task_names(child))
    return names


async def test_app_runs_broker_and_clients_in_one_nursery_and_cancels_them(
        tmp_path: Path) -> None:
    sockets_before = _open_sockets()
    tasks_before = sorted(_task_names(trio.lowlevel.current_root_task()))
    received: list[bytes] = []
    done = trio.Event()
    with trio.fail_after(30):
        async with trio.open_nursery() as app:
            broker = await app.start(functools.partial(
                trio_broker.serve, log_dirs=str(tmp_path), group_initial_rebalance_delay_ms=0,
                listeners="PLAINTEXT://127.0.0.1:0"))

            async def consume(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
                async with open_consumer("events", bootstrap_servers=broker.bootstrap_servers,
                                         group_id="app", auto_offset_reset="earliest",
                                         heartbeat_interval_ms=100) as consumer:
                    task_status.started()
                    async for record in consumer:
                        received.append(record.value)
                        if len(received) == 100:
                            done.set()

            async def produce() -> None:
                async with open_producer(broker.bootstrap_servers) as producer:
                    for i in range(100):
                        await producer.send_soon("events", str(i).encode())
                    await trio.sleep_forever()  # keeps its connections until cancelled

            await app.start(consume)
            app.start_soon(produce)
            await done.wait()
            assert len(_task_names(trio.lowlevel.current_root_task())) > len(tasks_before) + 5
            assert len(_open_sockets() - sockets_before) >= 4  # listener, clients, broker side
            app.cancel_scope.cancel()
    assert sorted(received) == sorted(str(i).encode() for i in range(100))
    assert sorted(_task_names(trio.lowlevel.current_root_task())) == tasks_before
    assert not _open_sockets() - sockets_before  # every socket the app opened is closed
