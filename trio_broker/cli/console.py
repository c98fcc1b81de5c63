"""``trio-broker produce|consume|dump-log``: Kafka's console producer, console consumer and
``kafka-dump-log``.

Why these shapes: ``produce`` and ``consume`` speak the Kafka protocol to any broker, so they
work against ours, Kafka or a cluster, and behave like Kafka's console tools: one record per
stdin line (``key<sep>value`` with ``--key-separator``), keyed records partitioned with Kafka's
murmur2 so they land where Java clients would put them, and ``consume`` printing values (and on
request keys, timestamps, offsets, headers) through Kafka's ``--property print.*`` names. The
consumer assigns partitions itself (no consumer group), like ``kcat``. ``dump-log`` reads segment
files directly and needs no broker.

Producing batches: lines are gathered per partition into one record batch until it reaches
``--batch-size`` bytes or input pauses for ``--linger-ms`` (interactive typing sends each line at
once), then one Produce request per leader carries one batch per partition.
"""

from __future__ import annotations

import argparse
import io
import itertools
import os
import select
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ..blocking_client import (
    EARLIEST,
    LATEST,
    BlockingClient,
    TopicInfo,
    TopicPartition,
    error_name,
    partition_for_key,
)
from ..client_core.errors import error_for
from ..protocol.batch import iter_batches
from ..protocol.compression import Compression
from ..protocol.errors import CorruptRecordError, ErrorCode, UnsupportedCompressionError
from ..protocol.records import build_batch, decode_records
from .base import CommandError, Tool, UsageError
from .connect import add_client_arguments, open_client

_CODECS = {c.name.lower(): c for c in Compression}
_ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}
#: a batch-size-independent ceiling, so one batch never approaches max.message.bytes
_MAX_RECORDS_PER_BATCH = 10_000
_FLUSH = object()


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", metavar="TOPIC")
    add_client_arguments(parser)
    parser.add_argument("--request-timeout-ms", type=int, default=30_000, metavar="MS",
                        help="how long to wait for any one answer (default 30000)")


# --- produce ---------------------------------------------------------------------------------

def add_produce_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Read lines from stdin and produce each as one record. "
                          "Example: seq 10 | trio-broker produce numbers")
    _common(parser)
    parser.add_argument("--key-separator", metavar="SEP",
                        help="split each line at the first SEP into key and value")
    parser.add_argument("--compression", choices=sorted(_CODECS), default="none",
                        help="codec of the record batches (default none)")
    parser.add_argument("--partition", type=int, metavar="P",
                        help="send every record to partition P (default: by key, "
                             "keyless records round-robin per batch)")
    parser.add_argument("--acks", choices=sorted(_ACKS), default="all",
                        help="acknowledgements to wait for: 0, 1 or all (default all)")
    parser.add_argument("--batch-size", type=int, default=16_384, metavar="BYTES",
                        help="send a partition's batch once it holds this many bytes "
                             "(default 16384)")
    parser.add_argument("--linger-ms", type=int, default=50, metavar="MS",
                        help="send what is gathered once input pauses this long (default 50)")


def run_produce(args: argparse.Namespace) -> int:
    with open_client(args, timeout_s=args.request_timeout_ms / 1000) as client:
        if args.key_separator == "":
            raise UsageError("--key-separator must not be empty")
        if args.batch_size < 1:
            raise UsageError("--batch-size must be at least 1")
        producer = _ConsoleProducer(client, args)
        producer.run(_stdin_chunks(args.linger_ms / 1000))
    print(f"Produced {producer.produced} record(s) to {args.topic}.", file=sys.stderr)
    return 0


