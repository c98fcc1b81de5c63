"""The transactional APIs: AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn,
DescribeTransactions and ListTransactions (InitProducerId is ``init_producer_id.py``).

Why the handlers are thin: every decision is the transaction coordinator's
(``coordinator.transactions``); a handler decodes, calls it and encodes, mapping Kafka's
version-dependent fencing error: PRODUCER_FENCED exists from AddPartitionsToTxn v2, AddOffsetsToTxn
v2, EndTxn v2 and TxnOffsetCommit v3 (KIP-588); older clients get INVALID_PRODUCER_EPOCH.
AddPartitionsToTxn v4+ is the batched form brokers send for KIP-890's verification
(``verify_only``); one request may name several transactional ids. EndTxn v5 and TxnOffsetCommit
v5 are transaction version 2 (KIP-890 part 2, finalized in ApiVersions as ``transaction.version``
2): EndTxn v5 bumps the producer's epoch and answers the producer id and epoch to go on with;
TxnOffsetCommit v5 adds its group to the transaction itself, without AddOffsetsToTxn.
"""

from __future__ import annotations

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages import response_type
from ..coordinator.transactions import TxnOffset
from ..coordinator.txn_metadata import TV_1, TV_2, TxnState
from ..security.patterns import InvalidPattern, compile_pattern
from ..server import authz
from ..server.bodies import RequestBody, Struct
from ..server.cluster_model import TRANSACTION_KEY
from ..server.context import HandlerContext, HandlerResult

_APT = response_type(ApiKey.AddPartitionsToTxn)
_APTResult = _APT.AddPartitionsToTxnResult
_APTTopic = _APT.AddPartitionsToTxnTopicResult
_APTPart = _APTTopic.AddPartitionsToTxnPartitionResult
_TOC = response_type(ApiKey.TxnOffsetCommit)
_TOCTopic = _TOC.TxnOffsetCommitResponseTopic
_TOCPart = _TOCTopic.TxnOffsetCommitResponsePartition
_DT = response_type(ApiKey.DescribeTransactions)
_DTState = _DT.TransactionState
_DTTopic = _DTState.TopicData
_LT = response_type(ApiKey.ListTransactions)
_LTState = _LT.TransactionState

#: first version of each API that knows PRODUCER_FENCED
_FENCED_FROM = {ApiKey.AddPartitionsToTxn: 2, ApiKey.AddOffsetsToTxn: 2, ApiKey.EndTxn: 2,
                ApiKey.TxnOffsetCommit: 3, ApiKey.InitProducerId: 4}


def fencing_error(ctx: HandlerContext, api: ApiKey, error: ErrorCode) -> ErrorCode:
    if error == ErrorCode.PRODUCER_FENCED and ctx.version < _FENCED_FROM[api]:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _topic_results(ctx: HandlerContext, results: dict[tuple[str, int], ErrorCode],
                   cls: type = _APTTopic) -> list[Struct]:
    by_topic: dict[str, list[Struct]] = {}
    for (topic, partition), error in sorted(results.items()):
        err = fencing_error(ctx, ApiKey.AddPartitionsToTxn, error)
        by_topic.setdefault(topic, []).append(
            _APTPart(partition_index=partition, partition_error_code=err))
    return [cls(name=t, results_by_partition=parts) for t, parts in by_topic.items()]


async def add_partitions_to_txn(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    txns = ctx.broker.transactions
    if ctx.version <= 3:
        wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
        refused = authz.add_partitions_errors(ctx, request.v3_and_below_transactional_id, wanted)
        if refused:
            return ctx.response(throttle_time_ms=0,
                                results_by_topic_v3_and_below=_topic_results(ctx, refused))
        results = await txns.add_partitions(
            request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, wanted)
        return ctx.response(throttle_time_ms=0,
                            results_by_topic_v3_and_below=_topic_results(ctx, results))
    if not authz.cluster(ctx, authz.CLUSTER_ACTION):  # v4+: brokers' verification
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            results_by_transaction=[])
    out = []
    for txn in request.transactions:
        wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
        results = await txns.add_partitions(txn.transactional_id, txn.producer_id,
                                            txn.producer_epoch, wanted,
                                            verify_only=txn.verify_only)
        out.append(_APTResult(transactional_id=txn.transactional_id,
                              topic_results=_topic_results(
                                  ctx, results, _APTResult.AddPartitionsToTxnTopicResult)))
    return ctx.response(throttle_time_ms=0, error_code=0, results_by_transaction=out)


