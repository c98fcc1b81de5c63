"""Source options, named and checked as Spark's Kafka source names and checks them.

Why a module of its own: the batch reader, the stream reader and ``trio-broker export`` read the
same options, and every check runs in the driver, where a mistake can still become a clear
message instead of a failed task. ``_planning`` turns the checked options into offset ranges.

Where a read starts (and, in batch, ends), by Spark's precedence: ``startingTimestamp`` (one
timestamp for every partition) over ``startingOffsetsByTimestamp`` (JSON per partition) over
``startingOffsets``; likewise ``endingTimestamp`` / ``endingOffsetsByTimestamp`` /
``endingOffsets``. Only the option that wins is read, as in Spark.

Offset JSON is Spark's: ``{"topic": {"0": 23, "1": -2}}`` with -2 = earliest, -1 = latest.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..client.blocking import (
    EARLIEST,
    LATEST,
    BlockingClient,
    ConfigError,
    TopicPartition,
    parse_bootstrap,
)
from ..client.core.security import SECURITY_DEFAULTS, resolve_security

LOGGER = logging.getLogger(__name__)

#: what ``failOnDataLoss`` errors end with, as Spark's do
DATA_LOSS_HINT = ("If you want the query to skip lost data instead of failing, set the source "
                  "option 'failOnDataLoss' to 'false'.")

DEFAULT_MAX_PARTITION_FETCH_BYTES = 8 << 20
DEFAULT_REQUEST_TIMEOUT_MS = 30_000
#: Spark's default ``maxTriggerDelay``
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000

#: hidden option: ``host:port`` the export command listens on for executor progress datagrams
PROGRESS_OPTION = "trio_broker.progressaddress"

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_TIMESTAMPS_EXAMPLE = ('{"topicA": {"0": 123456789, "1": 123456789}, "topicB": {"0": 123456789, '
                       '"1": 123456789}}')


class SourceOptionError(ConfigError):
    """An option is missing, malformed or not allowed for this kind of query."""


OffsetSpec = str | dict[TopicPartition, int]  # "earliest" | "latest" | per-partition offsets


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscribe: tuple[str, ...] | None
    subscribe_pattern: str | None
    assign: tuple[TopicPartition, ...] | None
    #: the winning starting option: a timestamp, timestamps per partition, or offsets
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
    starting_by_timestamp: dict[TopicPartition, int] | None = None
    ending_timestamp: int | None = None
    ending_by_timestamp: dict[TopicPartition, int] | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS

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
    subscribe, pattern, assign = _parse_strategy(opts)
    for key, what in (("kafka.auto.offset.reset", None),
                      ("kafka.key.deserializer", "keys"), ("kafka.value.deserializer", "values")):
        if key in opts:
            name = key.removeprefix("kafka.")
            raise SourceOptionError(
                f"Kafka option '{name}' is not supported. Instead set the source option "
                "'startingOffsets' to 'earliest' or 'latest' to specify where to start."
                if what is None else
                f"Kafka option '{name}' is not supported as {what} are deserialized as byte "
                f"arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
                f"deserialize the {what}.")

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise SourceOptionError("Option 'startingOffsetsByTimestampStrategy' must be 'error' or "
                                f"'latest', got {opts['startingoffsetsbytimestampstrategy']!r}")
    starting_ts, starting_by_ts, starting = _parse_limit(
        opts, "startingTimestamp", "startingOffsetsByTimestamp", "startingOffsets",
        "latest" if streaming else "earliest")
    if streaming:
        if "endingoffsets" in opts:
            raise SourceOptionError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in opts or "endingtimestamp" in opts:
            raise SourceOptionError("ending timestamp not valid in streaming queries")
        ending_ts = ending_by_ts = None
        ending: OffsetSpec = "latest"
    else:
        ending_ts, ending_by_ts, ending = _parse_limit(
            opts, "endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets", "latest")
        _check_batch_limits(starting_ts, starting_by_ts, starting, ending_ts, ending_by_ts,
                            ending)

    max_per_trigger = _optional_positive(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
    min_per_trigger = _optional_positive(opts, "minoffsetspertrigger", "minOffsetsPerTrigger")
    if min_per_trigger is not None and max_per_trigger is not None \
            and min_per_trigger > max_per_trigger:
        raise SourceOptionError(f"The value of minOffsetPerTrigger({min_per_trigger}) is higher "
                                f"than the maxOffsetsPerTrigger({max_per_trigger}).")
    delay_ms = (parse_duration_ms(opts["maxtriggerdelay"], "maxTriggerDelay")
                if "maxtriggerdelay" in opts else DEFAULT_MAX_TRIGGER_DELAY_MS)
    if not streaming:
        for key, name in (("maxoffsetspertrigger", "maxOffsetsPerTrigger"),
                          ("minoffsetspertrigger", "minOffsetsPerTrigger"),
                          ("maxtriggerdelay", "maxTriggerDelay")):
            if key in opts:
                LOGGER.warning("%s option ignored in batch queries", name)

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
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=_positive(opts, "minpartitions", "minPartitions"),
        max_records_per_partition=_positive(opts, "maxrecordsperpartition",
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
        starting_by_timestamp=starting_by_ts,
        ending_timestamp=ending_ts,
        ending_by_timestamp=ending_by_ts,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=delay_ms,
    )


def _parse_strategy(opts: Mapping[str, str]) -> tuple[tuple[str, ...] | None, str | None,
                                                      tuple[TopicPartition, ...] | None]:
    strategies = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if not strategies:
        raise SourceOptionError("One of the following options must be specified for Kafka "
                                "source: subscribe, subscribePattern, assign")
    if len(strategies) > 1:
        raise SourceOptionError("Only one of the following options can be specified for Kafka "
                                "source: subscribe, subscribePattern, assign; got "
                                + ", ".join(strategies))
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise SourceOptionError("No topics to subscribe to as specified value for option "
                                    f"'subscribe' is '{opts['subscribe']}'")
        return subscribe, None, None
    if "subscribepattern" in opts:
        pattern = opts["subscribepattern"].strip()
        if not pattern:
            raise SourceOptionError("Pattern to subscribe is empty as specified value for "
                                    f"option 'subscribePattern' is '{opts['subscribepattern']}'")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SourceOptionError(f"subscribePattern {pattern!r} is not a regular expression: "
                                    f"{exc}") from None
        return None, pattern, None
    return None, None, _parse_assign(opts["assign"])


def _parse_limit(opts: Mapping[str, str], timestamp_name: str, by_timestamp_name: str,
                 offsets_name: str, default: str
                 ) -> tuple[int | None, dict[TopicPartition, int] | None, OffsetSpec]:
    """(global timestamp, timestamps per partition, offsets): the first option set wins."""
    if timestamp_name.lower() in opts:
        text = opts[timestamp_name.lower()].strip()
        try:
            timestamp = int(text)
        except ValueError:
            raise SourceOptionError(f"Expected a single long value, got {text} (option "
                                    f"'{timestamp_name}')") from None
        if timestamp < 0:
            raise SourceOptionError(f"Option '{timestamp_name}' must be milliseconds since the "
                                    f"epoch, got {timestamp}")
        return timestamp, None, default
    if by_timestamp_name.lower() in opts:
        return None, _parse_partition_json(opts[by_timestamp_name.lower()], by_timestamp_name,
                                           _TIMESTAMPS_EXAMPLE), default
    return None, None, _parse_offset_spec(opts.get(offsets_name.lower(), default), offsets_name)


def _check_batch_limits(starting_ts: int | None, starting_by_ts: dict[TopicPartition, int] | None,
                        starting: OffsetSpec, ending_ts: int | None,
                        ending_by_ts: dict[TopicPartition, int] | None,
                        ending: OffsetSpec) -> None:
    """Spark's batch checks (``validateBatchOptions``, ``checkOffsetLimitValidity``)."""
    if starting_ts is None and starting_by_ts is None:
        if starting == "latest":
            raise SourceOptionError("starting offset can't be latest for batch queries on Kafka")
        if isinstance(starting, dict):
            for tp, offset in sorted(starting.items()):
                if offset == LATEST:
                    raise SourceOptionError(f"startingOffsets for {tp} can't be latest for "
                                            "batch queries on Kafka")
    if ending_ts is None and ending_by_ts is None:
        if ending == "earliest":
            raise SourceOptionError("ending offset can't be earliest for batch queries on Kafka")
        if isinstance(ending, dict):
            for tp, offset in sorted(ending.items()):
                if offset == EARLIEST:
                    raise SourceOptionError(f"ending offset for {tp} can't be earliest for "
                                            "batch queries on Kafka")
    start_offsets = starting if starting_ts is None and starting_by_ts is None else None
    end_offsets = ending if ending_ts is None and ending_by_ts is None else None
    pairs = (("offset", start_offsets, end_offsets), ("timestamp", starting_by_ts, ending_by_ts))
    for what, start, end in pairs:
        if not isinstance(start, dict) or not isinstance(end, dict):
            continue
        if set(start) != set(end):
            raise SourceOptionError(
                f"Kafka data source in batch query should include the same topic partitions "
                f"in the start {what}s and the end {what}s: start has "
                f"{', '.join(map(str, sorted(start)))}; end has "
                f"{', '.join(map(str, sorted(end)))}")
        for tp in sorted(start):
            if start[tp] > end[tp] and start[tp] >= 0 and end[tp] >= 0:
                raise SourceOptionError(f"The start {what} {start[tp]} for {tp} can't be greater "
                                        f"than the end {what} {end[tp]} in a batch query")


