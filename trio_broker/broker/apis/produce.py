"""Produce v0-v13: validate each partition's records, append them, acknowledge.

Why bytes only, almost always: the batch header and its CRC-32C are all the broker needs to check
a v2 batch; records are not decoded, compressed batches are stored as they came, and the only
rewrites are the base offset and leader epoch (outside the CRC) and, under LogAppendTime, the
max timestamp. Records are decoded in three cases only, all in ``protocol.conversion``: Produce
v0-v2 message sets of format v0/v1 (stored as one v2 batch, as Kafka 3.x does), a topic whose
``compression.type`` names a codec the batch does not have (rebuilt with it, as Kafka does), and
a compacted topic, which refuses records without a key (per-record errors, v8+).

Per version: v3+ carries exactly one v2 batch per partition; v7 allows zstd; v8 adds per-record
errors (KIP-467); v9 is flexible; v10's current-leader fields come with NOT_LEADER_OR_FOLLOWER (a
cluster node that does not lead the partition, ``cluster_model.py``); v13 names topics by id
(UNKNOWN_TOPIC_ID for an unknown one).
Transactional batches (v3+ with a ``transactional_id``) are checked against the transaction
coordinator before they are appended (KIP-890 part 1: a partition outside the producer's ongoing
transaction is refused with INVALID_TXN_STATE, unless ``transaction.partition.verification.enable``
is false). From v12 (transaction version 2, KIP-890 part 2) the producer sends no
AddPartitionsToTxn: the broker adds each partition to the transaction itself before appending, as
Kafka's ``AddPartitionsToTxnManager`` does.
"""

from __future__ import annotations

import logging
import struct

from ...protocol.api_keys import ApiKey
from ...protocol.batch import BATCH_HEADER_SIZE, BatchHeader, read_batch_header, validate_batch
from ...protocol.compression import Buffer, Compression
from ...protocol.conversion import (
    TOPIC_CODECS,
    RecordValidationError,
    check_keys_for_compaction,
    legacy_to_batch,
    recompress_batch,
)
from ...protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from ...protocol.legacy import entry_magic
from ...protocol.messages import Encoded, response_type
from ...protocol.wire import uvarint
from ..coordinator.internal_topics import is_internal
from ..offload import run_io
from ..server import authz
from ..server.bodies import ProduceRequest, Struct
from ..server.cluster_model import ClusterModel, leader_endpoints
from ..server.context import CloseConnection, HandlerContext, HandlerResult
from ..storage import Log, LogAppendInfo, StorageError
from .topics import validate_topic_name

LOGGER = logging.getLogger(__name__)

#: read from the enum once (on Python 3.11 reading a member through its class costs several
#: times the comparison made with it for every batch)
_ZSTD = Compression.ZSTD
_R = response_type(ApiKey.Produce)
_TopicResp = _R.TopicProduceResponse
_PartResp = _TopicResp.PartitionProduceResponse
_RecordError = _PartResp.BatchIndexAndErrorMessage


def _part(index: int, error: int, base_offset: int = -1, append_time: int = -1,
          log_start: int = -1, message: str | None = None,
          record_errors: list[Struct] | None = None) -> Struct:
    # by position (the schema's order), as every produced partition's answer is built
    return _PartResp(index, error, base_offset, append_time, log_start, record_errors or [],
                     message)