class _ConsoleProducer:
    def __init__(self, client: BlockingClient, args: argparse.Namespace) -> None:
        self.client = client
        self.args = args
        self.codec = _CODECS[args.compression]
        self.acks = _ACKS[args.acks]
        self.separator = (args.key_separator.encode() if args.key_separator is not None
                          else None)
        self.topic: TopicInfo = client.topic(args.topic, allow_auto_create=True)
        self.count = len(self.topic.partitions)
        if args.partition is not None and args.partition not in self.topic.partitions:
            raise UsageError(f"topic {args.topic!r} has no partition {args.partition} "
                             f"(it has {self.count})")
        self.round_robin = itertools.cycle(sorted(self.topic.partitions))
        self.keyless_partition = next(self.round_robin)
        self.pending: dict[int, list[tuple[bytes | None, bytes]]] = {}
        self.pending_bytes: dict[int, int] = {}
        self.produced = 0
        self.line_number = 0

    def run(self, chunks: Iterator[bytes | object]) -> None:
        tail = b""
        for chunk in chunks:
            if chunk is _FLUSH:
                self.send(list(self.pending))
                continue
            assert isinstance(chunk, bytes)
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            for line in lines:
                self.add(line)
        if tail:
            self.add(tail)
        self.send(list(self.pending))

    def add(self, line: bytes) -> None:
        self.line_number += 1
        if line.endswith(b"\r"):
            line = line[:-1]
        key: bytes | None = None
        if self.separator is not None:
            key, sep, value = line.partition(self.separator)
            if not sep:
                raise CommandError(f"no key separator {self.args.key_separator!r} on line "
                                   f"{self.line_number}")
        else:
            value = line
        if self.args.partition is not None:
            partition = self.args.partition
        elif key is not None:
            partition = partition_for_key(key, self.count)
        else:
            partition = self.keyless_partition
        self.pending.setdefault(partition, []).append((key, value))
        size = self.pending_bytes.get(partition, 0) + len(value) + len(key or b"") + 8
        self.pending_bytes[partition] = size
        if (size >= self.args.batch_size
                or len(self.pending[partition]) >= _MAX_RECORDS_PER_BATCH):
            self.send([partition])

    def send(self, partitions: list[int]) -> None:
        if not partitions:
            return
        batches = {}
        for p in partitions:
            records = self.pending.pop(p)
            self.pending_bytes.pop(p, None)
            batches[TopicPartition(self.topic.name, p)] = build_batch(records,
                                                                      compression=self.codec)
            if p == self.keyless_partition and self.args.partition is None:
                self.keyless_partition = next(self.round_robin)
            self.produced += len(records)
        needs = 7 if self.codec == Compression.ZSTD else 3
        results = self.client.produce(batches, acks=self.acks,
                                      timeout_ms=self.args.request_timeout_ms, min_version=needs)
        for tp, result in sorted(results.items()):
            if result.error:
                raise error_for(result.error,
                                f"producing to {tp} failed: {error_name(result.error)}")


def _stdin_chunks(linger_s: float) -> Iterator[bytes | object]:
    """Bytes from stdin; ``_FLUSH`` whenever input pauses for ``linger_s`` (pipes, ttys)."""
    stream: Any = sys.stdin
    binary: BinaryIO | None = getattr(stream, "buffer", None)
    try:
        fd = (binary or stream).fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        fd = None
    if fd is None:  # an in-memory stream: read it through
        while data := (binary or stream).read(65536):
            yield data.encode() if isinstance(data, str) else data
        return
    waiting = False
    while True:
        if waiting:
            ready, _, _ = select.select([fd], [], [], linger_s)
            if not ready:
                yield _FLUSH
                waiting = False
                continue
        data = os.read(fd, 65536)
        if not data:
            return
        waiting = True
        yield data


# --- consume ---------------------------------------------------------------------------------

_PROPERTIES = {
    "print.key": "false", "print.value": "true", "print.timestamp": "false",
    "print.partition": "false", "print.offset": "false", "print.headers": "false",
    "key.separator": "\t", "headers.separator": ",", "line.separator": "\n",
    "null.literal": "null",
}