async def add_offsets_to_txn(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    if not authz.transactional_id(ctx, authz.WRITE, request.transactional_id):
        return ctx.response(throttle_time_ms=0,
                            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not authz.group(ctx, authz.READ, request.group_id):
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = await ctx.broker.transactions.add_offsets(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id)
    return ctx.response(throttle_time_ms=0,
                        error_code=fencing_error(ctx, ApiKey.AddOffsetsToTxn, error))


async def end_txn(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    if not authz.transactional_id(ctx, authz.WRITE, request.transactional_id):
        return ctx.response(throttle_time_ms=0,
                            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                            producer_id=-1, producer_epoch=-1)
    error, producer_id, producer_epoch = await ctx.broker.transactions.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch,
        request.committed, transaction_version=TV_2 if ctx.version >= 5 else TV_1)
    return ctx.response(throttle_time_ms=0, error_code=fencing_error(ctx, ApiKey.EndTxn, error),
                        producer_id=producer_id, producer_epoch=producer_epoch)


async def txn_offset_commit(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    v3 = ctx.version >= 3
    offsets = [TxnOffset(t.name, p.partition_index, p.committed_offset,
                         p.committed_leader_epoch if ctx.version >= 2 else -1,
                         p.committed_metadata)
               for t in request.topics for p in t.partitions]
    refused = authz.txn_offset_commit_errors(ctx, request.transactional_id, request.group_id,
                                             [(o.topic, o.partition) for o in offsets])
    offsets = [o for o in offsets if (o.topic, o.partition) not in refused]
    results = {**(await ctx.broker.transactions.txn_offset_commit(
        request.transactional_id, request.group_id, request.producer_id, request.producer_epoch,
        offsets, generation_id=request.generation_id if v3 else -1,
        member_id=request.member_id if v3 else "",
        group_instance_id=request.group_instance_id if v3 else None,
        add_group=ctx.version >= 5) if offsets else {}),
        **refused}
    by_topic: dict[str, list[Struct]] = {}
    for (topic, partition), error in results.items():
        by_topic.setdefault(topic, []).append(_TOCPart(
            partition_index=partition,
            error_code=fencing_error(ctx, ApiKey.TxnOffsetCommit, error)))
    return ctx.response(throttle_time_ms=0, topics=[
        _TOCTopic(name=t, partitions=parts) for t, parts in by_topic.items()])


async def describe_transactions(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    txns = ctx.broker.transactions
    out = []
    for tid in request.transactional_ids:
        meta = txns.transactions.get(tid)
        if not authz.transactional_id(ctx, authz.DESCRIBE, tid):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not txns.loaded:
            error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        elif meta is None:
            error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        else:
            error = ErrorCode.NONE
        if meta is None or error:
            out.append(_DTState(error_code=error, transactional_id=tid, transaction_state="",
                                transaction_timeout_ms=0, transaction_start_time_ms=-1,
                                producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out.append(_DTState(error_code=0, transactional_id=tid,
                            transaction_state=meta.state.value,
                            transaction_timeout_ms=meta.timeout_ms,
                            transaction_start_time_ms=meta.start_ms,
                            producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                            topics=[_DTTopic(topic=t, partitions=p)
                                    for t, p in by_topic.items()]))
    return ctx.response(throttle_time_ms=0, transaction_states=out)


async def list_transactions(ctx: HandlerContext, request: RequestBody) -> HandlerResult:
    txns = ctx.broker.transactions
    known = {s.value for s in TxnState}
    states = set(request.state_filters)
    unknown = sorted(states - known)
    pids = set(request.producer_id_filters)
    duration = request.duration_filter if ctx.version >= 1 else -1
    pattern = request.transactional_id_pattern if ctx.version >= 2 else None
    matcher = None
    if pattern:
        try:
            matcher = compile_pattern(pattern)  # RE2: linear in each transactional id
        except InvalidPattern:
            return ctx.response(throttle_time_ms=0, error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                                unknown_state_filters=[], transaction_states=[])
    if not txns.loaded:
        return ctx.response(throttle_time_ms=0,
                            error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                            unknown_state_filters=unknown, transaction_states=[])
    now = txns.now_ms()
    out = []
    cluster, node = ctx.broker.cluster, ctx.broker.node_id
    for tid, meta in sorted(txns.transactions.items()):
        if not cluster.single and cluster.coordinator_for(TRANSACTION_KEY, tid) != node:
            continue  # each node lists the transactional ids it coordinates
        if states and meta.state.value not in states:
            continue
        if pids and meta.producer_id not in pids:
            continue
        if duration >= 0 and (meta.start_ms < 0 or now - meta.start_ms < duration):
            continue
        # Kafka lists only the ids the principal may DESCRIBE; the check comes before the
        # pattern so that a client's expression only ever runs over ids it may see.
        if not authz.transactional_id(ctx, authz.DESCRIBE, tid):
            continue
        if matcher is not None and not matcher.fullmatch(tid):
            continue
        out.append(_LTState(transactional_id=tid, producer_id=meta.producer_id,
                            transaction_state=meta.state.value))
    return ctx.response(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
                        transaction_states=out)


__all__ = ["add_offsets_to_txn", "add_partitions_to_txn", "describe_transactions", "end_txn",
           "fencing_error", "list_transactions", "txn_offset_commit"]
