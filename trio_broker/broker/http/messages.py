"""The message browser and the produce form: Fetch and Produce through the console's client.

Why bounded this way: a browser page must never turn into a bulk export that holds the broker.
A view shows at most ``MAX_LIMIT`` records; it reads at most ``FETCH_BUDGET_BYTES`` in
``MAX_ROUNDS`` Fetch requests of at most ``PARTITION_FETCH_BYTES`` per partition (with
``max_wait_ms=0``, so no fetch is parked), and a substring filter scans at most ``SCAN_LIMIT``
records. When a bound stops the scan early the page says so.

Values are shown as pretty JSON, text or hex, chosen from the bytes (an object or array that
parses is JSON, valid UTF-8 without control characters is text, anything else hex), with an
override per view; a value longer than ``MAX_SHOWN_BYTES`` is cut, and the cut is shown. A key
or value in Confluent's wire format is shown decoded with its schema when the broker serves a
Schema Registry that knows the id (``schema_values.py``), in the "auto" view.
"""

from __future__ import annotations

import datetime
import functools
import json
from collections.abc import Sequence
from typing import Any, NamedTuple

import attrs

from ...client.core.errors import describe_code, error_for
from ...client.core.fetch import decode_fetched, fetch_entry, fetch_request, parse_fetch
from ...client.core.metadata import TopicInfo
from ...client.core.partitioner import any_partition, partition_for_key
from ...client.core.produce import parse_produce, produce_request
from ...client.core.structs import ConsumerRecord, TopicPartition
from ...protocol.api_keys import ApiKey
from ...protocol.records import build_batch
from . import schema_values
from .reads import KafkaView, Offsets

MAX_LIMIT = 500
DEFAULT_LIMIT = 50
SCAN_LIMIT = 10_000
PARTITION_FETCH_BYTES = 1 << 20
FETCH_BUDGET_BYTES = 16 << 20
MAX_ROUNDS = 64
MAX_SHOWN_BYTES = 16 << 10
FORMATS = ("auto", "json", "text", "hex")
MODES = ("newest", "offset", "timestamp")


@attrs.frozen
class BrowseQuery:
    partition: int | None = None
    mode: str = "newest"
    offset: int = 0
    timestamp_ms: int = 0
    limit: int = DEFAULT_LIMIT
    fmt: str = "auto"
    filter: str = ""


class Shown(NamedTuple):
    """A key, value or header value as the page shows it."""

    fmt: str
    text: str
    size: int
    cut: bool
    #: the schema it was decoded with ("AVRO schema 3, orders-value"), or nothing
    schema: str = ""
    #: why a value in Confluent's wire format is shown raw, or nothing
    note: str = ""


class ShownRecord(NamedTuple):
    partition: int
    offset: int
    timestamp: int
    time: str
    key: Shown
    value: Shown
    headers: list[tuple[str, Shown]]


@attrs.define
class BrowseResult:
    records: list[ShownRecord]
    scanned: int = 0
    notes: list[str] = attrs.Factory(list)


def show(data: bytes | None, fmt: str = "auto") -> Shown:
    """``data`` as JSON (pretty), text or hex: ``fmt``, or chosen from the bytes for "auto"."""
    if data is None:
        return Shown("null", "null", 0, False)
    size = len(data)
    cut = size > MAX_SHOWN_BYTES
    head = data[:MAX_SHOWN_BYTES]
    if fmt == "hex":
        return Shown("hex", _hex(head), size, cut)
    text: str | None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = head.decode("utf-8", "replace") if fmt == "text" else None
    if text is None:
        return Shown("hex", _hex(head), size, cut)
    if fmt in ("auto", "json") and not cut:
        stripped = text.strip()
        if fmt == "json" or stripped[:1] in ("{", "["):
            try:
                pretty = json.dumps(json.loads(stripped), indent=2, ensure_ascii=False)
            except (ValueError, RecursionError):  # any producer may nest [ a thousand deep
                pass
            else:
                return Shown("json", pretty, size, cut)
    if fmt == "auto" and any(ord(c) < 32 and c not in "\t\n\r" for c in text):
        return Shown("hex", _hex(head), size, cut)
    return Shown("text", text, size, cut)


