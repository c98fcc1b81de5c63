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
into ``ConsumerRecord`` tuples by the one record decoder (``client.core.fetch.decode_fetched`` over
``protocol.records``).
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable
from typing import Any

import trio

from ....protocol.api_keys import ApiKey
from ....protocol.errors import CorruptRecordError, ErrorCode
from ...core.errors import KafkaError, describe_code, error_for
from ...core.fetch import (
    decode_fetched,
    fetch_entry,
    fetch_request,
    move_entry,
    next_fetch_offset,
    parse_fetch,
)
from ...core.structs import ConsumerRecord, TopicPartition
from ..network import NetworkClient, Wakeup
from .subscription_state import PartitionState, SubscriptionState

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


class _Chunk:
    """One partition's records from one Fetch response, consumed front to back."""

    __slots__ = ("aborted", "epoch", "index", "next_offset", "raw", "records", "start_offset",
                 "state")

    def __init__(self, state: PartitionState, raw: bytes, start_offset: int,
                 next_offset: int, aborted: tuple[tuple[int, int], ...] | None) -> None:
        self.state = state
        #: read_committed: the response's aborted transactions (None: read_uncommitted)
        self.aborted = aborted
        self.epoch = state.epoch
        self.raw = raw
        self.start_offset = start_offset
        self.next_offset = next_offset
        self.records: list[ConsumerRecord] | None = None
        self.index = 0


class Fetcher:
    """Sends Fetch requests to partition leaders and buffers the answers for ``collect``."""

    def __init__(self, client: NetworkClient, config: dict[str, Any],
                 subscriptions: SubscriptionState,
                 on_offset_out_of_range: Callable[[PartitionState], None]) -> None:
        self._client = client
        #: the assigned partitions' states (the subscription state's, shared)
        self.states = subscriptions.states
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
        self._read_committed = config["isolation.level"] == "read_committed"
        self._retry_backoff_s = config["retry.backoff.ms"] / 1000
        self._request_timeout_s = (config["request.timeout.ms"] + self._max_wait_ms) / 1000

    # --- assignment --------------------------------------------------------------------------

    def assignment_changed(self) -> None:
        """Drop buffered data of partitions no longer assigned (or seeked meanwhile)."""
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
        entries: list[tuple[str, Any]] = []
        sent: list[tuple[PartitionState, int, int]] = []
        for state in states:
            offset = state.fetch_offset
            assert offset is not None
            entry = state.request_entry
            if entry is None:
                entry = state.request_entry = fetch_entry(state.tp.partition, offset,
                                                          self._partition_max_bytes)
            else:
                move_entry(entry, offset)
            entries.append((state.tp.topic, entry))
            state.in_flight = True
            sent.append((state, state.epoch, offset))

        def body(version: int) -> Any:
            return fetch_request(version, entries, max_wait_ms=self._max_wait_ms,
                                 min_bytes=self._min_bytes, max_bytes=self._max_bytes,
                                 isolation_level=int(self._read_committed), rack_id=self._rack)

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
        _, results = parse_fetch(request.response)
        added = False
        stale = False
        for state, epoch, fetch_offset in sent:
            state.in_flight = False
            if epoch != state.epoch or self.states.get(state.tp) is not state:
                continue  # seeked, reset or revoked meanwhile
            part = results.get(state.tp)
            if part is None:
                continue
            code = part.error
            if code == ErrorCode.NONE:
                state.high_watermark = part.high_watermark
                state.last_stable_offset = part.last_stable_offset
                state.log_start_offset = part.log_start_offset
                raw = part.records
                if raw:
                    next_offset = next_fetch_offset(raw, fetch_offset)
                    if next_offset > fetch_offset:
                        self._chunks.append(_Chunk(
                            state, raw, fetch_offset, next_offset,
                            part.aborted_transactions if self._read_committed else None))
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
                    records = chunk.records = decode_fetched(
                        state.tp, chunk.raw, chunk.start_offset, check_crcs=self._check_crcs,
                        aborted=chunk.aborted)
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
