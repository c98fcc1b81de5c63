"""Transaction version 2 (KIP-890 part 2) on the wire, and part 1's defence for version-1
producers: the finalized feature in ApiVersions, Produce v12 adding its partition itself, EndTxn
v5's epoch bump (its retries, an abort with nothing added, an exhausted epoch moving to a new
producer id), TxnOffsetCommit v5 without AddOffsetsToTxn, and Produce v11's INVALID_TXN_STATE
for a partition outside the transaction unless ``transaction.partition.verification.enable`` is
false. No librdkafka release speaks version 2 (confluent-kafka stays on Produce v10 and EndTxn
v3), so raw requests stand in for a Kafka 4.x Java producer."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from tests.wire import RawClient, create_topic
from trio_broker.broker.coordinator.txn_metadata import TransactionMetadata, TxnState
from trio_broker.client.core.produce import parse_produce, produce_request
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode as E
from trio_broker.protocol.records import build_batch

_TOC = request_class(ApiKey.TxnOffsetCommit)
_OF = request_class(ApiKey.OffsetFetch)
MAX_EPOCH = 32766


async def _client(broker) -> RawClient:
    client = await RawClient.connect(broker.host, broker.port)
    await create_topic(client, "t", 2)
    return client


async def _init(client: RawClient, tid: str) -> tuple[int, int]:
    r = await client.request(ApiKey.InitProducerId, 5, transactional_id=tid,
                             transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1)
    assert r.error_code == 0
    return r.producer_id, r.producer_epoch


async def _produce(client: RawClient, tid: str, pid: int, epoch: int, seq: int, *,
                   version: int = 12, partition: int = 0) -> int:
    batch = build_batch([(b"k", b"v")], producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, is_transactional=True)
    body = produce_request(version, [("t", partition, batch)], acks=-1, timeout_ms=5000,
                           transactional_id=tid)
    [result] = parse_produce(await client.request(ApiKey.Produce, version, body=body)).values()
    return int(result.error)


async def _end(client: RawClient, tid: str, pid: int, epoch: int, commit: bool,
               version: int = 5) -> tuple[int, int, int]:
    r = await client.request(ApiKey.EndTxn, version, transactional_id=tid, producer_id=pid,
                             producer_epoch=epoch, committed=commit)
    return r.error_code, r.producer_id, r.producer_epoch


async def _describe(client: RawClient, tid: str) -> Any:
    r = await client.request(ApiKey.DescribeTransactions, 0, transactional_ids=[tid])
    [state] = r.transaction_states
    return state


async def test_api_versions_finalizes_transaction_version_2(trio_broker):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    r = await client.request(ApiKey.ApiVersions, 3, client_software_name="raw",
                             client_software_version="1")
    assert {(f.name, f.min_version, f.max_version) for f in r.supported_features} == {
        ("transaction.version", 0, 2), ("group.version", 0, 1), ("share.version", 0, 1),
        ("eligible.leader.replicas.version", 0, 1)}
    assert {(f.name, f.min_version_level, f.max_version_level)
            for f in r.finalized_features} == {
        ("transaction.version", 2, 2), ("group.version", 1, 1), ("share.version", 1, 1),
        ("eligible.leader.replicas.version", 1, 1)}
    assert r.finalized_features_epoch >= 0  # a client ignores finalized features at -1
    versions = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert versions[ApiKey.EndTxn] == (0, 5)
    assert versions[ApiKey.Produce][1] >= 12
    assert versions[ApiKey.TxnOffsetCommit][1] >= 5


async def test_produce_v12_adds_its_partition_and_end_txn_v5_bumps_the_epoch(trio_broker):
    client = await _client(trio_broker)
    pid, epoch = await _init(client, "tv2")
    assert await _produce(client, "tv2", pid, epoch, 0) == 0  # no AddPartitionsToTxn
    assert await _produce(client, "tv2", pid, epoch, 0, partition=1) == 0
    state = await _describe(client, "tv2")
    assert state.transaction_state == "Ongoing"
    assert [(t.topic, sorted(t.partitions)) for t in state.topics] == [("t", [0, 1])]
    assert await _end(client, "tv2", pid, epoch, True) == (0, pid, epoch + 1)
    # a retry of that EndTxn (the epoch just below) gets the same answer and changes nothing
    assert await _end(client, "tv2", pid, epoch, True) == (0, pid, epoch + 1)
    assert await _end(client, "tv2", pid, epoch, False) == (E.INVALID_TXN_STATE, -1, -1)
    # the same epoch as the coordinator's is the next transaction's end: nothing is open
    assert await _end(client, "tv2", pid, epoch + 1, True) == (E.INVALID_TXN_STATE, -1, -1)
    # the old epoch is fenced in the partitions (its markers carry the new one)
    assert await _produce(client, "tv2", pid, epoch, 1) == E.INVALID_PRODUCER_EPOCH
    assert await _end(client, "tv2", pid, epoch - 1, True) == (E.PRODUCER_FENCED, -1, -1)
    # the next transaction numbers its sequences from 0 at the new epoch
    assert await _produce(client, "tv2", pid, epoch + 1, 0) == 0
    assert await _end(client, "tv2", pid, epoch + 1, False) == (0, pid, epoch + 2)
    state = await _describe(client, "tv2")
    assert (state.transaction_state, state.producer_epoch) == ("CompleteAbort", epoch + 2)
    r = await client.request(ApiKey.ListOffsets, 5, replica_id=-1, isolation_level=1, topics=[
        request_class(ApiKey.ListOffsets).ListOffsetsTopic(name="t", partitions=[
            request_class(ApiKey.ListOffsets).ListOffsetsTopic.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
    # record, commit marker, record, abort marker: every transaction ended (LSO = HW)
    assert r.topics[0].partitions[0].offset == 4


async def test_end_txn_v5_aborts_with_nothing_added(trio_broker):
    client = await _client(trio_broker)
    pid, epoch = await _init(client, "empty")
    assert await _end(client, "empty", pid, epoch, True) == (E.INVALID_TXN_STATE, -1, -1)
    assert await _end(client, "empty", pid, epoch, False) == (0, pid, epoch + 1)
    assert await _end(client, "empty", pid, epoch, False) == (0, pid, epoch + 1)  # retry
    # after a commit, an abort at the new epoch is the next (empty) transaction's
    assert await _produce(client, "empty", pid, epoch + 1, 0) == 0
    assert await _end(client, "empty", pid, epoch + 1, True) == (0, pid, epoch + 2)
    assert await _end(client, "empty", pid, epoch + 2, False) == (0, pid, epoch + 3)


async def test_exhausted_epoch_moves_to_a_new_producer_id(trio_broker):
    client = await _client(trio_broker)
    pid, _ = await _init(client, "old")
    txns = trio_broker.state.transactions
    # a producer at the last epoch: tens of thousands of transactions, put in place directly
    assert await txns._durable(attrs.evolve(txns.transactions["old"], producer_epoch=MAX_EPOCH))
    assert await _produce(client, "old", pid, MAX_EPOCH, 0) == 0
    error, new_pid, new_epoch = await _end(client, "old", pid, MAX_EPOCH, True)
    assert (error, new_epoch) == (0, 0)
    assert new_pid != pid
    # the old id at its last epoch is a retry of that end, answered the same
    assert await _end(client, "old", pid, MAX_EPOCH, True) == (0, new_pid, 0)
    assert await _end(client, "old", pid, MAX_EPOCH - 1, True) == (
        E.INVALID_PRODUCER_ID_MAPPING, -1, -1)
    assert await _produce(client, "old", new_pid, 0, 0) == 0
    assert await _end(client, "old", new_pid, 0, True) == (0, new_pid, 1)
    state = await _describe(client, "old")
    assert (state.producer_id, state.producer_epoch) == (new_pid, 1)


async def test_txn_offset_commit_v5_adds_its_group(trio_broker):
    client = await _client(trio_broker)
    pid, epoch = await _init(client, "offsets")

    async def commit(version: int, offset: int) -> int:
        part = _TOC.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata=None)
        r = await client.request(
            ApiKey.TxnOffsetCommit, version, transactional_id="offsets", group_id="g",
            producer_id=pid, producer_epoch=epoch, generation_id=-1, member_id="",
            group_instance_id=None,
            topics=[_TOC.TxnOffsetCommitRequestTopic(name="t", partitions=[part])])
        return int(r.topics[0].partitions[0].error_code)

    assert await commit(4, 5) == E.INVALID_TXN_STATE  # version 1 needs AddOffsetsToTxn
    assert await commit(5, 7) == 0
    assert (await _describe(client, "offsets")).transaction_state == "Ongoing"
    assert await _end(client, "offsets", pid, epoch, True) == (0, pid, epoch + 1)
    r = await client.request(ApiKey.OffsetFetch, 8, require_stable=True, groups=[
        _OF.OffsetFetchRequestGroup(group_id="g", topics=[
            _OF.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name="t",
                                                                 partition_indexes=[0])])])
    assert r.groups[0].topics[0].partitions[0].committed_offset == 7


async def test_produce_v12_refused_for_a_fenced_epoch_or_unknown_id(trio_broker):
    client = await _client(trio_broker)
    pid, epoch = await _init(client, "z")
    await _init(client, "z")  # a new instance fences the first
    assert await _produce(client, "z", pid, epoch, 0) == E.INVALID_PRODUCER_EPOCH
    assert await _produce(client, "z", pid + 100, 0, 0) == E.INVALID_PRODUCER_ID_MAPPING
    assert (await _describe(client, "z")).topics == []


async def test_produce_v11_outside_the_transaction_is_refused(trio_broker):
    client = await _client(trio_broker)
    pid, epoch = await _init(client, "v1")
    assert await _produce(client, "v1", pid, epoch, 0, version=11) == E.INVALID_TXN_STATE
    assert (await _describe(client, "v1")).transaction_state == "Empty"


@pytest.mark.broker_config(transaction_partition_verification_enable=False)
async def test_produce_v11_unverified_when_verification_is_off(trio_broker):
    client = await _client(trio_broker)
    pid, epoch = await _init(client, "v1")
    assert await _produce(client, "v1", pid, epoch, 0, version=11) == 0
    # version 2 producers still add their partition: without it, nothing would end it
    assert await _produce(client, "v1", pid, epoch, 0, version=12, partition=1) == 0
    assert [sorted(t.partitions) for t in (await _describe(client, "v1")).topics] == [[1]]


def test_version_2_state_survives_the_transaction_log() -> None:
    meta = TransactionMetadata("x", 7, 3, 60_000, TxnState.COMPLETE_COMMIT, prev_producer_id=5,
                               next_producer_id=-1, client_transaction_version=2)
    doc = json.loads(json.dumps(meta.to_json()))
    back = TransactionMetadata.from_json(doc)
    assert (back.prev_producer_id, back.next_producer_id, back.client_transaction_version) == (
        5, -1, 2)
    # a record written before transaction version 2 existed loads with Kafka's defaults
    for key in ("prev_pid", "next_pid", "tv"):
        del doc[key]
    old = TransactionMetadata.from_json(doc)
    assert (old.prev_producer_id, old.next_producer_id, old.client_transaction_version) == (
        -1, -1, 0)