def parse_time(text: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 date and time (UTC unless it says)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def _hex(data: bytes) -> str:
    return "\n".join(data[i:i + 16].hex(" ") for i in range(0, len(data), 16))


def format_time(timestamp_ms: int) -> str:
    if timestamp_ms < 0:
        return ""
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def _shown(record: ConsumerRecord, fmt: str, registry: Any) -> ShownRecord:
    return ShownRecord(record.partition, record.offset, record.timestamp,
                       format_time(record.timestamp),
                       await _show_framed(record.key, record.topic, True, fmt, registry,
                                          record.headers),
                       await _show_framed(record.value, record.topic, False, fmt, registry,
                                          record.headers),
                       [(name, show(value, fmt)) for name, value in record.headers])


async def _show_framed(data: bytes | None, topic: str, is_key: bool, fmt: str,
                       registry: Any, headers: Sequence[tuple[str, bytes | None]]) -> Shown:
    """``data`` decoded with its schema when it is in Confluent's wire format (or a header
    names its schema by GUID) and ``fmt`` is "auto", else as ``show`` shows it (with a note
    when the schema could not decode it)."""
    if registry is None or fmt != "auto" or data is None:
        return show(data, fmt)
    header = schema_values.guid_header(headers, is_key=is_key)
    if header is not None:
        decoded = await schema_values.decode_by_header(registry, header, data, topic,
                                                       is_key=is_key)
    elif schema_values.is_framed(data):
        decoded = await schema_values.decode(registry, data, topic, is_key=is_key)
    else:
        return show(data, fmt)
    if isinstance(decoded, str):
        return show(data, fmt)._replace(note=decoded)
    cut = len(decoded.text) > MAX_SHOWN_BYTES
    return Shown("json", decoded.text[:MAX_SHOWN_BYTES], len(data), cut,
                 f"{decoded.schema_type} schema {decoded.schema_id}, {decoded.subject}")


def _matches(record: ConsumerRecord, needle: bytes) -> bool:
    return any(needle in (data or b"").lower() for data in (record.key, record.value))


async def browse(view: KafkaView, info: TopicInfo, offsets: dict[TopicPartition, Offsets],
                 query: BrowseQuery, registry: Any = None) -> BrowseResult:
    """The records ``query`` asks for, newest first for "newest", else oldest first; keys and
    values in Confluent's wire format decoded with ``registry``'s schemas when there is one."""
    numbers = sorted(info.partitions) if query.partition is None else [query.partition]
    limit = max(1, min(query.limit, MAX_LIMIT))
    needle = query.filter.lower().encode()
    per_partition = limit if not needle else max(limit, SCAN_LIMIT // max(1, len(numbers)))
    starts: dict[TopicPartition, int] = {}
    ends: dict[TopicPartition, int] = {}
    timestamps = {}
    if query.mode == "timestamp":
        timestamps = await _offsets_for_time(view, info, numbers, query.timestamp_ms)
    for number in numbers:
        tp = TopicPartition(info.name, number)
        found = offsets.get(tp)
        if found is None or found.error:
            continue
        if query.mode == "newest":
            start = max(found.start, found.end - per_partition)
        elif query.mode == "offset":
            start = min(max(query.offset, found.start), found.end)
        else:
            start = timestamps.get(tp, -1)
            start = found.end if start < 0 else max(start, found.start)
        if start < found.end:
            starts[tp], ends[tp] = start, found.end
    result = BrowseResult([])
    collected = await _fetch(view, info, starts, ends, per_partition, needle, result)
    if query.partition is not None:
        collected.sort(key=lambda r: r.offset, reverse=query.mode == "newest")
    else:
        collected.sort(key=lambda r: (r.timestamp, r.partition, r.offset),
                       reverse=query.mode == "newest")
    if len(collected) > limit:
        collected = collected[:limit]
    result.records = [await _shown(r, query.fmt, registry) for r in collected]
    return result


async def _offsets_for_time(view: KafkaView, info: TopicInfo, numbers: Sequence[int],
                            timestamp_ms: int) -> dict[TopicPartition, int]:
    """ListOffsets by timestamp: the first offset at or after it, per partition (-1: none)."""
    chosen = TopicInfo(info.name, info.error, info.internal,
                       [info.partitions[n] for n in numbers if n in info.partitions])
    found = await view.offsets([chosen], timestamp_ms)
    return {tp: offset for tp, (code, offset) in found.items() if not code}


async def _fetch(view: KafkaView, info: TopicInfo, starts: dict[TopicPartition, int],
                 ends: dict[TopicPartition, int], per_partition: int, needle: bytes,
                 result: BrowseResult) -> list[ConsumerRecord]:
    """Fetch forward from ``starts`` until ``ends``, ``per_partition`` matches or a bound."""
    positions = dict(starts)
    found: dict[TopicPartition, int] = dict.fromkeys(starts, 0)
    out: list[ConsumerRecord] = []
    budget = FETCH_BUDGET_BYTES
    for _ in range(MAX_ROUNDS):
        active = [tp for tp, pos in positions.items()
                  if pos < ends[tp] and found[tp] < per_partition]
        if not active or budget <= 0 or result.scanned >= SCAN_LIMIT:
            break
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in active:
            by_leader.setdefault(info.leader(tp.partition), []).append(tp)
        for leader, tps in by_leader.items():
            entries = [(tp.topic, fetch_entry(tp.partition, positions[tp], PARTITION_FETCH_BYTES))
                       for tp in tps]
            round_bytes = min(budget, 4 * PARTITION_FETCH_BYTES)
            response = await view.client.request(leader, ApiKey.Fetch, functools.partial(
                fetch_request, entries=entries, max_wait_ms=0, max_bytes=round_bytes))
            code, parts = parse_fetch(response)
            if code:
                raise error_for(code, f"Fetch: {describe_code(code)}")
            for tp in tps:
                part = parts.get(tp)
                if part is None or part.error:
                    if part is not None:
                        result.notes.append(f"partition {tp.partition}: "
                                            f"{describe_code(part.error)}")
                    positions[tp] = ends[tp]
                    continue
                budget -= len(part.records)
                records = decode_fetched(tp, part.records, positions[tp])
                if not records:
                    positions[tp] = ends[tp]  # nothing more can be read (e.g. only control)
                    continue
                for record in records:
                    if record.offset >= ends[tp] or found[tp] >= per_partition:
                        break
                    result.scanned += 1
                    if not needle or _matches(record, needle):
                        out.append(record)
                        found[tp] += 1
                positions[tp] = records[-1].offset + 1
    else:
        result.notes.append(f"stopped after {MAX_ROUNDS} fetches")
    if budget <= 0:
        result.notes.append(f"stopped after reading {FETCH_BUDGET_BYTES >> 20} MiB")
    if needle and result.scanned >= SCAN_LIMIT:
        result.notes.append(f"the filter scanned the {SCAN_LIMIT} records nearest the start "
                            "point")
    return out


# --- produce ----------------------------------------------------------------------------------

def parse_headers(text: str) -> list[tuple[str, bytes]]:
    """``name: value`` (or ``name=value``) lines -> record headers."""
    headers = []
    for line in text.splitlines():
        if not line.strip():
            continue
        colon, equals = line.find(":"), line.find("=")
        cut = min(i for i in (colon, equals, len(line)) if i >= 0)
        name, value = line[:cut].strip(), line[cut + 1:].strip()
        if not name:
            raise ValueError(f"header line {line!r} has no name")
        headers.append((name, value.encode()))
    return headers


def choose_partition(info: TopicInfo, partition: int | None, key: bytes | None) -> int:
    """The page's choice, else Kafka's default partitioner: murmur2 of the key, else any."""
    if partition is not None:
        if partition not in info.partitions:
            raise ValueError(f"topic {info.name!r} has no partition {partition}")
        return partition
    if key is not None:
        return partition_for_key(key, info.num_partitions)
    return any_partition(info.available, info.partitions)


async def produce(view: KafkaView, info: TopicInfo, partition: int, key: bytes | None,
                  value: bytes | None, headers: list[tuple[str, bytes]]) -> int:
    """Produce one record (acks=all); returns its offset."""
    batch = build_batch([(key, value, headers)])
    response = await view.client.request(info.leader(partition), ApiKey.Produce, lambda v: (
        produce_request(v, [(info.name, partition, batch)], acks=-1, timeout_ms=10_000)))
    result: Any = parse_produce(response)[TopicPartition(info.name, partition)]
    if result.error:
        raise error_for(result.error, f"producing to {info.name}-{partition}: "
                        f"{describe_code(result.error)}")
    return int(result.base_offset)
