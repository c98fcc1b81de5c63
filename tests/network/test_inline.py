"""Small APIs answered in the connection's own task: what Kafka's metrics say about them, and
what must not change (muting, order, fairness between connections)."""

from __future__ import annotations

import time

import pytest
import trio

from tests.wire import RawClient
from trio_broker.broker.apis import registry
from trio_broker.broker.metrics.idle import IdleMeter
from trio_broker.broker.network.connection import YIELD_BYTES, YIELD_FRAME_MIN
from trio_broker.broker.network.request_handler import INLINE_APIS
from trio_broker.broker.server.context import DEFERRED
from trio_broker.protocol.api_keys import ApiKey


async def connect(broker) -> RawClient:
    return await RawClient.connect(broker.host, broker.port)


def exposed(broker, name: str, request: str) -> float:
    """One sample of the broker's Prometheus exposition, by metric name and request label."""
    prefix = f'{name}{{request="{request}"}} '
    for line in broker.state.metrics.expose().decode().splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    raise AssertionError(f"{prefix!r} not exposed")


def test_the_inline_apis_are_the_small_ones_that_do_not_park():
    assert {ApiKey.ApiVersions, ApiKey.Metadata, ApiKey.Produce, ApiKey.Heartbeat,
            ApiKey.OffsetCommit} <= INLINE_APIS
    # these wait in a purgatory (long polls, group rendezvous): they keep the handler pool
    assert not {ApiKey.Fetch, ApiKey.JoinGroup, ApiKey.SyncGroup} & INLINE_APIS


async def test_inline_requests_never_wait_in_the_request_queue(trio_broker):
    client = await connect(trio_broker)
    for _ in range(20):
        assert (await client.request(ApiKey.ApiVersions, 0)).error_code == 0
        await client.request(ApiKey.Metadata, 1, topics=[])
        # ListGroups goes through the queue and a handler task
        assert (await client.request(ApiKey.ListGroups, 0)).error_code == 0
    queue_ms = "kafka_network_requestmetrics_requestqueuetimems"
    for api in ("ApiVersions", "Metadata", "ListGroups"):
        assert exposed(trio_broker, f"{queue_ms}_count", api) == 20
    assert exposed(trio_broker, f"{queue_ms}_sum", "ApiVersions") == 0
    assert exposed(trio_broker, f"{queue_ms}_sum", "Metadata") == 0
    assert exposed(trio_broker, f"{queue_ms}_sum", "ListGroups") > 0
    assert exposed(trio_broker, "kafka_network_requestmetrics_localtimems_sum", "Metadata") > 0
    await client.aclose()


def test_inline_handling_counts_as_one_handlers_work():
    meter = IdleMeter(2)
    t0 = time.monotonic_ns()
    meter.begin(0, t0)
    meter.begin(1, t0)
    # both handlers waited a second; meanwhile half a second of requests were answered inline
    meter.add_busy(t0 + 100_000_000, t0 + 600_000_000)
    assert meter.ratio(t0 + 1_000_000_000) == pytest.approx(0.75, abs=0.01)
    meter.end(0, t0 + 1_000_000_000)
    meter.end(1, t0 + 1_000_000_000)
    assert meter.ratio(t0 + 1_000_000_000) == pytest.approx(0.75, abs=0.01)


async def test_connection_stays_muted_while_its_inline_request_waits(trio_broker,
                                                                     monkeypatch):
    release = trio.Event()
    handle_metadata = registry.HANDLERS[ApiKey.Metadata]

    async def waiting(ctx, request):
        await release.wait()
        return await handle_metadata(ctx, request)

    monkeypatch.setitem(registry.HANDLERS, int(ApiKey.Metadata), waiting)
    client = await connect(trio_broker)
    first, data = client.encode(ApiKey.Metadata, 1, topics=[])
    second, more = client.encode(ApiKey.ApiVersions, 0)
    await client.send_raw(data + more)
    with trio.move_on_after(0.2):
        await client.read_frame()
        raise AssertionError("answered before the waiting request was")
    # the second request was not read, let alone answered, while the first waited
    assert trio_broker.state.metrics.request_metrics.count(ApiKey.ApiVersions) == 0
    other = await connect(trio_broker)  # another connection is served meanwhile
    assert (await other.request(ApiKey.ApiVersions, 0)).error_code == 0
    release.set()
    assert (await client.receive(ApiKey.Metadata, 1))[0] == first
    assert (await client.receive(ApiKey.ApiVersions, 0))[0] == second
    await client.aclose()
    await other.aclose()


