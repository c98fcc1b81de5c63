"""Fetch: building the request, reading the answer, and where the next fetch starts.

Why the per-partition entry is its own object: a consumer fetching the same partitions over and
over builds each partition's entry once and only moves its ``fetch_offset`` (``move_entry``),
which keeps the request path free of per-fetch allocations.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from typing import Any, NamedTuple

from ...protocol.api_keys import ApiKey, request_class
from ...protocol.batch import BatchHeader, iter_batches
from ...protocol.control import read_marker
from ...protocol.errors import CorruptRecordError
from ...protocol.messages import make_request
from ...protocol.records import decode_batch_into
from .offsets import READ_UNCOMMITTED
from .structs import ConsumerRecord, TopicPartition

_FETCH: Any = request_class(ApiKey.Fetch)


class FetchedPartition(NamedTuple):
    tp: TopicPartition
    error: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    #: whole record batches, possibly followed by a truncated one (a fetch size cut it)
    records: bytes
    #: (producer id, first offset) of each aborted transaction in ``records`` (read_committed)
    aborted_transactions: tuple[tuple[int, int], ...] = ()


def fetch_entry(partition: int, offset: int, max_bytes: int) -> Any:
    """One partition's entry in a Fetch request."""
    return _FETCH.FetchTopic.FetchPartition(
        partition=partition, current_leader_epoch=-1, fetch_offset=offset,
        log_start_offset=-1, partition_max_bytes=max_bytes)


def move_entry(entry: Any, offset: int) -> Any:
    """Reuse an entry for the next fetch of its partition."""
    entry.fetch_offset = offset
    return entry


def fetch_request(version: int, entries: Iterable[tuple[str, Any]], *, max_wait_ms: int,
                  min_bytes: int = 1, max_bytes: int = 52_428_800,
                  isolation_level: int = READ_UNCOMMITTED, rack_id: str = "") -> Any:
    """A full Fetch (no fetch session: ``session_epoch`` -1) of ``(topic, entry)`` pairs."""
    topics: dict[str, list[Any]] = {}
    for topic, entry in entries:
        topics.setdefault(topic, []).append(entry)
    return make_request(
        ApiKey.Fetch, version, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
        max_bytes=max_bytes, isolation_level=isolation_level, session_id=0, session_epoch=-1,
        topics=[_FETCH.FetchTopic(topic=name, partitions=parts) for name, parts in topics.items()],
        forgotten_topics_data=[], rack_id=rack_id)


def parse_fetch(response: Any) -> tuple[int, dict[TopicPartition, FetchedPartition]]:
    """(top-level error code, {partition: what it returned})."""
    out: dict[TopicPartition, FetchedPartition] = {}
    for topic in response.responses:
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition_index)
            records = p.records
            if records is None:
                records = b""
            elif type(records) is not bytes:
                records = bytes(records)  # keys and values are slices of it: they must be bytes
            lso = p.last_stable_offset
            log_start = getattr(p, "log_start_offset", -1)  # v5+
            aborted = getattr(p, "aborted_transactions", None)  # v4+, null when none
            out[tp] = FetchedPartition(tp, p.error_code, p.high_watermark,
                                       -1 if lso is None else lso,
                                       -1 if log_start is None else log_start, records,
                                       tuple((a.producer_id, a.first_offset)
                                             for a in aborted or ()))
    return getattr(response, "error_code", 0) or 0, out  # the top-level code is v7+


def next_fetch_offset(records: bytes, fetch_offset: int) -> int:
    """The offset after the last whole batch in ``records`` (a truncated tail is ignored), or
    ``fetch_offset`` when there is no whole batch."""
    next_offset = fetch_offset
    for _, header in iter_batches(records):
        next_offset = max(next_offset, header.next_offset)
    return next_offset


def decode_fetched(tp: TopicPartition, records: bytes, start_offset: int, *,
                   check_crcs: bool = True,
                   aborted: tuple[tuple[int, int], ...] | None = None) -> list[ConsumerRecord]:
    """Every data record at or after ``start_offset`` in the whole batches of ``records``
    (control batches skipped, a truncated tail ignored), as ``ConsumerRecord`` tuples.

    ``aborted`` (read_committed: the response's aborted transactions, as (producer id, first
    offset)) also skips the batches of those transactions, as Java's ``CompletedFetch`` does: a
    producer's transactional batches are dropped from its aborted transaction's first offset up
    to the ABORT marker that ends it.

    The cyclic garbage collector is paused while the records are built: they are thousands of
    new container objects that cannot form cycles, and collecting in the middle of building
    them would walk them again and again for nothing (docs/benchmarks.md, "Clients").
    """
    if not gc.isenabled():
        return _decode_fetched(tp, records, start_offset, check_crcs, aborted)
    gc.disable()
    try:
        return _decode_fetched(tp, records, start_offset, check_crcs, aborted)
    finally:
        gc.enable()


def _decode_fetched(tp: TopicPartition, records: bytes, start_offset: int,
                    check_crcs: bool,
                    aborted: tuple[tuple[int, int], ...] | None) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    topic, partition = tp
    skip = None if aborted is None else _AbortedFilter(aborted)
    for pos, header in iter_batches(records):
        if skip is not None and skip.drops(records, pos, header):
            continue
        if header.is_control or header.next_offset <= start_offset:
            continue
        first = len(out)
        decode_batch_into(out, records, pos, header, cls=ConsumerRecord, topic=topic,
                          partition=partition, check_crc=check_crcs)
        if header.base_offset < start_offset:  # the batch holding the fetch offset
            out[first:] = [r for r in out[first:] if r.offset >= start_offset]
    return out


class _AbortedFilter:
    """Which batches read_committed drops: those of a producer between its aborted
    transaction's first offset and its ABORT marker (Java's ``abortedProducerIds``)."""

    __slots__ = ("_aborting", "_next", "_pending")

    def __init__(self, aborted: tuple[tuple[int, int], ...]) -> None:
        self._pending = sorted(aborted, key=lambda a: a[1])
        self._next = 0
        self._aborting: set[int] = set()

    def drops(self, records: bytes, pos: int, header: BatchHeader) -> bool:
        if header.producer_id < 0:
            return False
        pending = self._pending
        while self._next < len(pending) and pending[self._next][1] <= header.last_offset:
            self._aborting.add(pending[self._next][0])
            self._next += 1
        if header.is_control:
            if header.producer_id in self._aborting and _is_abort(records, pos, header):
                self._aborting.discard(header.producer_id)
            return True
        return header.is_transactional and header.producer_id in self._aborting


def _is_abort(records: bytes, pos: int, header: BatchHeader) -> bool:
    try:
        marker = read_marker(records, pos, header)
    except CorruptRecordError:  # a control record of a type this client does not know
        return False
    return marker is not None and not marker.committed


__all__ = ["FetchedPartition", "decode_fetched", "fetch_entry", "fetch_request", "move_entry",
           "next_fetch_offset", "parse_fetch"]
