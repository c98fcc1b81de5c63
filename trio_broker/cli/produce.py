"""``trio-broker produce``: Kafka's console producer (``kafka-console-producer``).

Why these shapes: one record per stdin line, read with Kafka's ``LineMessageReader`` properties
(``parse.key``, ``key.separator``, ``parse.headers``, ``headers.delimiter``,
``headers.separator``, ``headers.key.separator``, ``null.marker``, ``ignore.error``), so a
script written for Kafka's tool feeds this one unchanged; ``--header`` adds the same headers to
every record, as kcat's ``-H`` does. Keyed records are partitioned with Kafka's murmur2, so they
land where Java clients would put them.

Lines are gathered per partition into one record batch until it reaches ``--batch-size`` bytes
or input pauses for ``--linger-ms`` (typed lines go at once), then one Produce request per
leader carries one batch per partition, and every batch is acknowledged before the next is
sent. So the count of acknowledged records is exact when something stops the run: a bad line
first sends the lines before it, then the error says how many records were acknowledged.
"""

from __future__ import annotations

import argparse
import io
import itertools
import os
import select
import sys
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

from ..client.blocking import BlockingClient, KafkaError, TopicInfo, TopicPartition, error_name
from ..client.blocking import partition_for_key as partition_for_key
from ..client.core.errors import error_for
from ..protocol.compression import Compression
from ..protocol.records import build_batch
from .base import CommandError, Tool, UsageError
from .connect import add_client_arguments, add_topic_argument, describe, open_client, topic_of

_CODECS = {c.name.lower(): c for c in Compression}
_ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}
#: a batch-size-independent ceiling, so one batch never approaches max.message.bytes
_MAX_RECORDS_PER_BATCH = 10_000
_FLUSH = object()

#: Kafka's LineMessageReader properties and their defaults (None: unset)
PROPERTIES: dict[str, str | None] = {
    "parse.key": "false", "key.separator": "\t", "parse.headers": "false",
    "headers.delimiter": "\t", "headers.separator": ",", "headers.key.separator": ":",
    "null.marker": None, "ignore.error": "false",
}

Header = tuple[str, bytes | None]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Read lines from stdin and produce each as one record. "
                          "Example: seq 10 | trio-broker produce numbers")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = "properties (Kafka's console producer names):\n" + "\n".join(
        f"  {k:<22} default {v!r}" for k, v in PROPERTIES.items())
    add_topic_argument(parser)
    add_client_arguments(parser, config_alias="--producer.config",
                         property_alias="--producer-property")
    parser.add_argument("--request-timeout-ms", type=int, default=30_000, metavar="MS",
                        help="how long to wait for any one answer (default 30000)")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="how lines are read, e.g. parse.key=true key.separator=: "
                             "(repeatable; see below)")
    parser.add_argument("--header", action="append", default=[], metavar="KEY=VALUE",
                        help="a header added to every record (repeatable)")
    parser.add_argument("--key-separator", metavar="SEP",
                        help="split each line at the first SEP into key and value "
                             "(parse.key=true key.separator=SEP)")
    parser.add_argument("--compression", "--compression-codec", dest="compression",
                        choices=sorted(_CODECS), default="none",
                        help="codec of the record batches (default none)")
    parser.add_argument("--partition", type=int, metavar="P",
                        help="send every record to partition P (default: by key, "
                             "keyless records round-robin per batch)")
    parser.add_argument("--acks", "--request-required-acks", dest="acks", choices=sorted(_ACKS),
                        default="all",
                        help="acknowledgements to wait for: 0, 1 or all (default all)")
    parser.add_argument("--batch-size", type=int, default=16_384, metavar="BYTES",
                        help="send a partition's batch once it holds this many bytes "
                             "(default 16384)")
    parser.add_argument("--linger-ms", type=int, default=50, metavar="MS",
                        help="send what is gathered once input pauses this long (default 50)")


