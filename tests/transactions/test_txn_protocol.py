"""The transactional APIs on the wire: Kafka's error for every request out of order, and the
coordinator's state untouched by it; read_committed fetches; Describe/ListTransactions."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from tests.wire import LATEST, RawClient, create_topic, fetch_body
from trio_broker.client.core.offsets import list_offsets_request, parse_list_offsets
from trio_broker.client.core.produce import parse_produce, produce_request
from trio_broker.client.core.structs import TopicPartition
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode as E
from trio_broker.protocol.records import build_batch

_APT = request_class(ApiKey.AddPartitionsToTxn)
_TOC = request_class(ApiKey.TxnOffsetCommit)


async def _client(broker) -> RawClient:
    client = await RawClient.connect(broker.host, broker.port)
    await create_topic(client, "t", 2)
    return client


async def _init(client: RawClient, tid: str, timeout_ms: int = 60_000, version: int = 4,
                expected: tuple[int, int] = (-1, -1)) -> tuple[int, int, int]:
    r = await client.request(ApiKey.InitProducerId, version, transactional_id=tid,
                             transaction_timeout_ms=timeout_ms, producer_id=expected[0],
                             producer_epoch=expected[1])
    return r.error_code, r.producer_id, r.producer_epoch


async def _add(client: RawClient, tid: str, pid: int, epoch: int,
               parts: dict[str, list[int]], version: int = 3) -> dict[tuple[str, int], int]:
    topics = [_APT.AddPartitionsToTxnTopic(name=t, partitions=p) for t, p in parts.items()]
    r = await client.request(ApiKey.AddPartitionsToTxn, version,
                             v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                             v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics)
    return {(t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


async def _end(client: RawClient, tid: str, pid: int, epoch: int, commit: bool,
               version: int = 3) -> int:
    r = await client.request(ApiKey.EndTxn, version, transactional_id=tid, producer_id=pid,
                             producer_epoch=epoch, committed=commit)
    return int(r.error_code)


async def _produce(client: RawClient, tid: str | None, pid: int, epoch: int, seq: int,
                   partition: int = 0, value: bytes = b"v") -> int:
    batch = build_batch([(b"k", value)], producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, is_transactional=True)
    body = produce_request(7, [("t", partition, batch)], acks=-1, timeout_ms=5000,
                           transactional_id=tid)
    [result] = parse_produce(await client.request(ApiKey.Produce, 7, body=body)).values()
    return int(result.error)


async def _describe(client: RawClient, tid: str) -> Any:
    r = await client.request(ApiKey.DescribeTransactions, 0, transactional_ids=[tid])
    [state] = r.transaction_states
    return state


async def test_requests_out_of_order_get_kafkas_errors(trio_broker):
    client = await _client(trio_broker)
    assert await _add(client, "x", 1, 0, {"t": [0]}) == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert (await _init(client, "x", timeout_ms=10**9))[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert (await _describe(client, "x")).error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    error, pid, epoch = await _init(client, "x")
    assert (error, epoch) == (0, 0)
    assert await _end(client, "x", pid, epoch, True) == E.INVALID_TXN_STATE  # nothing begun
    assert await _add(client, "x", pid, epoch, {"t": [0], "nope": [0]}) == {
        ("t", 0): E.OPERATION_NOT_ATTEMPTED, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert await _add(client, "x", pid, epoch + 1, {"t": [0]}) == {("t", 0): E.PRODUCER_FENCED}
    assert await _add(client, "x", pid, epoch + 1, {"t": [0]}, version=1) == {
        ("t", 0): E.INVALID_PRODUCER_EPOCH}
    assert await _add(client, "x", pid + 1, epoch, {"t": [0]}) == {
        ("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    state = await _describe(client, "x")
    assert (state.transaction_state, state.topics) == ("Empty", [])
    # a transactional write before its partition was added, or without the transactional id
    assert await _produce(client, "x", pid, epoch, 0) == E.INVALID_TXN_STATE
    assert await _add(client, "x", pid, epoch, {"t": [0]}) == {("t", 0): 0}
    assert await _produce(client, None, pid, epoch, 0) == E.INVALID_TXN_STATE
    assert await _produce(client, "x", pid, epoch, 0, partition=1) == E.INVALID_TXN_STATE
    assert await _produce(client, "x", pid, epoch, 0) == 0
    # offsets before AddOffsetsToTxn
    r = await client.request(ApiKey.TxnOffsetCommit, 3, transactional_id="x", group_id="g",
                             producer_id=pid, producer_epoch=epoch, generation_id=-1,
                             member_id="", topics=[_TOC.TxnOffsetCommitRequestTopic(
                                 name="t", partitions=[_TOC.TxnOffsetCommitRequestTopic
                                                       .TxnOffsetCommitRequestPartition(
                                                           partition_index=0,
                                                           committed_offset=1,
                                                           committed_metadata=None)])])
    assert r.topics[0].partitions[0].error_code == E.INVALID_TXN_STATE
    state = await _describe(client, "x")
    assert state.transaction_state == "Ongoing"
    assert [(t.topic, t.partitions) for t in state.topics] == [("t", [0])]
    assert await _end(client, "x", pid, epoch, False) == 0
    assert await _end(client, "x", pid, epoch, False) == 0  # a retry of a completed abort
    assert await _end(client, "x", pid, epoch, True) == E.INVALID_TXN_STATE
    assert (await _describe(client, "x")).transaction_state == "CompleteAbort"
    # KIP-360: the producer names its id and epoch to get the next epoch; a stranger is fenced
    assert (await _init(client, "x", expected=(pid, epoch + 5)))[0] == E.PRODUCER_FENCED
    assert (await _init(client, "x", expected=(pid, epoch + 5), version=3))[0] == \
        E.INVALID_PRODUCER_EPOCH
    assert await _init(client, "x", expected=(pid, epoch)) == (0, pid, epoch + 1)
    # the old epoch's writes are refused
    assert await _produce(client, "x", pid, epoch, 1) == E.INVALID_PRODUCER_EPOCH
    await client.aclose()


async def test_read_committed_fetch_lists_aborted_transactions(trio_broker):
    client = await _client(trio_broker)
    _, pid, epoch = await _init(client, "r")
    for i, commit in enumerate((False, True)):
        assert await _add(client, "r", pid, epoch, {"t": [0]}) == {("t", 0): 0}
        assert await _produce(client, "r", pid, epoch, i, value=b"%d" % i) == 0
        assert await _end(client, "r", pid, epoch, commit) == 0
    assert await _add(client, "r", pid, epoch, {"t": [0]}) == {("t", 0): 0}
    assert await _produce(client, "r", pid, epoch, 2, value=b"open") == 0
    body = fetch_body("t", {0: 0}, version=11)
    body.isolation_level = 1
    r = await client.request(ApiKey.Fetch, 11, body=body)
    [part] = r.responses[0].partitions
    # aborted at 0, its marker at 1; committed at 2, marker at 3; open from 4
    assert part.last_stable_offset == 4
    assert part.high_watermark == 5
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, 0)]
    body.isolation_level = 0
    r = await client.request(ApiKey.Fetch, 11, body=body)
    [part] = r.responses[0].partitions
    assert part.aborted_transactions in (None, [])
    assert part.last_stable_offset == 4
    r = await client.request(ApiKey.ListTransactions, 1, state_filters=["Ongoing"],
                             producer_id_filters=[], duration_filter=-1)
    assert [(s.transactional_id, s.transaction_state) for s in r.transaction_states] == [
        ("r", "Ongoing")]
    r = await client.request(ApiKey.ListTransactions, 0, state_filters=["Bogus"],
                             producer_id_filters=[])
    assert r.unknown_state_filters == ["Bogus"]
    await client.aclose()


async def test_batched_verification_form(trio_broker):
    client = await _client(trio_broker)
    _, pid, epoch = await _init(client, "v")
    assert await _add(client, "v", pid, epoch, {"t": [0]}) == {("t", 0): 0}
    txn = _APT.AddPartitionsToTxnTransaction(
        transactional_id="v", producer_id=pid, producer_epoch=epoch, verify_only=True,
        topics=[_APT.AddPartitionsToTxnTransaction.AddPartitionsToTxnTopic(
            name="t", partitions=[0, 1])])
    r = await client.request(ApiKey.AddPartitionsToTxn, 4, transactions=[txn])
    [result] = r.results_by_transaction
    assert {(t.name, p.partition_index): p.partition_error_code for t in result.topic_results
            for p in t.results_by_partition} == {("t", 0): 0, ("t", 1): E.INVALID_TXN_STATE}
    await client.aclose()


async def _until(client: RawClient, tid: str, check) -> Any:
    """Describe ``tid`` until ``check`` holds: each round trip gives the coordinator's worker
    threads (fsync) real time while Trio's clock stands still."""
    for _ in range(500):
        state = await _describe(client, tid)
        if check(state):
            return state
    raise AssertionError(f"{tid}: {state}")


