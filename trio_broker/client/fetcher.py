"""The consumer's fetch pipeline: per-partition positions, pipelined Fetch requests, buffers.

Why pipelined: a consumer that asks for the next records only after the application has handled
the previous ones leaves the broker idle while the application works and the application idle
while the request travels. Here each leader node keeps one Fetch in flight, for all of its
assigned partitions, as long as none of them holds ``_MAX_BUFFERED`` unconsumed responses, so
the next chunk is usually already in memory when the application asks for it. A Fetch always
names all of a node's partitions: one that left a busy partition out would long-poll
(``fetch.max.wait.ms``) on caught-up partitions while the busy one drained.

Per partition::

    position       next offset the application will see (what ``commit()`` stores)
    fetch_offset   where the next Fetch starts: the end of what is buffered or in flight
    epoch          bumped by every seek/reset/revocation; a response or buffered chunk from an
                   older epoch is dropped, so a seek never returns records from before it

Invariant: the buffered chunks of a partition cover ``[position, fetch_offset)`` in order.

Records are decoded only when the application takes them (``collect``), chunk by chunk, straight
into ``ConsumerRecord`` tuples: the per-record loop is the consumer's hot path, so batch headers,
CRCs and decompression go through ``protocol.batch`` and ``protocol.compression`` while the loop
over records is written out here with the one-byte varint case inlined.
"""

from __future__ import annotations

import gc
import logging
import math
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import trio

from ..client_core.errors import KafkaError, describe_code, error_for
from ..protocol.api_keys import ApiKey, request_class
from ..protocol.batch import BATCH_HEADER_SIZE, LOG_APPEND_TIME, iter_batches, verify_crc
from ..protocol.compression import decompress
from ..protocol.errors import CorruptRecordError, ErrorCode
from .metadata import TopicPartition
from .network import NetworkClient, Wakeup

LOGGER = logging.getLogger(__name__)

_MAX_BUFFERED = 2  # unconsumed chunks per partition before it stops being fetched
_STALE_METADATA = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_ID,
})


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class PartitionState:
    """What the consumer knows about one assigned partition."""

    __slots__ = ("buffered", "epoch", "error", "fetch_offset", "high_watermark", "in_flight",
                 "last_stable_offset", "log_start_offset", "paused", "position", "request_entry",
                 "reset", "tp")

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.position: int | None = None
        self.fetch_offset: int | None = None
        #: None, "committed" (look up the group's offset), "earliest" or "latest"
        self.reset: str | None = "committed"
        self.epoch = 0
        self.paused = False
        self.buffered = 0
        self.in_flight = False
        self.high_watermark: int | None = None
        self.last_stable_offset: int | None = None
        self.log_start_offset: int | None = None
        self.error: KafkaError | None = None
        #: this partition's entry in Fetch requests, built once, its fetch_offset updated
        self.request_entry: Any = None

    def seek(self, offset: int) -> None:
        self.position = self.fetch_offset = offset
        self.reset = None
        self.epoch += 1
        self.error = None

    def request_reset(self, strategy: str) -> None:
        self.position = self.fetch_offset = None
        self.reset = strategy
        self.epoch += 1

    @property
    def fetching(self) -> bool:
        """Whether this partition takes part in Fetch requests at all right now."""
        return self.position is not None and not self.paused and self.error is None


class _Chunk:
    """One partition's records from one Fetch response, consumed front to back."""

    __slots__ = ("epoch", "index", "next_offset", "raw", "records", "start_offset", "state")

    def __init__(self, state: PartitionState, raw: bytes, start_offset: int,
                 next_offset: int) -> None:
        self.state = state
        self.epoch = state.epoch
        self.raw = raw
        self.start_offset = start_offset
        self.next_offset = next_offset
        self.records: list[ConsumerRecord] | None = None
        self.index = 0