def add_consume_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Print the records of a topic, one per line, reading every partition "
                          "(or one) directly, without a consumer group.")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "properties (Kafka's console consumer names):\n" + "\n".join(
        f"  {k:<18} default {v!r}" for k, v in _PROPERTIES.items())
    _common(parser)
    parser.add_argument("--from-beginning", action="store_true",
                        help="start at the earliest offset instead of the end")
    parser.add_argument("--partition", type=int, metavar="P",
                        help="read only partition P")
    parser.add_argument("--offset", metavar="OFFSET",
                        help="with --partition: start at OFFSET, 'earliest' or 'latest'")
    parser.add_argument("--max-messages", type=int, metavar="N",
                        help="exit after printing N records")
    parser.add_argument("--timeout-ms", type=int, metavar="MS",
                        help="exit when no record arrives for MS milliseconds")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="output format, e.g. print.key=true (repeatable)")
    parser.add_argument("--max-partition-fetch-bytes", type=int, default=1_048_576,
                        metavar="BYTES", help="per-partition fetch limit (default 1048576)")


def run_consume(args: argparse.Namespace) -> int:
    with open_client(args, timeout_s=args.request_timeout_ms / 1000) as client:
        props = _parse_properties(args.property)
        start = _start_position(args)
        if args.max_messages is not None and args.max_messages < 0:
            raise UsageError("--max-messages must not be negative")
        consumer = _ConsoleConsumer(client, args, props, start)
        try:
            consumer.run()
        finally:
            sys.stdout.flush()
            print(f"Processed a total of {consumer.printed} messages", file=sys.stderr)
    return 0


def _parse_properties(items: list[str]) -> dict[str, str]:
    props = dict(_PROPERTIES)
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in _PROPERTIES:
            raise UsageError(f"bad --property {item!r}: expected one of "
                             f"{', '.join(_PROPERTIES)} as KEY=VALUE")
        if key.startswith("print.") and value.lower() not in ("true", "false"):
            raise UsageError(f"bad --property {item!r}: expected true or false")
        props[key] = value.encode().decode("unicode_escape") if "\\" in value else value
    return props


def _start_position(args: argparse.Namespace) -> int:
    """EARLIEST, LATEST or an absolute offset."""
    if args.offset is None:
        return EARLIEST if args.from_beginning else LATEST
    if args.partition is None:
        raise UsageError("--offset needs --partition")
    if args.from_beginning:
        raise UsageError("--offset and --from-beginning exclude each other")
    if args.offset in ("earliest", "latest"):
        return EARLIEST if args.offset == "earliest" else LATEST
    try:
        offset = int(args.offset)
    except ValueError:
        raise UsageError(f"bad --offset {args.offset!r}: expected a number, "
                         "'earliest' or 'latest'") from None
    if offset < 0:
        raise UsageError(f"bad --offset {offset}: must not be negative")
    return offset