def run(args: argparse.Namespace) -> int:
    topic = topic_of(args)
    reader = LineReader.from_args(args)
    if args.batch_size < 1:
        raise UsageError("--batch-size must be at least 1")
    with open_client(args, timeout_s=args.request_timeout_ms / 1000) as client:
        producer = ConsoleProducer(client, topic, args)
        try:
            producer.run(reader, _stdin_chunks(args.linger_ms / 1000))
        except (CommandError, KafkaError) as exc:
            message = describe(exc) if isinstance(exc, KafkaError) else str(exc)
            raise CommandError(f"{message}; {producer.outcome(stopped=True)}") from None
    outcome = producer.outcome()
    print(f"{outcome[0].upper()}{outcome[1:]}.", file=sys.stderr)
    return 0


class LineReader:
    """Kafka's LineMessageReader: ``[headers<delimiter>][key<separator>]value`` per line."""

    def __init__(self, props: dict[str, str | None], headers: Sequence[Header]) -> None:
        def flag(name: str) -> bool:
            return (props[name] or "").lower() == "true"

        self.parse_key = flag("parse.key")
        self.parse_headers = flag("parse.headers")
        self.ignore_error = flag("ignore.error")
        self.key_separator = (props["key.separator"] or "").encode()
        self.headers_delimiter = (props["headers.delimiter"] or "").encode()
        self.headers_separator = (props["headers.separator"] or "").encode()
        self.headers_key_separator = (props["headers.key.separator"] or "").encode()
        marker = props["null.marker"]
        self.null_marker = None if marker is None else marker.encode()
        self.static_headers = list(headers)
        for name, value in (("key.separator", self.key_separator),
                            ("headers.delimiter", self.headers_delimiter),
                            ("headers.separator", self.headers_separator),
                            ("headers.key.separator", self.headers_key_separator)):
            if not value and (self.parse_key if name == "key.separator" else self.parse_headers):
                raise UsageError(f"--property {name} must not be empty")
        if self.null_marker is not None and self.null_marker == self.headers_key_separator:
            raise UsageError("--property null.marker must differ from headers.key.separator")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LineReader:
        props = dict(PROPERTIES)
        for item in args.property:
            key, sep, value = item.partition("=")
            if not sep or key not in PROPERTIES:
                raise UsageError(f"bad --property {item!r}: expected one of "
                                 f"{', '.join(PROPERTIES)} as KEY=VALUE")
            if key in ("parse.key", "parse.headers", "ignore.error") and (
                    value.lower() not in ("true", "false")):
                raise UsageError(f"bad --property {item!r}: expected true or false")
            props[key] = value.encode().decode("unicode_escape") if "\\" in value else value
        if args.key_separator is not None:
            if args.key_separator == "":
                raise UsageError("--key-separator must not be empty")
            props["parse.key"], props["key.separator"] = "true", args.key_separator
        headers: list[Header] = []
        for item in args.header:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise UsageError(f"bad --header {item!r}: expected KEY=VALUE")
            headers.append((key, value.encode()))
        return cls(props, headers)

    def _null(self, value: bytes) -> bytes | None:
        return None if self.null_marker is not None and value == self.null_marker else value

    def parse(self, line: bytes, number: int,
              ) -> tuple[bytes | None, bytes | None, list[Header]]:
        """(key, value, headers) of one line (without its newline); errors as Kafka words them.
        """
        headers = list(self.static_headers)
        if self.parse_headers:
            head, sep, rest = line.partition(self.headers_delimiter)
            if not sep:
                if not self.ignore_error:
                    raise CommandError(f"no headers delimiter found on line number {number}: "
                                       f"{_show(line)}")
            else:
                headers += self._headers(head, number)
                line = rest
        key: bytes | None = None
        if self.parse_key:
            key, sep, rest = line.partition(self.key_separator)
            if not sep:
                if not self.ignore_error:
                    raise CommandError(f"no key separator found on line number {number}: "
                                       f"{_show(line)}")
                key, rest = None, line
            else:
                key = self._null(key)
            line = rest
        return key, self._null(line), headers

    def _headers(self, text: bytes, number: int) -> list[Header]:
        out: list[Header] = []
        if not text:
            return out
        for pair in text.split(self.headers_separator):
            name, sep, value = pair.partition(self.headers_key_separator)
            if not sep:
                if not self.ignore_error:
                    raise CommandError(f"no header key separator found in pair {_show(pair)} "
                                       f"on line number {number}")
                out.append((pair.decode("utf-8", "replace"), None))
                continue
            if self.null_marker is not None and name == self.null_marker:
                raise CommandError(f"header keys must not be the null marker "
                                   f"{self.null_marker.decode()!r} (line number {number})")
            out.append((name.decode("utf-8", "replace"), self._null(value)))
        return out