class Fetcher:
    """Sends Fetch requests to partition leaders and buffers the answers for ``collect``."""

    def __init__(self, client: NetworkClient, config: dict[str, Any],
                 on_offset_out_of_range: Callable[[PartitionState], None]) -> None:
        self._client = client
        self.states: dict[TopicPartition, PartitionState] = {}
        self._chunks: deque[_Chunk] = deque()
        self._in_flight_nodes: set[int] = set()
        self._node_backoff: dict[int, float] = {}
        self._wakeup = Wakeup()
        self.data_ready = trio.Event()
        self._on_out_of_range = on_offset_out_of_range
        self._max_wait_ms = config["fetch.max.wait.ms"]
        self._min_bytes = config["fetch.min.bytes"]
        self._max_bytes = config["fetch.max.bytes"]
        self._partition_max_bytes = config["max.partition.fetch.bytes"]
        self._check_crcs = config["check.crcs"]
        self._rack = config["client.rack"]
        self._retry_backoff_s = config["retry.backoff.ms"] / 1000
        self._request_timeout_s = (config["request.timeout.ms"] + self._max_wait_ms) / 1000
        cls = request_class(ApiKey.Fetch)
        assert cls is not None
        self._topic_class = cls.FetchTopic
        self._partition_class = cls.FetchTopic.FetchPartition

    # --- assignment --------------------------------------------------------------------------

    def set_assignment(self, partitions: set[TopicPartition]) -> None:
        """Keep state for ``partitions`` only; dropped partitions lose their buffered data."""
        for tp in list(self.states):
            if tp not in partitions:
                state = self.states.pop(tp)
                state.epoch += 1
        for tp in partitions:
            if tp not in self.states:
                self.states[tp] = PartitionState(tp)
        self._chunks = deque(c for c in self._chunks
                             if c.state.tp in self.states and c.epoch == c.state.epoch)
        self.wakeup()

    def invalidate(self, state: PartitionState) -> None:
        """Drop buffered chunks of ``state`` (after a seek or reset bumped its epoch)."""
        kept: deque[_Chunk] = deque()
        for chunk in self._chunks:
            if chunk.state is state:
                state.buffered -= 1
            else:
                kept.append(chunk)
        self._chunks = kept
        self.wakeup()

    def wakeup(self) -> None:
        self._wakeup.set()

    def fetch_now(self) -> None:
        """Send the fetches that can go now from the calling task, skipping a task switch
        (called from response callbacks and ``collect``, the latency-critical spots)."""
        if self._send_fetches() != math.inf:
            self._wakeup.set()  # the fetcher task owns the retry timer

    # --- fetching ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Keep a Fetch in flight to every leader of assigned partitions (see the module doc)."""
        self._client.add_listener(self.wakeup)
        while True:
            delay = self._send_fetches()
            with trio.move_on_after(delay):
                await self._wakeup.wait()

    def _send_fetches(self) -> float:
        client = self._client
        metadata = client.metadata
        now = trio.current_time()
        next_check = math.inf
        by_node: dict[int, list[PartitionState]] = {}
        full_nodes: set[int] = set()
        missing_leader = False
        for state in self.states.values():
            if not state.fetching or state.in_flight:
                continue
            tp = state.tp
            info = metadata.topics.get(tp.topic)
            leader = info.leader(tp.partition) if info is not None else -1
            if leader < 0:
                missing_leader = True
                continue
            if leader in self._in_flight_nodes:
                continue
            if state.buffered >= _MAX_BUFFERED:
                # A Fetch leaving this partition out could long-poll on the others for
                # fetch.max.wait.ms while this one drains; wait and ask for all of them.
                full_nodes.add(leader)
                continue
            backoff_until = self._node_backoff.get(leader, 0.0)
            if backoff_until > now:
                next_check = min(next_check, backoff_until - now)
                continue
            by_node.setdefault(leader, []).append(state)
        for node_id in full_nodes:
            by_node.pop(node_id, None)
        if missing_leader:
            client.request_update()  # the client wakes us when the metadata arrives
        for node_id, states in by_node.items():
            conn = client.ready_connection(node_id)
            if conn is None:  # the client wakes us once it is connected
                delay = client.connect_delay(node_id)
                if delay > 0:
                    next_check = min(next_check, delay)
                continue
            if not conn.can_send():
                next_check = min(next_check, self._retry_backoff_s)
                continue
            self._send_fetch(conn, node_id, states)
        return next_check

    def _send_fetch(self, conn: Any, node_id: int, states: list[PartitionState]) -> None:
        topics: dict[str, list[Any]] = {}
        sent: list[tuple[PartitionState, int, int]] = []
        for state in states:
            assert state.fetch_offset is not None
            entry = state.request_entry
            if entry is None:
                entry = state.request_entry = self._partition_class(
                    partition=state.tp.partition, current_leader_epoch=-1,
                    fetch_offset=state.fetch_offset, log_start_offset=-1,
                    partition_max_bytes=self._partition_max_bytes)
            else:
                entry.fetch_offset = state.fetch_offset
            topics.setdefault(state.tp.topic, []).append(entry)
            state.in_flight = True
            sent.append((state, state.epoch, state.fetch_offset))
        body = {
            "replica_id": -1,
            "max_wait_ms": self._max_wait_ms,
            "min_bytes": self._min_bytes,
            "max_bytes": self._max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,  # no incremental fetch session: every fetch is a full one
            "topics": [self._topic_class(topic=name, partitions=parts)
                       for name, parts in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": self._rack,
        }
        self._in_flight_nodes.add(node_id)
        try:
            conn.send_nowait(ApiKey.Fetch, body, timeout_s=self._request_timeout_s,
                             callback=lambda request: self._on_response(node_id, sent, request))
        except KafkaError as exc:
            self._on_failure(node_id, sent, exc)

    def _on_failure(self, node_id: int, sent: list[tuple[PartitionState, int, int]],
                    error: BaseException) -> None:
        if not self._client.closed:
            LOGGER.info("fetch from node %s failed: %r", node_id, error)
        self._in_flight_nodes.discard(node_id)
        self._node_backoff[node_id] = trio.current_time() + self._retry_backoff_s
        for state, _, _ in sent:
            state.in_flight = False
        self._client.request_update()
        self.wakeup()

    def _on_response(self, node_id: int, sent: list[tuple[PartitionState, int, int]],
                     request: Any) -> None:
        if request.error is not None:
            self._on_failure(node_id, sent, request.error)
            return
        self._in_flight_nodes.discard(node_id)
        response = request.response
        results: dict[tuple[str, int], Any] = {}
        for topic in response.responses:
            for part in topic.partitions:
                results[(topic.topic, part.partition_index)] = part
        added = False
        stale = False
        for state, epoch, fetch_offset in sent:
            state.in_flight = False
            if epoch != state.epoch or self.states.get(state.tp) is not state:
                continue  # seeked, reset or revoked meanwhile
            part = results.get((state.tp.topic, state.tp.partition))
            if part is None:
                continue
            code = part.error_code
            if code == ErrorCode.NONE:
                state.high_watermark = part.high_watermark
                state.last_stable_offset = part.last_stable_offset
                state.log_start_offset = part.log_start_offset
                raw = part.records
                if raw and type(raw) is not bytes:
                    raw = bytes(raw)  # keys and values are slices of it: they must be bytes
                if raw:
                    next_offset = _next_offset(raw, fetch_offset)
                    if next_offset > fetch_offset:
                        self._chunks.append(_Chunk(state, raw, fetch_offset, next_offset))
                        state.buffered += 1
                        state.fetch_offset = next_offset
                        added = True
                    elif len(raw) >= self._partition_max_bytes:
                        LOGGER.warning("%s: a batch at offset %s is larger than "
                                       "max.partition.fetch.bytes (%s)", state.tp,
                                       fetch_offset, self._partition_max_bytes)
            elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                LOGGER.info("%s: offset %s out of range", state.tp, fetch_offset)
                self._on_out_of_range(state)
            elif code in _STALE_METADATA:
                stale = True
            else:
                state.error = error_for(code, f"fetching {state.tp.topic}-{state.tp.partition}: "
                                        f"{describe_code(code)}")
        if stale:
            self._client.request_update()
        if added:
            self.data_ready.set()
        self.fetch_now()

    # --- handing records to the application --------------------------------------------------

    def has_data(self) -> bool:
        return any(not c.state.paused for c in self._chunks)

    def collect(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Up to ``max_records`` buffered records, advancing each partition's position."""
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        remaining = max_records
        chunks = self._chunks
        skipped: list[_Chunk] = []
        refill = False
        while chunks and remaining > 0:
            chunk = chunks[0]
            state = chunk.state
            if chunk.epoch != state.epoch or self.states.get(state.tp) is not state:
                chunks.popleft()
                continue
            if state.paused:
                skipped.append(chunks.popleft())
                continue
            records = chunk.records
            if records is None:
                try:
                    records = chunk.records = decode_chunk(
                        state.tp, chunk.raw, chunk.start_offset, self._check_crcs)
                except CorruptRecordError as exc:
                    chunks.popleft()
                    state.buffered -= 1
                    state.error = error_for(ErrorCode.CORRUPT_MESSAGE,
                                            f"{state.tp.topic}-{state.tp.partition}: {exc}")
                    break
                chunk.raw = b""
            start = chunk.index
            end = min(len(records), start + remaining)
            if end > start:
                taken = records[start:end] if start or end < len(records) else records
                existing = out.get(state.tp)
                if existing is None:
                    out[state.tp] = taken
                else:
                    existing.extend(taken)
                remaining -= end - start
                chunk.index = end
                state.position = records[end - 1].offset + 1
            if end >= len(records):
                chunks.popleft()
                state.buffered -= 1
                state.position = chunk.next_offset
                refill = True
        if skipped:
            chunks.extendleft(reversed(skipped))
        if not self.has_data():
            self.data_ready = trio.Event()
        if refill:
            self.fetch_now()
        return out

    def raise_partition_errors(self) -> None:
        for state in self.states.values():
            if state.error is not None:
                error, state.error = state.error, None
                raise error


def _next_offset(raw: bytes, fetch_offset: int) -> int:
    """The offset after the last whole batch in ``raw`` (a truncated tail is ignored)."""
    next_offset = fetch_offset
    for _, header in iter_batches(raw):
        next_offset = max(next_offset, header.next_offset)
    return next_offset


def decode_chunk(tp: TopicPartition, raw: bytes, start_offset: int,
                 check_crcs: bool) -> list[ConsumerRecord]:
    """Every data record at or after ``start_offset`` in the whole batches of ``raw``.

    The cyclic garbage collector is paused while the records are built: they are thousands of
    new container objects that cannot form cycles, and collecting in the middle of building
    them cost a fifth of the consumer's time.
    """
    if not gc.isenabled():
        return _decode_chunk(tp, raw, start_offset, check_crcs)
    gc.disable()
    try:
        return _decode_chunk(tp, raw, start_offset, check_crcs)
    finally:
        gc.enable()


def _decode_chunk(tp: TopicPartition, raw: bytes, start_offset: int,
                  check_crcs: bool) -> list[ConsumerRecord]:
    topic, partition = tp
    out: list[ConsumerRecord] = []
    append = out.append
    new = tuple.__new__
    cls = ConsumerRecord
    view = memoryview(raw)
    for pos, header in iter_batches(view):
        if header.is_control or header.next_offset <= start_offset:
            continue
        if check_crcs:
            verify_crc(view, pos, header)
        end = pos + header.size
        if header.compression:
            data = decompress(header.compression, view[pos + BATCH_HEADER_SIZE:end])
            i, stop = 0, len(data)
        else:
            data, i, stop = raw, pos + BATCH_HEADER_SIZE, end
        base_offset = header.base_offset
        log_append = header.timestamp_type == LOG_APPEND_TIME
        base_ts = header.base_timestamp
        count = header.records_count
        # Offset deltas strictly increase; when the last is count - 1 they are 0, 1, 2, ...
        # (any batch not compacted), so the offsets come from a counter and the deltas are
        # only skipped.
        dense = header.last_offset_delta == count - 1
        first = len(out)
        try:
            for offset in range(base_offset, base_offset + count):
                # Varints of one and two bytes are inlined: at 100-byte values the record
                # length, the value length and the timestamp delta all take two.
                # length (skipped: the fields delimit themselves), then attributes (1 byte)
                if data[i] < 0x80:
                    i += 2
                elif data[i + 1] < 0x80:
                    i += 3
                else:
                    _, i = _varint(data, i)
                    i += 1
                # timestamp delta
                b = data[i]
                if b < 0x80:
                    ts_delta = (b >> 1) ^ -(b & 1)
                    i += 1
                else:
                    b2 = data[i + 1]
                    if b2 < 0x80:
                        b = (b & 0x7F) | (b2 << 7)
                        ts_delta = (b >> 1) ^ -(b & 1)
                        i += 2
                    else:
                        ts_delta, i = _varint(data, i)
                # offset delta
                if dense:
                    if data[i] < 0x80:
                        i += 1
                    elif data[i + 1] < 0x80:
                        i += 2
                    else:
                        _, i = _varint(data, i)
                else:
                    offset_delta, i = _varint(data, i)
                    offset = base_offset + offset_delta
                # key
                b = data[i]
                if b == 1:  # null, the common case
                    key = None
                    i += 1
                else:
                    if b < 0x80:
                        n = (b >> 1) ^ -(b & 1)
                        i += 1
                    else:
                        n, i = _varint(data, i)
                    if n < 0:
                        key = None
                    else:
                        key = data[i:i + n]
                        i += n
                # value
                b = data[i]
                if b < 0x80:
                    n = (b >> 1) ^ -(b & 1)
                    i += 1
                else:
                    b2 = data[i + 1]
                    if b2 < 0x80:
                        n = (b & 0x7F) | (b2 << 7)
                        n = (n >> 1) ^ -(n & 1)
                        i += 2
                    else:
                        n, i = _varint(data, i)
                if n < 0:
                    value = None
                else:
                    value = data[i:i + n]
                    i += n
                # headers
                if data[i] == 0:
                    headers: tuple[tuple[str, bytes | None], ...] = ()
                    i += 1
                else:
                    count, i = _varint(data, i)
                    headers, i = _headers(data, i, count)
                append(new(cls, (topic, partition, offset, base_ts + ts_delta, 0, key, value,
                                 headers)))
        except IndexError:
            raise CorruptRecordError(f"record runs past the end of the batch at offset "
                                     f"{base_offset}") from None
        if i != stop:
            raise CorruptRecordError(f"batch at offset {base_offset}: records end at byte "
                                     f"{i - pos}, batch at {stop - pos}")
        if log_append:  # every record carries the broker's time (rare: a topic setting)
            max_ts = header.max_timestamp
            out[first:] = [r._replace(timestamp=max_ts, timestamp_type=1) for r in out[first:]]
        if base_offset < start_offset:  # the batch holding the fetch offset starts before it
            out[first:] = [r for r in out[first:] if r.offset >= start_offset]
    return out


def _varint(data: Any, i: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), i
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def _headers(data: Any, i: int,
             count: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    if count < 0 or count > len(data) - i:
        raise CorruptRecordError(f"header count {count} overruns the record")
    headers = []
    for _ in range(count):
        n, i = _varint(data, i)
        if n < 0:
            raise CorruptRecordError("record header key is null")
        try:
            name = bytes(data[i:i + n]).decode()
        except UnicodeDecodeError:
            raise CorruptRecordError("record header key is not UTF-8") from None
        i += n
        n, i = _varint(data, i)
        if n < 0:
            value = None
        else:
            value = bytes(data[i:i + n])
            i += n
        headers.append((name, value))
    return tuple(headers), i
