"""Source options (named as Spark's Kafka source names them) and offset-range planning.

Why a module of its own: the batch reader, the stream reader and ``trio-broker export`` all turn
the same options into the same thing, a list of per-partition ``[start, end)`` offset ranges,
and all of it runs in the driver, where a mistake can still become a clear message instead of a
failed task.

Offset JSON is Spark's: ``{"topic": {"0": 23, "1": -2}}`` with -2 = earliest, -1 = latest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..blocking_client import (
    EARLIEST,
    LATEST,
    BlockingClient,
    ConfigError,
    TopicPartition,
    parse_bootstrap,
)
from ..client_core.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from ..client_core.security import SECURITY_DEFAULTS, resolve_security
from ..protocol.errors import ErrorCode

#: what ``failOnDataLoss`` errors end with, as Spark's do
DATA_LOSS_HINT = ("If you want the query to skip lost data instead of failing, set the source "
                  "option 'failOnDataLoss' to 'false'.")

DEFAULT_MAX_PARTITION_FETCH_BYTES = 8 << 20
DEFAULT_REQUEST_TIMEOUT_MS = 30_000

#: hidden option: ``host:port`` the export command listens on for executor progress datagrams
PROGRESS_OPTION = "trio_broker.progressaddress"


class SourceOptionError(ConfigError):
    """An option is missing, malformed or not allowed for this kind of query."""


OffsetSpec = str | dict[TopicPartition, int]  # "earliest" | "latest" | per-partition offsets


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscribe: tuple[str, ...] | None
    subscribe_pattern: str | None
    assign: tuple[TopicPartition, ...] | None
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp: int | None
    starting_timestamp_strategy: str
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    max_records_per_partition: int | None
    include_headers: bool
    fail_on_data_loss: bool
    request_timeout_ms: int
    max_partition_fetch_bytes: int
    client_id: str
    progress_address: tuple[str, int] | None
    #: TLS and SASL settings: the ``kafka.``-prefixed options named as the client core names
    #: them (``kafka.security.protocol``, ``kafka.sasl.username``, ...), without the prefix
    security: tuple[tuple[str, str], ...] = ()

    def client(self) -> BlockingClient:
        return BlockingClient(self.bootstrap_servers, timeout_s=self.request_timeout_ms / 1000,
                              client_id=self.client_id, config=dict(self.security))


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int  # exclusive

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def parse_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate options the way Spark's Kafka source does, with its wording where it has one."""
    opts = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
    servers = opts.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise SourceOptionError("Option 'kafka.bootstrap.servers' must be specified for "
                                "configuring Kafka consumer")
    strategies = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if not strategies:
        raise SourceOptionError("One of the following options must be specified for Kafka "
                                "source: subscribe, subscribePattern, assign")
    if len(strategies) > 1:
        raise SourceOptionError("Only one of the following options can be specified for Kafka "
                                "source: subscribe, subscribePattern, assign; got "
                                + ", ".join(strategies))
    subscribe = pattern = assign = None
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise SourceOptionError("No topics to subscribe to: option 'subscribe' is empty")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise SourceOptionError("Pattern to subscribe is empty: option 'subscribePattern'")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SourceOptionError(f"subscribePattern {pattern!r} is not a regular expression: "
                                    f"{exc}") from None
    else:
        assign = _parse_assign(opts["assign"])

    starting = _parse_offset_spec(opts.get("startingoffsets", "latest" if streaming
                                           else "earliest"), "startingOffsets")
    ending = _parse_offset_spec(opts.get("endingoffsets", "latest"), "endingOffsets")
    if streaming and "endingoffsets" in opts:
        raise SourceOptionError("Option 'endingOffsets' is not valid for streaming queries")
    if not streaming:
        if starting == "latest" or (isinstance(starting, dict) and LATEST in starting.values()):
            raise SourceOptionError("Starting offset can't be latest for batch queries on Kafka")
        if ending == "earliest" or (isinstance(ending, dict) and EARLIEST in ending.values()):
            raise SourceOptionError("Ending offset can't be earliest for batch queries on Kafka")

    starting_ts = None
    if "startingtimestamp" in opts:
        starting_ts = _parse_int(opts["startingtimestamp"], "startingTimestamp", minimum=0)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise SourceOptionError("startingOffsetsByTimestampStrategy must be 'error' or 'latest'")

    progress = None
    if PROGRESS_OPTION in opts:
        host, _, port = opts[PROGRESS_OPTION].rpartition(":")
        progress = (host, int(port))
    security = tuple(sorted((key, opts[f"kafka.{key}"]) for key in SECURITY_DEFAULTS
                            if f"kafka.{key}" in opts))
    # A bad address or security setting fails here, before any task starts.
    try:
        parse_bootstrap(servers)
    except ConfigError as exc:
        raise SourceOptionError(f"{exc} (option 'kafka.bootstrap.servers')") from None
    try:
        resolve_security({**SECURITY_DEFAULTS, **dict(security)}, servers)
    except ConfigError as exc:
        raise SourceOptionError(f"{exc} (set as option 'kafka.<key>')") from None

    return SourceOptions(
        bootstrap_servers=servers,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        starting_timestamp=starting_ts,
        starting_timestamp_strategy=strategy,
        max_offsets_per_trigger=_optional_positive(opts, "maxoffsetspertrigger",
                                                   "maxOffsetsPerTrigger"),
        min_partitions=_optional_positive(opts, "minpartitions", "minPartitions"),
        max_records_per_partition=_optional_positive(opts, "maxrecordsperpartition",
                                                     "maxRecordsPerPartition"),
        include_headers=_parse_bool(opts.get("includeheaders", "false"), "includeHeaders"),
        fail_on_data_loss=_parse_bool(opts.get("failondataloss", "true"), "failOnDataLoss"),
        request_timeout_ms=_parse_int(
            opts.get("kafka.request.timeout.ms", str(DEFAULT_REQUEST_TIMEOUT_MS)),
            "kafka.request.timeout.ms", minimum=1),
        max_partition_fetch_bytes=_parse_int(
            opts.get("kafka.max.partition.fetch.bytes", str(DEFAULT_MAX_PARTITION_FETCH_BYTES)),
            "kafka.max.partition.fetch.bytes", minimum=1024),
        client_id=opts.get("kafka.client.id", "trio-broker-spark"),
        progress_address=progress,
        security=security,
    )