def _show(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return repr(text if len(text) <= 80 else text[:77] + "...")


class ConsoleProducer:
    def __init__(self, client: BlockingClient, topic: str, args: argparse.Namespace) -> None:
        self.client = client
        self.args = args
        self.codec = _CODECS[args.compression]
        self.acks = _ACKS[args.acks]
        self.topic: TopicInfo = client.topic(topic, allow_auto_create=True)
        self.count = len(self.topic.partitions)
        if args.partition is not None and args.partition not in self.topic.partitions:
            raise UsageError(f"topic {topic!r} has no partition {args.partition} "
                             f"(it has {self.count})")
        self.round_robin = itertools.cycle(sorted(self.topic.partitions))
        self.keyless_partition = next(self.round_robin)
        self.pending: dict[int, list[Any]] = {}
        self.pending_bytes: dict[int, int] = {}
        #: records the broker acknowledged (acks=0: records sent)
        self.done = 0
        self.line_number = 0

    def outcome(self, *, stopped: bool = False) -> str:
        """What was done, in words that do not claim more than the broker said."""
        if self.acks == 0:
            return (f"sent {self.done} record(s) to {self.topic.name} (acks=0: the broker "
                    "does not say whether it stored them)")
        if stopped:
            return f"{self.done} record(s) were acknowledged by {self.topic.name} before that"
        return f"produced {self.done} record(s) to {self.topic.name}"

    def run(self, reader: LineReader, chunks: Iterator[bytes | object]) -> None:
        tail = b""
        for chunk in chunks:
            if chunk is _FLUSH:
                self.send(list(self.pending))
                continue
            assert isinstance(chunk, bytes)
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            for line in lines:
                self.add(reader, line)
        if tail:
            self.add(reader, tail)
        self.send(list(self.pending))

    def add(self, reader: LineReader, line: bytes) -> None:
        self.line_number += 1
        if line.endswith(b"\r"):
            line = line[:-1]
        try:
            key, value, headers = reader.parse(line, self.line_number)
        except CommandError:
            self.send(list(self.pending))  # the lines before the bad one go out first
            raise
        if self.args.partition is not None:
            partition = self.args.partition
        elif key is not None:
            partition = partition_for_key(key, self.count)
        else:
            partition = self.keyless_partition
        self.pending.setdefault(partition, []).append(
            (key, value, headers) if headers else (key, value))
        size = (self.pending_bytes.get(partition, 0) + len(value or b"") + len(key or b"") + 8
                + sum(len(k) + len(v or b"") for k, v in headers))
        self.pending_bytes[partition] = size
        if (size >= self.args.batch_size
                or len(self.pending[partition]) >= _MAX_RECORDS_PER_BATCH):
            self.send([partition])

    def send(self, partitions: list[int]) -> None:
        if not partitions:
            return
        batches = {}
        counts = {}
        for p in partitions:
            records = self.pending.pop(p)
            self.pending_bytes.pop(p, None)
            tp = TopicPartition(self.topic.name, p)
            batches[tp] = build_batch(records, compression=self.codec)
            counts[tp] = len(records)
            if p == self.keyless_partition and self.args.partition is None:
                self.keyless_partition = next(self.round_robin)
        needs = 7 if self.codec == Compression.ZSTD else 3
        results = self.client.produce(batches, acks=self.acks,
                                      timeout_ms=self.args.request_timeout_ms, min_version=needs)
        failed = None
        for tp, result in sorted(results.items()):
            if result.error:
                failed = failed or error_for(
                    result.error, f"producing to {tp} failed: {error_name(result.error)}")
            else:
                self.done += counts[tp]
        if failed is not None:
            raise failed


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


PRODUCE = Tool(add_arguments, run)