_DURATION = re.compile(r"^\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_MS = {"us": 0.001, "ms": 1, None: 1, "s": 1000, "m": 60_000, "min": 60_000,
                "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str, name: str) -> int:
    """Spark's time strings (``timeStringAsMs``): ``500ms``, ``30s``, ``15m``, ``1h``; a plain
    number is milliseconds."""
    match = _DURATION.match(text)
    if match is None:
        raise SourceOptionError(f"Option '{name}' must be a duration like 30s, 15m or 500ms, "
                                f"got {text!r}")
    unit = match.group(2).lower() if match.group(2) else None
    return int(int(match.group(1)) * _DURATION_MS[unit])


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


def _positive(opts: Mapping[str, str], key: str, name: str) -> int | None:
    """Spark's ``minPartitions`` / ``maxRecordsPerPartition`` check and message."""
    if key not in opts:
        return None
    number = _parse_int(opts[key], name, minimum=-(2**63))
    if number <= 0:
        raise SourceOptionError(f"{name} must be positive")
    return number


def _load_json(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceOptionError(f"Option '{name}' is not valid JSON ({exc}): {text!r}") from None


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    if not text.strip().startswith("{"):
        raise SourceOptionError("No topicpartitions to assign as specified value for option "
                                f"'assign' is '{text}'")
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


def _parse_partition_json(text: str, name: str, example: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": n, ...}}``, with Spark's message for anything else."""
    data = _load_json(text, name)
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise SourceOptionError(f"Expected e.g. {example}, got {text} (option '{name}')")
    spec: dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        for part, value in parts.items():
            if not str(part).lstrip("-").isdigit() or not isinstance(value, int) \
                    or isinstance(value, bool) or value < EARLIEST:
                raise SourceOptionError(f"Option '{name}': bad value {value!r} for partition "
                                        f"{part!r} of topic {topic!r}")
            spec[TopicPartition(topic, int(part))] = value
    return spec


def _parse_offset_spec(text: str, name: str) -> OffsetSpec:
    lowered = text.strip().lower()
    if lowered in ("earliest", "latest"):
        return lowered
    return _parse_partition_json(text, name, _OFFSETS_EXAMPLE)


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


__all__ = ["DATA_LOSS_HINT", "DEFAULT_MAX_PARTITION_FETCH_BYTES", "DEFAULT_MAX_TRIGGER_DELAY_MS",
           "DEFAULT_REQUEST_TIMEOUT_MS", "PROGRESS_OPTION", "OffsetRange", "OffsetSpec",
           "SourceOptionError", "SourceOptions", "offsets_dict", "offsets_json",
           "parse_duration_ms", "parse_offsets_dict", "parse_options"]