def _parse_bool(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise SourceOptionError(f"Option '{name}' must be true or false, got {value!r}")
    return lowered == "true"


def _parse_int(value: str, name: str, *, minimum: int) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise SourceOptionError(f"Option '{name}' must be an integer, got {value!r}") from None
    if number < minimum:
        raise SourceOptionError(f"Option '{name}' must be at least {minimum}, got {number}")
    return number


def _optional_positive(opts: Mapping[str, str], key: str, name: str) -> int | None:
    return _parse_int(opts[key], name, minimum=1) if key in opts else None


def _load_json(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceOptionError(f"Option '{name}' is not valid JSON ({exc}): {text!r}") from None


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    data = _load_json(text, "assign")
    if not isinstance(data, dict) or not all(
            isinstance(v, list) and all(isinstance(p, int) for p in v) for v in data.values()):
        raise SourceOptionError(
            'Option \'assign\' must be JSON like {"topicA":[0,1],"topicB":[2,4]}, got '
            + repr(text))
    tps = tuple(TopicPartition(t, p) for t, parts in data.items() for p in parts)
    if not tps:
        raise SourceOptionError("Option 'assign' names no partitions")
    return tps


def _parse_offset_spec(text: str, name: str) -> OffsetSpec:
    lowered = text.strip().lower()
    if lowered in ("earliest", "latest"):
        return lowered
    data = _load_json(text, name)
    if not isinstance(data, dict):
        raise SourceOptionError(f"Option '{name}' must be 'earliest', 'latest' or JSON like "
                                f'{{"topicA":{{"0":23,"1":-2}}}}, got {text!r}')
    spec: dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise SourceOptionError(f"Option '{name}': offsets of topic {topic!r} must be a JSON "
                                    f'object like {{"0":23}}')
        for part, offset in parts.items():
            if not str(part).lstrip("-").isdigit() or not isinstance(offset, int) \
                    or isinstance(offset, bool) or offset < EARLIEST:
                raise SourceOptionError(f"Option '{name}': bad offset {offset!r} for partition "
                                        f"{part!r} of topic {topic!r}")
            spec[TopicPartition(topic, int(part))] = offset
    return spec


def offsets_json(offsets: Mapping[TopicPartition, int]) -> str:
    """Spark's offset JSON for a map of partition offsets (sorted, so equal maps are equal text)."""
    return json.dumps(offsets_dict(offsets), sort_keys=True)


def offsets_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def parse_offsets_dict(data: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): int(o) for t, parts in data.items()
            for p, o in parts.items()}


# --- planning (driver side) ----------------------------------------------------------------

def subscribed_partitions(client: BlockingClient, opts: SourceOptions) -> list[TopicPartition]:
    """The partitions the subscription covers right now; unknown topics are an error."""
    if opts.subscribe is not None:
        return client.partitions_for(opts.subscribe)
    if opts.assign is not None:
        topics = sorted({tp.topic for tp in opts.assign})
        existing = set(client.partitions_for(topics))
        missing = [str(tp) for tp in opts.assign if tp not in existing]
        if missing:
            raise UnknownTopicOrPartitionError("assigned partitions do not exist: "
                                               + ", ".join(missing))
        return sorted(set(opts.assign))
    assert opts.subscribe_pattern is not None
    pattern = re.compile(opts.subscribe_pattern)
    matched = [info for name, info in client.metadata(None).topics.items()
               if pattern.fullmatch(name) and not info.internal
               and info.error in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)]
    return sorted(TopicPartition(t.name, p) for t in matched for p in t.partitions)


