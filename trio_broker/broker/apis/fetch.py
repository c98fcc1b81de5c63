"""Fetch v0-v18: whole batches from each partition's log, long-polled through the purgatory.

Why it reads, then parks: most fetches find data at once and are answered by the handler. One
that finds fewer than ``min_bytes`` is parked (``purgatory.py``) and re-read when enough data was
appended to the partitions it watches or its ``max_wait_ms`` passes; the handler is free at once.

v4+ consumers get the batches as the log stores them (KIP-74: the first batch even when it
exceeds the limits): the bytes read are the bytes sent, with no per-record work. v0-v3 allow only
message formats v0 (v0-v1) and v1 (v2-v3), so their data is down-converted
(``protocol.conversion``); v0-v2 keep Kafka's hard byte limit (no oversized first batch).

Per version: v7 sessions (answered sessionless: ``session_id`` 0 for every full fetch, which is
what Kafka answers when it keeps no session, and FETCH_SESSION_ID_NOT_FOUND for an incremental
one, after which clients send full fetches); v9 ``current_leader_epoch`` (FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH); v11 no preferred read replica (-1); v12 ``last_fetched_epoch`` and the
diverging epoch it may reveal; v13 topics by id (UNKNOWN_TOPIC_ID); v15's replica state, v17's
replica directory id and v18's high watermark are a follower's, and there are no followers;
v16 the current leader and its endpoint with a FENCED_LEADER_EPOCH or (a cluster node that does
not lead the partition, ``cluster_model.py``) a NOT_LEADER_OR_FOLLOWER. v4+ ``read_committed``
reads stop at the last stable offset and list the aborted transactions of what is returned, so
the client drops their records (control batches are skipped by every client).

Zero-copy: on a connection that writes to a plain socket (``RequestContext.sendfile``: not
TLS), a v4+ read of ``SENDFILE_MIN_BYTES`` or more is answered with a ``FileRegion`` of the
segment file instead of its bytes; the connection sends it with ``sendfile`` after the response
bytes before it. Smaller reads are copied: below the threshold the copy costs no more than
``sendfile``'s extra ``dup``, ``sendfile`` and ``close``, above it far more (docs/benchmarks.md,
"Zero-copy fetch"). Down-converted (v0-v3) data is
always copied.
"""

from __future__ import annotations

from collections.abc import Container
from typing import NamedTuple

import trio

from ...protocol.api_keys import ApiKey
from ...protocol.conversion import batches_to_legacy
from ...protocol.errors import CorruptRecordError, ErrorCode, UnsupportedCompressionError
from ...protocol.messages import response_type
from ..server import authz
from ..server.bodies import FetchRequest, ResponseBody, Struct
from ..server.cluster_model import RACK_AWARE_SELECTOR, leader_endpoints
from ..server.context import DEFERRED, HandlerContext, HandlerResult
from ..server.purgatory import DelayedOperation
from ..server.state import BrokerState
from ..storage import FileRegion, Log, StorageError
from ..storage.file_region import close_regions
from .leader_epochs import check_leader_epoch

_R = response_type(ApiKey.Fetch)
_TopicResp = _R.FetchableTopicResponse
_PartResp = _TopicResp.PartitionData
_Diverging = _PartResp.EpochEndOffset
_Leader = _PartResp.LeaderIdAndEpoch
_Node = _R.NodeEndpoint
_Aborted = _PartResp.AbortedTransaction
#: session epochs of a full fetch (Kafka's ``FetchMetadata.INITIAL_EPOCH`` / ``FINAL_EPOCH``)
_FULL_FETCH_EPOCHS = (0, -1)
READ_COMMITTED = 1
#: errors answered with the current leader from v16 (KIP-951)
_LEADER_HINTED = (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER)
#: reads of at least this many bytes go out with ``sendfile`` on a plain socket (v4+)
SENDFILE_MIN_BYTES = 128 * 1024


class _Read(NamedTuple):
    topics: list[Struct]
    total: int
    errors: int
    #: a partition answered with its current leader (v16+: the response lists that node)
    leader_shown: bool
    #: a partition answered with a preferred read replica (KIP-392): answered at once
    redirected: bool = False


