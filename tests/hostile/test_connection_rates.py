"""Connection floods against the creation rates (KIP-612), over real sockets on 127.0.0.1.

``max.connection.creation.rate`` (broker-wide and per listener) delays the acceptor: every
connection of a flood is served, later. An address's ``connection_creation_rate`` quota closes its
connections over the rate after the throttle time. ``quota.window.num=1`` makes the burst one
second of quota, so a flood of a few dozen connections shows the rate; the autojump clock skips
the waits.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from tests.wire import RawClient
from trio_broker import open_broker
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.message_types import IncrementalAlterConfigsRequest

FLOOD = 40
_Q = request_class(ApiKey.AlterClientQuotas).EntryData
_IR = IncrementalAlterConfigsRequest.AlterConfigsResource
BROKER, SET, DELETE = 4, 0, 1


async def flood(broker: Any, n: int) -> list[float | None]:
    """Open ``n`` connections at once, each asking ApiVersions; the time each was answered
    (None: the broker closed it unanswered)."""
    answered: list[float | None] = [None] * n

    async def one(i: int) -> None:
        client = await RawClient.connect(broker.host, broker.port)
        try:
            await client.send(ApiKey.ApiVersions, 0)
            frame = await client.read_frame()
            if frame is not None:
                answered[i] = trio.current_time()
            else:
                assert await client.is_closed_by_peer()
        except (trio.BrokenResourceError, ConnectionResetError):
            pass
        finally:
            await client.aclose()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for i in range(n):
                nursery.start_soon(one, i)
    return answered


async def alter_broker(broker: Any, ops: list[tuple[str, int, str | None]]) -> None:
    client = await RawClient.connect(broker.host, broker.port)
    body = IncrementalAlterConfigsRequest(resources=[_IR(
        resource_type=BROKER, resource_name="",
        configs=[_IR.AlterableConfig(name=k, config_operation=op, value=v)
                 for k, op, v in ops])], validate_only=False)
    response = await client.request(ApiKey.IncrementalAlterConfigs, 1, body=body)
    await client.aclose()
    assert [r.error_code for r in response.responses] == [0]


async def alter_ip_quota(broker: Any, ip: str | None, rate: float | None) -> None:
    client = await RawClient.connect(broker.host, broker.port)
    answer = await client.request(ApiKey.AlterClientQuotas, 1, validate_only=False, entries=[
        _Q(entity=[_Q.EntityData(entity_type="ip", entity_name=ip)],
           ops=[_Q.OpData(key="connection_creation_rate", value=float(rate or 0),
                          remove=rate is None)])])
    await client.aclose()
    assert [e.error_code for e in answer.entries] == [0]


def spread(times: list[float | None]) -> float:
    served = [t for t in times if t is not None]
    return max(served) - min(served)


async def test_broker_rate_delays_the_flood_and_serves_it_all(tmp_path, autojump_clock):
    async with open_broker(log_dirs=str(tmp_path), max_connection_creation_rate=10,
                           quota_window_num=1) as broker:
        assert "max.connection.creation.rate" not in broker.config.ignored_keys()
        times = await flood(broker, FLOOD)
        assert None not in times  # delayed, never refused
        # a burst of 10, then 30 at 10/s
        assert 2.5 <= spread(times) <= 4.5
        assert broker.state.metrics.connections_refused.get("per_ip_rate") == 0

        # Lifted at once by IncrementalAlterConfigs: the next flood is answered together.
        await trio.sleep(2)
        await alter_broker(broker, [("max.connection.creation.rate", SET, "2147483647")])
        assert spread(await flood(broker, FLOOD)) < 0.5
        # ... and set again, with no restart either.
        await alter_broker(broker, [("max.connection.creation.rate", SET, "5")])
        await trio.sleep(2)
        times = await flood(broker, 20)
        assert None not in times
        assert 2.5 <= spread(times) <= 4.5  # 5 at once, 15 at 5/s
        # Deleted, the static value applies again.
        await alter_broker(broker, [("max.connection.creation.rate", DELETE, None)])
        await trio.sleep(2)
        assert 2.5 <= spread(await flood(broker, FLOOD)) <= 4.5


async def test_listener_rate_delays_only_its_listener(tmp_path, autojump_clock):
    async with open_broker({
            "log.dirs": str(tmp_path), "quota.window.num": 1,
            "listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
            "listener.name.other.max.connection.creation.rate": "10"}) as broker:
        assert "listener.name.other.max.connection.creation.rate" not in (
            broker.config.ignored_keys())
        ports = {name: port for name, _, port in broker.listeners}
        free = await flood(_At(broker.host, ports["PLAINTEXT"]), FLOOD)
        assert spread(free) < 0.5
        limited = await flood(_At(broker.host, ports["OTHER"]), FLOOD)
        assert None not in limited
        assert 2.5 <= spread(limited) <= 4.5


class _At:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port


async def test_ip_quota_closes_connections_over_the_rate(tmp_path, autojump_clock):
    async with open_broker(log_dirs=str(tmp_path), quota_window_num=1) as broker:
        await alter_ip_quota(broker, "127.0.0.1", 5)
        await trio.sleep(1)  # the quota's own connection is forgotten
        times = await flood(broker, 20)
        served = sum(t is not None for t in times)
        assert 5 <= served <= 7  # the burst, and what refills while the flood lasts
        refused = broker.state.metrics.connections_refused.get("per_ip_rate")
        assert refused == 20 - served

        # Under the rate, every connection works.
        await trio.sleep(2)
        for _ in range(10):
            assert None not in await flood(broker, 1)
            await trio.sleep(0.25)

        # The default IP entity applies to an address without its own quota.
        await alter_ip_quota(broker, "127.0.0.1", None)
        await alter_ip_quota(broker, None, 5)
        await trio.sleep(2)
        assert sum(t is not None for t in await flood(broker, 20)) <= 7

        # Removing the quota lifts the limit at once.
        await alter_ip_quota(broker, None, None)
        assert None not in await flood(broker, 20)


async def test_max_connections_is_raised_without_a_restart(tmp_path, autojump_clock):
    async with open_broker(log_dirs=str(tmp_path), max_connections=2) as broker:
        held = [await RawClient.connect(broker.host, broker.port) for _ in range(2)]
        for client in held:
            assert (await client.request(ApiKey.ApiVersions, 0)).error_code == 0
        waiting = await RawClient.connect(broker.host, broker.port)  # in the backlog
        await waiting.send(ApiKey.ApiVersions, 0)
        with trio.move_on_after(5):
            await waiting.read_frame()
            raise AssertionError("a third connection was served under max.connections=2")
        # The change itself needs a connection: one of the held ones asks for it.
        body = IncrementalAlterConfigsRequest(resources=[_IR(
            resource_type=BROKER, resource_name="", configs=[_IR.AlterableConfig(
                name="max.connections", config_operation=SET, value="3")])], validate_only=False)
        response = await held[0].request(ApiKey.IncrementalAlterConfigs, 1, body=body)
        assert [r.error_code for r in response.responses] == [0]
        with trio.fail_after(5):
            assert await waiting.read_frame() is not None
        for client in (*held, waiting):
            await client.aclose()