class _ConsoleConsumer:
    def __init__(self, client: BlockingClient, args: argparse.Namespace,
                 props: dict[str, str], start: int) -> None:
        self.client = client
        self.args = args
        self.props = props
        self.flags = {k: v.lower() == "true" for k, v in props.items() if k.startswith("print.")}
        self.printed = 0
        self.topic = client.topic(args.topic)
        partitions = sorted(self.topic.partitions)
        if args.partition is not None:
            if args.partition not in self.topic.partitions:
                raise UsageError(f"topic {args.topic!r} has no partition {args.partition} "
                                 f"(it has {len(partitions)})")
            partitions = [args.partition]
        tps = [TopicPartition(self.topic.name, p) for p in partitions]
        self.reset_to = EARLIEST if start == EARLIEST or args.from_beginning else LATEST
        if start < 0:
            self.positions = client.list_offsets(dict.fromkeys(tps, start))
        else:
            self.positions = dict.fromkeys(tps, start)
        self.out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None

    def run(self) -> None:
        limit = self.args.max_messages
        idle_ms = self.args.timeout_ms
        last_record = time.monotonic()
        while limit is None or self.printed < limit:
            wait_ms = 500
            if idle_ms is not None:
                left_ms = idle_ms - (time.monotonic() - last_record) * 1000
                if left_ms <= 0:
                    return
                wait_ms = max(1, min(wait_ms, int(left_ms)))
            got = self.poll(wait_ms, limit)
            if got:
                last_record = time.monotonic()

    def poll(self, wait_ms: int, limit: int | None) -> int:
        fetched = self.client.fetch_many(
            self.positions, max_wait_ms=wait_ms,
            partition_max_bytes=self.args.max_partition_fetch_bytes)
        printed = 0
        for part in sorted(fetched, key=lambda f: f.tp):
            tp = part.tp
            if part.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                reset = self.client.list_offsets({tp: self.reset_to})[tp]
                print(f"trio-broker consume: offset {self.positions[tp]} of {tp} is out of "
                      f"range; resetting to {reset}", file=sys.stderr)
                self.positions[tp] = reset
                continue
            if part.error:
                raise error_for(part.error, f"fetching {tp} failed: {error_name(part.error)}")
            printed += self._print_records(tp, part.records, limit)
            if limit is not None and self.printed >= limit:
                break
        self._flush()
        return printed

    def _print_records(self, tp: TopicPartition, data: bytes, limit: int | None) -> int:
        printed = 0
        position = self.positions[tp]
        view = memoryview(data)
        try:
            for pos, header in iter_batches(view):
                if header.next_offset <= position:
                    continue
                if header.is_control:
                    self.positions[tp] = position = header.next_offset
                    continue
                for record in decode_records(view[pos:pos + header.size]):
                    if record.offset < position:
                        continue
                    self._write(tp.partition, record, header.timestamp_type)
                    printed += 1
                    self.printed += 1
                    self.positions[tp] = position = record.offset + 1
                    if limit is not None and self.printed >= limit:
                        return printed
                self.positions[tp] = position = max(position, header.next_offset)
        except (CorruptRecordError, UnsupportedCompressionError) as exc:
            raise CommandError(f"cannot decode a batch of {tp} at offset {position}: {exc}"
                               ) from None
        return printed

    def _write(self, partition: int, record: Any, timestamp_type: int) -> None:
        props = self.props
        sep = props["key.separator"].encode()
        null = props["null.literal"].encode()
        fields: list[bytes] = []
        flags = self.flags
        if flags["print.timestamp"]:
            kind = "LogAppendTime" if timestamp_type else "CreateTime"
            fields.append(f"{kind}:{record.timestamp}".encode())
        if flags["print.partition"]:
            fields.append(f"Partition:{partition}".encode())
        if flags["print.offset"]:
            fields.append(f"Offset:{record.offset}".encode())
        if flags["print.headers"]:
            if record.headers:
                fields.append(props["headers.separator"].encode().join(
                    k.encode() + b":" + (null if v is None else v) for k, v in record.headers))
            else:
                fields.append(b"NO_HEADERS")
        if flags["print.key"]:
            fields.append(null if record.key is None else record.key)
        if flags["print.value"]:
            fields.append(null if record.value is None else record.value)
        line = sep.join(fields) + props["line.separator"].encode()
        if self.out is not None:
            self.out.write(line)
        else:
            sys.stdout.write(line.decode("utf-8", errors="replace"))

    def _flush(self) -> None:
        if self.out is not None:
            self.out.flush()
        sys.stdout.flush()


# --- dump-log --------------------------------------------------------------------------------

def add_dump_log_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Print the batches (and with --print-data-log the records) of "
                          ".log segment files, or the entries of .index/.timeindex files.")
    parser.add_argument("files", nargs="+", metavar="SEGMENT_FILE")
    parser.add_argument("--print-data-log", action="store_true",
                        help="also print every record: offset, timestamp, key, value, headers")


def run_dump_log(args: argparse.Namespace) -> int:
    """Dump every file given; a bad one is reported and the rest are still dumped (exit 1)."""
    from ..log import dump_segment

    failures = []
    for name in args.files:
        path = Path(name)
        if not path.is_file():
            failures.append(f"{name}: no such file")
            continue
        if path.suffix not in (".log", ".index", ".timeindex"):
            failures.append(f"{name}: not a .log, .index or .timeindex file")
            continue
        try:
            for line in dump_segment(path, print_records=args.print_data_log):
                print(line)
        except OSError as exc:
            failures.append(f"{name}: {exc.strerror or exc}")
    if failures:
        raise CommandError("; ".join(failures))
    return 0


PRODUCE = Tool(add_produce_arguments, run_produce)
CONSUME = Tool(add_consume_arguments, run_consume)
DUMP_LOG = Tool(add_dump_log_arguments, run_dump_log)