async def handle_fetch(ctx: HandlerContext, request: FetchRequest) -> HandlerResult:
    v = ctx.version
    if v >= 7 and request.session_epoch not in _FULL_FETCH_EPOCHS:
        # an incremental fetch names a session; this broker keeps none
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                            session_id=0, responses=[])
    denied = authz.fetch_denied(ctx, request, v)
    region_min = SENDFILE_MIN_BYTES if ctx.request.sendfile else None
    read = read_partitions(ctx.broker, request, v, denied, region_min=region_min)
    keys = [(t.topic, p.partition) for t in request.topics for p in t.partitions]
    if (request.max_wait_ms <= 0 or read.total >= request.min_bytes or read.errors or not keys
            or read.redirected):
        return _response(ctx, read)
    close_regions(read.topics)  # read again when the operation completes

    def complete() -> None:
        ctx.respond(_response(ctx, read_partitions(ctx.broker, request, v, denied,
                                                   region_min=region_min)))

    if v >= 13:  # parked by name: appends notify (name, partition)
        keys = [(ctx.broker.logs.topic_name(t.topic_id), p.partition)
                for t in request.topics for p in t.partitions]
    op = DelayedOperation(keys, deadline=trio.current_time() + request.max_wait_ms / 1000,
                          min_bytes=request.min_bytes, accumulated_bytes=read.total,
                          complete=complete)
    ctx.broker.fetch_purgatory.park(op)
    return DEFERRED


def _response(ctx: HandlerContext, read: _Read) -> ResponseBody:
    broker = ctx.broker
    broker.metrics.topics.fetched(read.topics, broker.logs.topic_name)
    nodes = (leader_endpoints(broker.cluster, _Node, read.topics, ctx.listener)
             if read.leader_shown else [])
    return ctx.response(throttle_time_ms=0, error_code=0, session_id=0, responses=read.topics,
                        node_endpoints=nodes)


def read_partitions(broker: BrokerState, request: FetchRequest, version: int,
                    denied: Container[str | None] = (), *,
                    region_min: int | None = None) -> _Read:
    """The topic responses, bytes read, partitions in error, honouring max_bytes and KIP-74;
    topics in ``denied`` are answered TOPIC_AUTHORIZATION_FAILED. With ``region_min``, v4+
    reads of that many bytes or more are file regions (``FileRegion``), not bytes."""
    logs = broker.logs
    remaining = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    total = errors = 0
    first_data = version >= 3  # v0-v2: Kafka's hard limit, no oversized first batch
    committed = request.isolation_level == READ_COMMITTED
    leader_shown = redirected = False
    # KIP-392: a consumer fetch (v11+) may be answered by a follower, and with the selector set
    # a leader sends a consumer of another rack to a replica in its own
    follower_reads = version >= 11 and _rack_aware(broker)
    rack = request.rack_id if follower_reads else ""
    if version < 4:
        region_min = None  # down-converted: the bytes are needed
    out = []
    for t in request.topics:
        name = logs.topic_name(t.topic_id) if version >= 13 else t.topic
        parts = []
        for p in t.partitions:
            log = None if name is None else logs.get_log(name, p.partition)
            error = (ErrorCode.TOPIC_AUTHORIZATION_FAILED if name in denied
                     else _partition_error(broker, name, p, log, version,
                                           follower_reads=follower_reads))
            if error is not None:
                errors += 1
                parts.append(_part(p.partition, error))
                if (error in _LEADER_HINTED and version >= 16 and log is not None
                        and name is not None):
                    leader, epoch = broker.cluster.leader_of(name, p.partition)
                    parts[-1].current_leader = _Leader(leader_id=leader, leader_epoch=epoch)
                    leader_shown = True
                continue
            assert log is not None
            assert name is not None
            diverging = _diverging_epoch(log, p) if version >= 12 else None
            if isinstance(diverging, int):
                errors += 1
                parts.append(_part(p.partition, diverging))
                continue
            if diverging is not None:
                parts.append(_part(p.partition, 0, log.high_watermark, log.log_start_offset,
                                   lso=log.last_stable_offset))
                parts[-1].diverging_epoch = diverging
                continue
            preferred = (broker.cluster.preferred_read_replica(broker.node_id, name, p.partition,
                                                               rack) if rack else -1)
            if preferred >= 0:
                redirected = True
                parts.append(_part(p.partition, 0, log.high_watermark, log.log_start_offset,
                                   lso=log.last_stable_offset))
                parts[-1].preferred_read_replica = preferred
                continue
            limit = min(p.partition_max_bytes, remaining)
            try:
                data = log.read(p.fetch_offset, max(limit, 0), min_one_batch=first_data,
                                committed=committed, region_min=region_min)
                records = data.records
                if version <= 3 and records:
                    assert isinstance(records, bytes)  # no file regions before v4
                    records = batches_to_legacy(records, 0 if version <= 1 else 1,
                                                p.fetch_offset, max(limit, 0))
            except UnsupportedCompressionError:
                errors += 1
                parts.append(_part(p.partition, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE))
                continue
            except CorruptRecordError:  # stored records that do not convert within bounds
                errors += 1
                parts.append(_part(p.partition, ErrorCode.CORRUPT_MESSAGE))
                continue
            except StorageError as exc:
                errors += 1
                parts.append(_part(p.partition, _storage_error(exc.error_code, version),
                                   log.high_watermark, log.log_start_offset))
                continue
            n = len(records)
            if n:
                first_data = False
                remaining -= n
                total += n
            parts.append(_part(p.partition, 0, data.high_watermark, data.log_start_offset,
                               records, data.last_stable_offset))
            if data.aborted_transactions:
                parts[-1].aborted_transactions = [
                    _Aborted(producer_id=a.producer_id, first_offset=a.first_offset)
                    for a in data.aborted_transactions]
        out.append(_TopicResp(topic=t.topic if version < 13 else "",
                              topic_id=t.topic_id if version >= 13 else None,
                              partitions=parts))
    return _Read(out, total, errors, leader_shown, redirected)


