"""``trio-broker consume``: Kafka's console consumer (``kafka-console-consumer``), with kcat's
format string, JSON lines and exit-at-end.

Two ways to read, as Kafka's tool has them: without ``--group`` the consumer assigns itself every
partition (or ``--partition P``) and commits nothing, like ``kcat -C``; with ``--group G`` it
joins the group (``client.blocking.GroupMember``), starts at the group's committed offsets (else
``--from-beginning``'s earliest or the end), commits what it printed every five seconds, before
a rebalance and on exit, and leaves the group.

It long-polls each leader (at most half a second, so heartbeats are never late), so new records
are printed as they arrive. A lost broker is not the end: the consumer says so on stderr and
tries again with exponential backoff, for up to ``--reconnect-timeout-ms``, then carries on
from the positions it had (a broker restart loses nothing and repeats nothing it printed).
"""

from __future__ import annotations

import argparse
import sys
import time

from ..client.blocking import (
    EARLIEST,
    LATEST,
    BlockingClient,
    GroupMember,
    KafkaConnectionError,
    KafkaTimeoutError,
    TopicPartition,
    error_name,
)
from ..client.core.backoff import ExponentialBackoff
from ..client.core.errors import error_for
from ..protocol.batch import iter_batches
from ..protocol.errors import CorruptRecordError, ErrorCode, UnsupportedCompressionError
from ..protocol.records import decode_records
from .base import CommandError, Tool, UsageError
from .connect import add_client_arguments, add_topic_argument, open_client, topic_of
from .record_format import (
    PROPERTIES,
    TOKENS,
    Writer,
    format_writer,
    json_writer,
    parse_properties,
    properties_writer,
)
from .times import parse_when

#: the longest a fetch waits for records (heartbeats and Ctrl-C are checked in between)
POLL_MS = 500
AUTO_COMMIT_S = 5.0
_RETRY_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                           ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.FENCED_LEADER_EPOCH,
                           ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REQUEST_TIMED_OUT,
                           ErrorCode.NETWORK_EXCEPTION})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Print the records of a topic, one per line: every partition read "
                          "directly, or as a member of --group.")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = ("properties (Kafka's console consumer names):\n" + "\n".join(
        f"  {k:<18} default {v!r}" for k, v in PROPERTIES.items())
        + "\n--format tokens (kcat's):\n" + "\n".join(
            f"  %{k}  {doc}" for k, doc in TOKENS.items()))
    add_topic_argument(parser)
    add_client_arguments(parser, config_alias="--consumer.config",
                         property_alias="--consumer-property")
    parser.add_argument("--request-timeout-ms", type=int, default=30_000, metavar="MS",
                        help="how long to wait for any one answer (default 30000)")
    parser.add_argument("--group", metavar="GROUP",
                        help="consume as a member of GROUP, committing what was printed")
    parser.add_argument("--from-beginning", action="store_true",
                        help="start at the earliest offset (with --group: where the group "
                             "has no committed offset)")
    parser.add_argument("--partition", type=int, metavar="P", help="read only partition P")
    parser.add_argument("--offset", metavar="OFFSET",
                        help="with --partition: start at OFFSET, 'earliest' or 'latest'")
    parser.add_argument("--from-timestamp", metavar="WHEN",
                        help="start at the first record at or after WHEN: ISO 8601 "
                             "(2024-05-01T12:00:00, local time unless it names a zone) or "
                             "milliseconds since the epoch")
    parser.add_argument("--max-messages", type=int, metavar="N",
                        help="exit after printing N records")
    parser.add_argument("--timeout-ms", type=int, metavar="MS",
                        help="exit when no record arrives for MS milliseconds")
    parser.add_argument("--exit-at-end", action="store_true",
                        help="exit once every partition is read to its end")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="output format, e.g. print.key=true (repeatable)")
    parser.add_argument("--format", metavar="FMT",
                        help="kcat's format string, e.g. '%%k %%s %%p %%o %%T %%h'")
    parser.add_argument("--output", "-o", choices=("text", "json"), default="text",
                        help="text (default) or json: one object per record per line")
    parser.add_argument("--max-partition-fetch-bytes", type=int, default=1_048_576,
                        metavar="BYTES", help="per-partition fetch limit (default 1048576)")
    parser.add_argument("--reconnect-timeout-ms", type=int, default=60_000, metavar="MS",
                        help="how long to keep trying to reach a lost broker (default 60000)")


