"""Under ``trio.testing.MockClock(autojump_threshold=0)`` the in-loop broker's waits are virtual:
a long poll, a group session timeout, a transaction timeout and retention by time complete
without real waiting."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from tests.wire import EARLIEST, RawClient, fetch, list_offsets, produce
from trio_broker.broker.lifecycle import Broker
from trio_broker.client.core.groups import (
    JoinResult,
    describe_groups_request,
    join_group_request,
    parse_describe_groups,
    parse_join_group,
    parse_sync_group,
    sync_group_request,
)
from trio_broker.client.core.produce import init_producer_id_request, parse_init_producer_id
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.messages import make_request
from trio_broker.protocol.records import build_batch
from trio_broker.protocol.structs import message_class

#: real seconds a virtual wait may take on a loaded machine
REAL_BUDGET_S = 10


async def connect(broker: Broker) -> RawClient:
    return await RawClient.connect(broker.host, broker.port)


async def test_a_long_poll_ends_at_its_deadline_without_waiting(
        trio_broker: Broker, autojump_clock: trio.testing.MockClock) -> None:
    trio_broker.state.logs.create_topic("t", 1, {})
    client = await connect(trio_broker)
    real, virtual = time.monotonic(), trio.current_time()
    parts = await fetch(client, "t", {0: 0}, max_wait_ms=300_000, min_bytes=1)
    assert parts[0].error == 0
    assert trio.current_time() - virtual >= 300
    assert time.monotonic() - real < REAL_BUDGET_S
    await client.aclose()


async def test_a_silent_member_leaves_at_its_session_timeout(
        trio_broker: Broker, autojump_clock: trio.testing.MockClock) -> None:
    client = await connect(trio_broker)

    async def join(member: str) -> JoinResult:
        return parse_join_group(await client.request(ApiKey.JoinGroup, 5, body=join_group_request(
            5, "g", member, session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
            protocols=[("range", b"")])))

    first = await join("")
    assert first.error == ErrorCode.MEMBER_ID_REQUIRED
    joined = await join(first.member_id)
    assert joined.error == 0
    code, _ = parse_sync_group(await client.request(ApiKey.SyncGroup, 3, body=sync_group_request(
        3, "g", joined.generation, joined.member_id,
        protocol_name="range", assignments={joined.member_id: b""})))
    assert code == 0
    real = time.monotonic()
    await trio.sleep(31)
    [(code, group)] = parse_describe_groups(await client.request(
        ApiKey.DescribeGroups, 3, body=describe_groups_request(3, ["g"])))
    assert code == 0
    assert group.members == []
    assert group.state == "Empty"
    assert time.monotonic() - real < REAL_BUDGET_S
    await client.aclose()


async def test_an_open_transaction_is_aborted_at_its_timeout(
        trio_broker: Broker, autojump_clock: trio.testing.MockClock) -> None:
    trio_broker.state.logs.create_topic("t", 1, {})
    client = await connect(trio_broker)
    code, producer_id, epoch = parse_init_producer_id(await client.request(
        ApiKey.InitProducerId, 1, body=init_producer_id_request(
            1, transactional_id="tx", transaction_timeout_ms=10_000)))
    assert code == 0
    request_cls: Any = message_class(ApiKey.AddPartitionsToTxn, "request")
    topic = request_cls.AddPartitionsToTxnTransaction.AddPartitionsToTxnTopic(name="t",
                                                                             partitions=[0])
    added = await client.request(ApiKey.AddPartitionsToTxn, 3, body=make_request(
        ApiKey.AddPartitionsToTxn, 3, v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=producer_id, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[topic]))
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0] \
        .partition_error_code == 0
    real = time.monotonic()
    await trio.sleep(70)  # the timeout, then the coordinator's abort check
    described = await client.request(ApiKey.DescribeTransactions, 0, body=make_request(
        ApiKey.DescribeTransactions, 0, transactional_ids=["tx"]))
    assert described.transaction_states[0].transaction_state == "CompleteAbort"
    assert time.monotonic() - real < REAL_BUDGET_S
    await client.aclose()


@pytest.mark.broker_config(log_retention_check_interval_ms=1000)
async def test_retention_by_time_follows_the_mock_clock(
        trio_broker: Broker, autojump_clock: trio.testing.MockClock) -> None:
    trio_broker.state.logs.create_topic("t", 1, {"retention.ms": "60000"})
    client = await connect(trio_broker)
    batch = build_batch([(b"k", b"v")], timestamps=[trio_broker.state.now_ms()])
    assert (await produce(client, "t", {0: batch}))[0] == (0, 0)
    real = time.monotonic()
    await trio.sleep(62)
    assert (await list_offsets(client, "t", [0], EARLIEST))[0][:2] == (0, 1)
    assert time.monotonic() - real < REAL_BUDGET_S
    await client.aclose()