def _rack_aware(broker: BrokerState) -> bool:
    return (broker.cluster.intercepting
            and broker.config.replica_selector_class == RACK_AWARE_SELECTOR)


def _partition_error(broker: BrokerState, name: str | None, p: Struct, log: Log | None,
                     version: int, *, follower_reads: bool = False) -> int | None:
    if name is None:
        return ErrorCode.UNKNOWN_TOPIC_ID
    if log is None:
        if (name, p.partition) in broker.logs.offline_partitions:
            return _storage_error(ErrorCode.KAFKA_STORAGE_ERROR, version)
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    error = check_leader_epoch(log, p.current_leader_epoch)
    if error:
        return error
    if broker.cluster.intercepting:  # a cluster node that does not lead the partition
        error = broker.cluster.leader_error(broker.node_id, name, p.partition)
        if error and not (follower_reads and broker.cluster.serves_reads(
                broker.node_id, name, p.partition)):
            return error
    if version < 10 and log.config.compression_type == "zstd":
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE  # Kafka: zstd topics need Fetch v10
    return None


def _storage_error(code: int, version: int) -> int:
    # Kafka: consumers before Fetch v6 may not know KAFKA_STORAGE_ERROR, so they get a
    # retriable NOT_LEADER_OR_FOLLOWER (and refresh their metadata) instead
    if code == ErrorCode.KAFKA_STORAGE_ERROR and version <= 5:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return code


def _diverging_epoch(log: Log, p: Struct) -> Struct | int | None:
    """Kafka's check for a fetcher that names the epoch of the data it last read (v12+): if that
    epoch ended before the fetch offset here, the fetcher's log diverged and must truncate (the
    answer says where); an epoch this log cannot place is OFFSET_OUT_OF_RANGE."""
    if p.last_fetched_epoch < 0:
        return None
    epoch, end_offset = log.end_offset_for_epoch(p.last_fetched_epoch)
    if end_offset < 0 or epoch < 0 or p.fetch_offset < log.log_start_offset:
        return ErrorCode.OFFSET_OUT_OF_RANGE
    if epoch < p.last_fetched_epoch or end_offset < p.fetch_offset:
        return _Diverging(epoch=epoch, end_offset=end_offset)
    return None


def _part(index: int, error: int, hw: int = -1, log_start: int = -1,
          records: bytes | FileRegion = b"", lso: int | None = None) -> Struct:
    return _PartResp(partition_index=index, error_code=error, high_watermark=hw,
                     last_stable_offset=hw if lso is None else lso, log_start_offset=log_start,
                     aborted_transactions=[], preferred_read_replica=-1, records=records)