def writer_for(args: argparse.Namespace) -> Writer:
    props = parse_properties(args.property)
    if args.output == "json":
        if args.format is not None:
            raise UsageError("--format and --output json exclude each other")
        return json_writer()
    if args.format is not None:
        return format_writer(args.format, props["null.literal"] if args.property else "")
    return properties_writer(props)


def start_position(args: argparse.Namespace) -> int:
    """EARLIEST, LATEST, an absolute offset; or -1000 - ms for a timestamp (see ``_resolve``)."""
    if args.group and (args.partition is not None or args.offset is not None):
        raise UsageError("--group and --partition/--offset exclude each other")
    if args.group and args.from_timestamp:
        raise UsageError("--group and --from-timestamp exclude each other")
    if args.from_timestamp is not None:
        if args.from_beginning or args.offset is not None:
            raise UsageError("--from-timestamp excludes --from-beginning and --offset")
        return -1000 - parse_when(args.from_timestamp, "--from-timestamp")
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


def run(args: argparse.Namespace) -> int:
    topic = topic_of(args)
    writer = writer_for(args)
    start = start_position(args)
    if args.max_messages is not None and args.max_messages < 0:
        raise UsageError("--max-messages must not be negative")
    consumer: ConsoleConsumer | None = None
    closed = False
    try:
        with open_client(args, timeout_s=args.request_timeout_ms / 1000) as client:
            consumer = ConsoleConsumer(client, topic, args, writer, start)
            try:
                consumer.run()
            finally:
                consumer.close()
    except BrokenPipeError:
        closed = True
        raise
    finally:
        if consumer is not None and not closed:
            try:
                sys.stdout.flush()
            except BrokenPipeError:
                closed = True
            if not closed:
                print(f"Processed a total of {consumer.printed} messages", file=sys.stderr)
    return 0