async def handle_produce(ctx: HandlerContext, request: ProduceRequest) -> HandlerResult:
    broker = ctx.broker
    acks = request.acks
    logs = broker.logs
    version = ctx.version
    by_id = version >= 13
    results = []
    to_flush: list[tuple[Log, list[Struct], int]] = []
    now_ms = broker.now_ms()
    cluster = broker.cluster
    hint_nodes = False
    registered: dict[tuple[str, int], int] = {}
    if request.transactional_id is not None and version >= 12:
        registered = await _register_partitions(ctx, request, request.transactional_id)
    for topic in request.topic_data:
        name = logs.topic_name(topic.topic_id) if by_id else topic.name
        refused = authz.produce_error(ctx, request.transactional_id, name)
        parts = []
        for pd in topic.partition_data:
            if acks not in (0, 1, -1):
                parts.append(_part(pd.index, ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            if refused:
                parts.append(_part(pd.index, refused))
                continue
            if name is None:
                parts.append(_part(pd.index, ErrorCode.UNKNOWN_TOPIC_ID))
                continue
            log = logs.get_log(name, pd.index)
            if log is None:
                offline = (name, pd.index) in logs.offline_partitions
                missing = (ErrorCode.KAFKA_STORAGE_ERROR if offline else
                           ErrorCode.INVALID_TOPIC_EXCEPTION if validate_topic_name(name)
                           else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                parts.append(_part(pd.index, missing))
                continue
            if is_internal(name):
                # Kafka's ReplicaManager.appendToLocalLog: only coordinators append here
                parts.append(_part(pd.index, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                   message=f"Cannot append to internal topic {name}"))
                continue
            if cluster.intercepting:
                error = cluster.leader_error(broker.node_id, name, pd.index)
                if error:
                    parts.append(not_leader_part(cluster, name, pd.index, version))
                    hint_nodes = True
                    continue
            min_isr = log.config.min_insync_replicas
            if acks == -1 and min_isr > 1 and min_isr > cluster.in_sync(name, pd.index):
                # Kafka checks the ISR before validating records (one node: the ISR is itself)
                parts.append(_part(pd.index, ErrorCode.NOT_ENOUGH_REPLICAS))
                continue
            if registered and (name, pd.index) in registered:
                parts.append(_part(pd.index, registered[(name, pd.index)]))
                continue
            result = _append(ctx, log, (name, pd.index), pd.records, now_ms,
                             request.transactional_id)
            if not isinstance(result, LogAppendInfo):
                parts.append(result)
                continue
            info = result
            parts.append(_part(pd.index, 0, info.first_offset, info.log_append_time_ms,
                               info.log_start_offset))
            if not info.duplicate:
                broker.fetch_purgatory.notify((name, pd.index), info.size)
                broker.metrics.topics.bytes_in(name, len(pd.records),
                                               info.last_offset - info.first_offset + 1)
            # A duplicate too: its original may still be waiting for its fsync on another
            # connection, and the retry must not be acknowledged before the original would be.
            if log.needs_flush():
                to_flush.append((log, parts, len(parts) - 1))
        # name, topic id, partitions (by position: one per topic of every request)
        results.append(_TopicResp(topic.name if not by_id else "",
                                  topic.topic_id if by_id else None, parts))
    for log, parts, i in to_flush:
        try:
            await run_io(logs.flush, log)
        except StorageError as exc:
            LOGGER.error("flush of %s failed: %s", log.name, exc)
            parts[i] = _part(parts[i].index, ErrorCode.KAFKA_STORAGE_ERROR)
    if acks == 0:
        if any(p.error_code for t in results for p in t.partition_responses):
            return CloseConnection("acks=0 produce failed")
        return None
    if len(results) == 1 and not hint_nodes and not broker.quotas.enabled:
        answer = _one_partition_answer(version, results[0])
        if answer is not None:
            return answer
    if hint_nodes and version >= 10:
        return ctx.response(responses=results, throttle_time_ms=0,
                            node_endpoints=leader_endpoints(cluster, _R.NodeEndpoint, results,
                                                            ctx.listener))
    return ctx.response(responses=results, throttle_time_ms=0)


def not_leader_part(cluster: ClusterModel, topic: str, index: int, version: int) -> Struct:
    """NOT_LEADER_OR_FOLLOWER, with the current leader from v10 (KIP-951)."""
    part = _part(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if version >= 10:
        leader, epoch = cluster.leader_of(topic, index)
        part.current_leader = _PartResp.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
    return part


def _append(ctx: HandlerContext, log: Log, tp: tuple[str, int], records: Buffer | None,
            now_ms: int, transactional_id: str | None) -> LogAppendInfo | Struct:
    """The append's result, or the partition's response when it is an error (or, for a v0-v2
    message set without one whole message, no append at all: no error and no offset, as Kafka
    answers it; it checks no shape before v3)."""
    index = tp[1]
    if not records:
        return _part(index, 0 if ctx.version <= 2 and records is not None
                     else ErrorCode.INVALID_RECORD)
    config = log.config
    target = TOPIC_CODECS.get(config.compression_type)
    legacy = entry_magic(records) in (0, 1)
    if legacy and ctx.version >= 3:  # Kafka: "only allowed to contain ... magic version 2"
        return _part(index, ErrorCode.INVALID_RECORD)
    try:
        if legacy:
            converted = legacy_to_batch(records, target=target)
            if converted is None:
                return _part(index, 0)
            records = converted
        header = validate_batch(records, max_message_bytes=config.max_message_bytes)
        if header.compression == _ZSTD and 3 <= ctx.version < 7:
            return _part(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        if header.is_transactional and (
                ctx.version >= 12 or ctx.broker.config.transaction_partition_verification_enable):
            # the partition must be in the producer's ongoing transaction, at its current
            # epoch (Kafka's verification): a fenced zombie's late write stops here
            error = (ErrorCode.INVALID_TXN_STATE if transactional_id is None else
                     ctx.broker.transactions.verify_produce(
                         transactional_id, header.producer_id, header.producer_epoch, tp))
            if error:
                return _part(index, error)
        if target is not None and header.compression != target:
            records, header = _recompressed(records, target, config.max_message_bytes)
        if "compact" in config.cleanup_policy:
            check_keys_for_compaction(records, log.name)
        return log.append(records, header, now_ms=now_ms)  # bytes: the log copies the header
    except RecordValidationError as exc:
        errors = [_RecordError(batch_index=i, batch_index_error_message=m)
                  for i, m in exc.record_errors]
        return _part(index, ErrorCode.INVALID_RECORD, message=str(exc), record_errors=errors)
    except CorruptRecordError as exc:
        LOGGER.debug("corrupt records for %s: %s", log.name, exc)
        return _part(index, ErrorCode.CORRUPT_MESSAGE)
    except InvalidRecordError as exc:
        LOGGER.debug("invalid records for %s: %s", log.name, exc)
        return _part(index, ErrorCode.INVALID_RECORD)
    except RecordTooLargeError:
        return _part(index, ErrorCode.MESSAGE_TOO_LARGE)
    except UnsupportedCompressionError:
        return _part(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
    except StorageError as exc:
        if exc.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
            LOGGER.error("append to %s failed: %s", log.name, exc)
        return _part(index, exc.error_code)


#: coordinator errors a producer may not retry (KIP-890 part 1): Kafka answers them with
#: NOT_ENOUGH_REPLICAS, which every client retries without refreshing its metadata
_RETRIABLE_AS_NOT_ENOUGH_REPLICAS = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


async def _register_partitions(ctx: HandlerContext, request: ProduceRequest,
                               transactional_id: str) -> dict[tuple[str, int], int]:
    """Add the partitions of a v12+ request's transactional batches to the producer's
    transaction (one durable write for all); the refused ones with their error."""
    logs = ctx.broker.logs
    txns = ctx.broker.transactions
    wanted: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for topic in request.topic_data:
        name = logs.topic_name(topic.topic_id) if ctx.version >= 13 else topic.name
        if name is None or authz.produce_error(ctx, transactional_id, name):
            continue
        for pd in topic.partition_data:
            records = pd.records
            if not records or len(records) < BATCH_HEADER_SIZE or \
                    logs.get_log(name, pd.index) is None:
                continue  # the append answers what is wrong with it
            try:
                header = read_batch_header(records)
            except CorruptRecordError:
                continue
            if not header.is_transactional:
                continue
            tp = (name, pd.index)
            if txns.verify_produce(transactional_id, header.producer_id, header.producer_epoch,
                                   tp) != ErrorCode.NONE:
                wanted.setdefault((header.producer_id, header.producer_epoch), []).append(tp)
    refused: dict[tuple[str, int], int] = {}
    for (producer_id, epoch), tps in wanted.items():
        results = await txns.add_partitions(transactional_id, producer_id, epoch, tps)
        for tp, error in results.items():
            if error == ErrorCode.PRODUCER_FENCED:
                error = ErrorCode.INVALID_PRODUCER_EPOCH
            elif error in _RETRIABLE_AS_NOT_ENOUGH_REPLICAS:
                error = ErrorCode.NOT_ENOUGH_REPLICAS
            if error:
                refused[tp] = error
    return refused


def _recompressed(batch: Buffer, codec: Compression,
                  max_message_bytes: int) -> tuple[bytes, BatchHeader]:
    """The batch rebuilt with the topic's codec, checked again (its size may have grown)."""
    rebuilt = recompress_batch(batch, codec)
    return rebuilt, validate_batch(rebuilt, max_message_bytes=max_message_bytes)


_PARTITION = struct.Struct(">ihqqq")
_NO_RECORD_ERRORS = {8: b"\x00\x00\x00\x00\xff\xff", 9: b"\x01\x00\x00"}
_THROTTLE_NONE = b"\x00\x00\x00\x00"
#: (topic name, version) -> the answer's bytes before the partition's fields
_prefixes: dict[tuple[str, int], bytes] = {}
_PREFIXES_MAX = 4096


def _one_partition_answer(version: int, topic: Struct) -> Encoded | None:
    """The answer to a produce to one partition, encoded without the generic encoder's walk
    (most produces name one partition), or None where the generic encoder must write it:
    another shape, a version before v3 or with topic ids, record errors or a message."""
    parts = topic.partition_responses
    if len(parts) != 1 or not 3 <= version <= 12:
        return None
    part = parts[0]
    if part.record_errors or part.error_message is not None:
        return None
    prefix = _prefixes.get((topic.name, version))
    if prefix is None:
        if len(_prefixes) >= _PREFIXES_MAX:  # topics come and go over a broker's life
            _prefixes.clear()
        prefix = _prefixes[topic.name, version] = _prefix(topic.name, version)
    fields = _PARTITION.pack(part.index, part.error_code, part.base_offset,
                             part.log_append_time_ms, part.log_start_offset)
    if version < 5:  # no log_start_offset
        fields = fields[:-8]
    if version < 8:
        data = b"".join((prefix, fields, _THROTTLE_NONE))
    elif version == 8:
        data = b"".join((prefix, fields, _NO_RECORD_ERRORS[8], _THROTTLE_NONE))
    else:  # flexible: the partition's and the topic's empty tag sections, then the answer's
        data = b"".join((prefix, fields, _NO_RECORD_ERRORS[9], b"\x00", _THROTTLE_NONE,
                         b"\x00"))
    return Encoded.of(data, version, [part.error_code])


def _prefix(name: str, version: int) -> bytes:
    """One topic array of one element: its name, then one partition array of one element."""
    raw = name.encode()
    if version >= 9:  # compact: array lengths and the string's length are stored plus one
        return b"\x02" + uvarint(len(raw) + 1) + raw + b"\x02"
    return struct.pack(">ih", 1, len(raw)) + raw + struct.pack(">i", 1)