async def test_timeout_aborts_on_trios_clock(trio_broker, mock_clock):
    client = await _client(trio_broker)
    _, pid, epoch = await _init(client, "slow", timeout_ms=60_000)
    assert await _add(client, "slow", pid, epoch, {"t": [0]}) == {("t", 0): 0}
    assert await _produce(client, "slow", pid, epoch, 0) == 0
    log = trio_broker.state.logs.get_log("t", 0)
    mock_clock.jump(55)
    await trio.testing.wait_all_tasks_blocked()
    assert (await _describe(client, "slow")).transaction_state == "Ongoing"
    assert log.last_stable_offset == 0
    # the timeout passed, and the next abort pass (every 10 s) ends it with a bumped epoch
    mock_clock.jump(10)
    state = await _until(client, "slow", lambda s: s.transaction_state == "CompleteAbort")
    assert state.producer_epoch == epoch + 1
    assert log.last_stable_offset == log.log_end_offset
    assert await _end(client, "slow", pid, epoch, True) == E.PRODUCER_FENCED
    await client.aclose()


@pytest.mark.broker_config(transactional_id_expiration_ms=1000,
                           transaction_remove_expired_transaction_cleanup_interval_ms=500)
async def test_idle_ids_expire(trio_broker, mock_clock):
    client = await _client(trio_broker)
    _, pid, epoch = await _init(client, "idle")
    assert await _add(client, "idle", pid, epoch, {"t": [0]}) == {("t", 0): 0}
    # an ongoing transaction is not idle: it is kept (and aborted by its timeout later)
    trio_broker.state.transactions.now_ms = lambda: 2**50
    mock_clock.jump(1)
    await trio.testing.wait_all_tasks_blocked()
    assert (await _describe(client, "idle")).error_code == 0
    assert await _end(client, "idle", pid, epoch, False) == 0
    trio_broker.state.transactions.now_ms = lambda: 2**51
    mock_clock.jump(1)
    await _until(client, "idle", lambda s: s.error_code == E.TRANSACTIONAL_ID_NOT_FOUND)
    assert (await _init(client, "idle"))[0] == 0  # the id starts afresh
    await client.aclose()


async def test_list_offsets_honours_the_isolation_level(trio_broker):
    client = await _client(trio_broker)
    _, pid, epoch = await _init(client, "lo")
    assert await _add(client, "lo", pid, epoch, {"t": [0]}) == {("t", 0): 0}
    assert await _produce(client, "lo", pid, epoch, 0) == 0
    offsets = {}
    for isolation in (0, 1):
        body = list_offsets_request(5, {TopicPartition("t", 0): LATEST},
                                    isolation_level=isolation)
        [(code, found)] = parse_list_offsets(
            await client.request(ApiKey.ListOffsets, 5, body=body)).values()
        offsets[isolation] = (code, found.offset)
    assert offsets == {0: (0, 1), 1: (0, 0)}
    await client.aclose()