def resolve_offsets(client: BlockingClient, tps: Iterable[TopicPartition], spec: OffsetSpec,
                    name: str) -> dict[TopicPartition, int]:
    """Concrete offsets for ``spec`` on ``tps`` (JSON must name every partition, as in Spark)."""
    tps = sorted(set(tps))
    if not tps:
        return {}
    if isinstance(spec, str):
        return client.list_offsets({tp: EARLIEST if spec == "earliest" else LATEST
                                    for tp in tps})
    missing = [str(tp) for tp in tps if tp not in spec]
    extra = [str(tp) for tp in spec if tp not in set(tps)]
    if missing or extra:
        detail = []
        if missing:
            detail.append("missing " + ", ".join(missing))
        if extra:
            detail.append("not subscribed or not existing: " + ", ".join(extra))
        raise SourceOptionError(
            f"If {name} contains specific offsets, you must specify all TopicPartitions "
            f"({'; '.join(detail)}). Use -1 for latest, -2 for earliest.")
    special = {tp: spec[tp] for tp in tps if spec[tp] in (EARLIEST, LATEST)}
    out = {tp: spec[tp] for tp in tps if tp not in special}
    if special:
        out.update(client.list_offsets(special))
    return out


def starting_offsets(client: BlockingClient, tps: Iterable[TopicPartition],
                     opts: SourceOptions) -> dict[TopicPartition, int]:
    """``startingTimestamp`` if given, else ``startingOffsets``."""
    tps = sorted(set(tps))
    if opts.starting_timestamp is None:
        return resolve_offsets(client, tps, opts.starting, "startingOffsets")
    found = client.list_offsets({tp: opts.starting_timestamp for tp in tps})
    unmatched = [tp for tp, offset in found.items() if offset < 0]
    if unmatched:
        if opts.starting_timestamp_strategy == "error":
            raise SourceOptionError(
                f"No offset matched startingTimestamp {opts.starting_timestamp} for "
                + ", ".join(map(str, unmatched))
                + ": no record at or after that time. Set "
                "startingOffsetsByTimestampStrategy=latest to start those at the latest offset.")
        found.update(client.list_offsets({tp: LATEST for tp in unmatched}))
    return found


def check_range(client: BlockingClient, starts: Mapping[TopicPartition, int],
                ends: Mapping[TopicPartition, int], *, fail_on_data_loss: bool,
                earliest: Mapping[TopicPartition, int] | None = None,
                latest: Mapping[TopicPartition, int] | None = None) -> list[OffsetRange]:
    """Ranges for ``starts``..``ends``, checked against what the log holds now.

    A start below the log start offset means retention already deleted records: an error, or
    with ``failOnDataLoss=false`` the range starts at the log start. An end past the log end is
    an error either way (those records do not exist yet).
    """
    tps = sorted(starts)
    if earliest is None:
        earliest = client.list_offsets({tp: EARLIEST for tp in tps}) if tps else {}
    if latest is None:
        latest = client.list_offsets({tp: LATEST for tp in tps}) if tps else {}
    ranges = []
    for tp in tps:
        start, end = starts[tp], ends[tp]
        if end > latest[tp]:
            raise OffsetOutOfRangeError(
                f"ending offset {end} of {tp} is past the end of the log (latest offset "
                f"{latest[tp]})")
        if start < earliest[tp]:
            if fail_on_data_loss:
                raise OffsetOutOfRangeError(
                    f"offsets {start}..{min(end, earliest[tp]) - 1} of {tp} are no longer "
                    f"available: retention deleted them (the log starts at offset "
                    f"{earliest[tp]}). Some data may have been lost. {DATA_LOSS_HINT}")
            start = min(earliest[tp], end)
        if start > end:
            raise SourceOptionError(f"starting offset {start} of {tp} is after its ending "
                                    f"offset {end}")
        ranges.append(OffsetRange(tp.topic, tp.partition, start, end))
    return ranges


def split_ranges(ranges: list[OffsetRange], *, min_partitions: int | None,
                 max_records: int | None) -> list[OffsetRange]:
    """One range per partition, split into equal pieces when there are fewer ranges than
    ``min_partitions`` (so that many tasks of similar size result) or a range holds more than
    ``max_records``."""
    ranges = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in ranges)
    target = None
    if min_partitions is not None and len(ranges) < min_partitions and total:
        target = -(-total // min_partitions)
    if max_records is not None:
        target = max_records if target is None else min(target, max_records)
    out = []
    for r in ranges:
        parts = 1 if target is None else min(r.size, -(-r.size // target))
        for i in range(parts):
            lo = r.start + r.size * i // parts
            hi = r.start + r.size * (i + 1) // parts
            out.append(OffsetRange(r.topic, r.partition, lo, hi))
    return out


def rate_limit(starts: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               limit: int) -> dict[TopicPartition, int]:
    """End offsets that take at most about ``limit`` records, shared in proportion to each
    partition's backlog; small backlogs get at least one record so none starves."""
    backlog = {tp: max(0, latest[tp] - starts.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    ends = {}
    for tp, end in latest.items():
        start = starts.get(tp, end)
        share = limit * backlog[tp] / total
        take = int(share) if share >= 1 else (1 if backlog[tp] else 0)
        ends[tp] = min(end, start + take)
    return ends