class ConsoleConsumer:
    def __init__(self, client: BlockingClient, topic: str, args: argparse.Namespace,
                 writer: Writer, start: int) -> None:
        self.client = client
        self.args = args
        self.write_record = writer
        self.start = start
        self.printed = 0
        self.info = client.topic(topic)
        self.topic = self.info.name
        if args.partition is not None and args.partition not in self.info.partitions:
            raise UsageError(f"topic {topic!r} has no partition {args.partition} "
                             f"(it has {len(self.info.partitions)})")
        self.reset_to = EARLIEST if start == EARLIEST or args.from_beginning else LATEST
        self.positions: dict[TopicPartition, int] = {}
        self.high_watermarks: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}
        self.member = GroupMember(client, args.group, [self.topic]) if args.group else None
        self._next_commit = time.monotonic() + AUTO_COMMIT_S
        self.out = getattr(sys.stdout, "buffer", None)
        if self.member is None:
            partitions = ([args.partition] if args.partition is not None
                          else sorted(self.info.partitions))
            self.positions = self._resolve({TopicPartition(self.topic, p): start
                                            for p in partitions})
        else:
            self._join()

    def _resolve(self, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Absolute offsets for EARLIEST/LATEST/-1000-ms entries (ListOffsets)."""
        asked = {tp: (-(v + 1000) if v <= -1000 else v) for tp, v in wanted.items() if v < 0}
        found = self.client.list_offsets(asked) if asked else {}
        out = {}
        for tp, v in wanted.items():
            if v >= 0:
                out[tp] = v
            elif v <= -1000 and found[tp] < 0:  # no record at or after that time: the end
                out[tp] = self.client.list_offsets({tp: LATEST})[tp]
            else:
                out[tp] = found[tp]
        return out

    # --- the group -----------------------------------------------------------------------

    def _join(self) -> None:
        assert self.member is not None
        self._commit()
        assigned = self.member.join()
        kept = {tp: self.positions[tp] for tp in assigned if tp in self.positions}
        new = [tp for tp in assigned if tp not in kept]
        committed = self.member.committed(new) if new else {}
        self.committed = {tp: o for tp, o in committed.items() if tp in assigned}
        self.positions = {**kept, **self._resolve({tp: committed.get(tp, self.reset_to)
                                                   for tp in new})}
        self.high_watermarks = {tp: h for tp, h in self.high_watermarks.items()
                                if tp in assigned}

    def _commit(self) -> None:
        if self.member is None or not self.member.member_id:
            return
        changed = {tp: o for tp, o in self.positions.items() if self.committed.get(tp) != o}
        if changed:
            self.member.commit(changed)
            if not self.member.needs_join:
                self.committed.update(changed)
        self._next_commit = time.monotonic() + AUTO_COMMIT_S

    def close(self) -> None:
        if self.member is None:
            return
        try:
            self._commit()
        finally:
            self.member.leave()

    # --- the loop ------------------------------------------------------------------------

    def done(self) -> bool:
        limit = self.args.max_messages
        if limit is not None and self.printed >= limit:
            return True
        if self.args.exit_at_end:
            return all(tp in self.high_watermarks and pos >= self.high_watermarks[tp]
                       for tp, pos in self.positions.items())
        return False

    def run(self) -> None:
        idle_ms = self.args.timeout_ms
        last_record = time.monotonic()
        backoff = ExponentialBackoff(100, 5_000)
        lost_since: float | None = None
        attempt = 0
        while not self.done():
            wait_ms = POLL_MS
            if idle_ms is not None:
                left_ms = idle_ms - (time.monotonic() - last_record) * 1000
                if left_ms <= 0:
                    return
                wait_ms = max(1, min(wait_ms, int(left_ms)))
            try:
                if self.member is not None:
                    if self.member.heartbeat_if_due():
                        self._join()
                    if time.monotonic() >= self._next_commit:
                        self._commit()
                got = self.poll(wait_ms)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                now = time.monotonic()
                if lost_since is None:
                    lost_since = now
                    print(f"trio-broker consume: {exc}; reconnecting", file=sys.stderr)
                if (now - lost_since) * 1000 >= self.args.reconnect_timeout_ms:
                    raise CommandError(f"{exc} (gave up reconnecting after "
                                       f"{self.args.reconnect_timeout_ms} ms)") from None
                time.sleep(backoff.backoff_ms(attempt) / 1000)
                attempt += 1
                if self.member is not None:
                    self.member.needs_join = True
                continue
            if lost_since is not None:
                print("trio-broker consume: reconnected", file=sys.stderr)
                lost_since, attempt = None, 0
            if got:
                last_record = time.monotonic()

    def poll(self, wait_ms: int) -> int:
        if not self.positions:  # a group member without partitions: wait for a rebalance
            time.sleep(wait_ms / 1000)
            return 0
        fetched = self.client.fetch_many(
            self.positions, max_wait_ms=wait_ms,
            partition_max_bytes=self.args.max_partition_fetch_bytes)
        printed = 0
        for part in sorted(fetched, key=lambda f: f.tp):
            tp = part.tp
            if tp not in self.positions:
                continue
            if part.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                reset = self.client.list_offsets({tp: self.reset_to})[tp]
                print(f"trio-broker consume: offset {self.positions[tp]} of {tp} is out of "
                      f"range; resetting to {reset}", file=sys.stderr)
                self.positions[tp] = reset
                continue
            if part.error in _RETRY_ERRORS:  # a new leader: look it up before the next fetch
                self.client.metadata([tp.topic])
                continue
            if part.error:
                raise error_for(part.error, f"fetching {tp} failed: {error_name(part.error)}")
            self.high_watermarks[tp] = part.high_watermark
            printed += self._print_records(tp, part.records)
            if self.done():
                break
        self._flush()
        return printed

    def _print_records(self, tp: TopicPartition, data: bytes) -> int:
        printed = 0
        limit = self.args.max_messages
        position = self.positions[tp]
        leader = self.info.leader(tp.partition)
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
                    self._write(self.write_record(tp.topic, tp.partition, record,
                                                  header.timestamp_type, leader))
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

    def _write(self, line: bytes) -> None:
        if self.out is not None:
            self.out.write(line)
        else:
            sys.stdout.write(line.decode("utf-8", errors="replace"))

    def _flush(self) -> None:
        if self.out is not None:
            self.out.flush()
        sys.stdout.flush()


CONSUME = Tool(add_arguments, run)