class _Steps(trio.abc.Instrument):
    """Counts the steps (runs between two yields) of connection tasks."""

    def __init__(self) -> None:
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith("._serve_connection"):
            self.steps += 1


async def test_pipelined_inline_requests_yield_once_per_burst_of_sixteen(trio_broker):
    client = await connect(trio_broker)
    await client.request(ApiKey.ApiVersions, 0)
    n = 200
    frames = b"".join(client.encode(ApiKey.ApiVersions, 0)[1] for _ in range(n))
    steps = _Steps()
    trio.lowlevel.add_instrument(steps)
    try:
        await client.send_raw(frames)  # one write: most frames arrive in one receive
        for _ in range(n):
            await client.receive(ApiKey.ApiVersions, 0)
    finally:
        trio.lowlevel.remove_instrument(steps)
    # a yield per 16 small frames at least: a connection pipelining requests cannot hold the
    # loop for its whole buffer (answered inline, each response is written without a yield)...
    per_yield = YIELD_BYTES // YIELD_FRAME_MIN
    assert per_yield == 16
    assert steps.steps >= n // per_yield
    # ...and not a yield (a pass of the event loop) per frame
    assert steps.steps < n // 4
    await client.aclose()


async def test_a_connection_pipelining_a_long_burst_lets_another_be_answered(trio_broker):
    busy, other = await connect(trio_broker), await connect(trio_broker)
    await busy.request(ApiKey.ApiVersions, 0)
    await other.request(ApiKey.ApiVersions, 0)
    n = 2000
    metrics = trio_broker.state.metrics.request_metrics
    before = metrics.count(ApiKey.Metadata)
    frames = b"".join(busy.encode(ApiKey.Metadata, 1, topics=[])[1] for _ in range(n))
    await busy.send_raw(frames)  # one write, read at once: 2,000 frames in the buffer
    assert (await other.request(ApiKey.ApiVersions, 0)).error_code == 0
    # answered while the busy connection's burst was still being answered
    assert metrics.count(ApiKey.Metadata) - before < n
    for _ in range(n):
        await busy.receive(ApiKey.Metadata, 1)
    await busy.aclose()
    await other.aclose()


async def test_a_parked_inline_request_is_answered_through_its_processor(trio_broker,
                                                                        monkeypatch):
    parked = []

    async def parking(ctx, request):
        parked.append(ctx)
        return DEFERRED

    monkeypatch.setitem(registry.HANDLERS, int(ApiKey.Heartbeat), parking)
    client = await connect(trio_broker)
    await client.request(ApiKey.ApiVersions, 0)
    first, a = client.encode(ApiKey.ApiVersions, 0)
    second, b = client.encode(ApiKey.ApiVersions, 0)
    beat, c = client.encode(ApiKey.Heartbeat, 0, group_id="g", generation_id=1, member_id="m")
    last, d = client.encode(ApiKey.ApiVersions, 0)
    await client.send_raw(a + b + c + d)
    # the answers held for one write go out before the parked request waits...
    with trio.fail_after(10):
        assert (await client.receive(ApiKey.ApiVersions, 0))[0] == first
        assert (await client.receive(ApiKey.ApiVersions, 0))[0] == second
    with trio.move_on_after(0.2):
        await client.read_frame()
        raise AssertionError("answered past the parked request")
    # ...and the connection stays muted until its answer comes back, in request order
    assert len(parked) == 1
    parked[0].respond(parked[0].response(error_code=0))
    with trio.fail_after(10):
        got, body = await client.receive(ApiKey.Heartbeat, 0)
        assert (await client.receive(ApiKey.ApiVersions, 0))[0] == last
    assert (got, body.error_code) == (beat, 0)
    # never queued for a handler task; the wait is its remote time, as a delayed operation's
    assert exposed(trio_broker, "kafka_network_requestmetrics_requestqueuetimems_sum",
                   "Heartbeat") == 0
    assert exposed(trio_broker, "kafka_network_requestmetrics_remotetimems_sum",
                   "Heartbeat") >= 200
    await client.aclose()
