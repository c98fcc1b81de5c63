"""``trio-broker delete-records``: Kafka's ``kafka-delete-records``.

Why Kafka's file: ``--offset-json-file`` takes the JSON Kafka's tool takes,
``{"partitions": [{"topic": "t", "partition": 0, "offset": 3}], "version": 1}``, so an existing
runbook works; ``--topic T --partition P --offset N`` says the same for one partition. Offset
-1 deletes everything (up to the high watermark). Each partition's leader moves its log start
offset there (DeleteRecords); reads below it then answer OFFSET_OUT_OF_RANGE.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..client.blocking import TopicPartition, error_name
from .base import CommandError, Tool, UsageError
from .connect import add_client_arguments, open_client
from .output import Report, add_output_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Delete the records of partitions below an offset."
    parser.add_argument("--offset-json-file", metavar="FILE",
                        help='Kafka\'s JSON: {"partitions": [{"topic": "t", "partition": 0, '
                             '"offset": 3}], "version": 1}')
    parser.add_argument("--topic", metavar="TOPIC", help="one partition's topic")
    parser.add_argument("--partition", type=int, metavar="P", help="one partition")
    parser.add_argument("--offset", type=int, metavar="N",
                        help="delete the records below N (-1: all of them)")
    add_client_arguments(parser)
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                        help="how long to wait for each answer (default 30)")
    add_output_argument(parser)


def read_offsets(args: argparse.Namespace) -> dict[TopicPartition, int]:
    one = (args.topic, args.partition, args.offset)
    if args.offset_json_file is not None:
        if any(v is not None for v in one):
            raise UsageError("--offset-json-file excludes --topic, --partition and --offset")
        return _from_file(args.offset_json_file)
    if any(v is None for v in one):
        raise UsageError("give --offset-json-file FILE, or --topic, --partition and --offset")
    if args.offset < -1:
        raise UsageError(f"bad --offset {args.offset}: -1 (all) or an offset")
    return {TopicPartition(args.topic, args.partition): args.offset}


def _from_file(name: str) -> dict[TopicPartition, int]:
    try:
        document = json.loads(Path(name).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--offset-json-file {name}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"--offset-json-file {name}: not JSON: {exc}") from None
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"--offset-json-file {name}: expected "
                         '{"partitions": [{"topic": ..., "partition": ..., "offset": ...}]}')
    out: dict[TopicPartition, int] = {}
    for i, entry in enumerate(entries):
        try:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            offset = int(entry["offset"])
        except (KeyError, TypeError, ValueError):
            raise UsageError(f"--offset-json-file {name}: partitions[{i}] needs topic, "
                             "partition and offset") from None
        if tp in out:
            raise UsageError(f"--offset-json-file {name}: {tp} appears twice")
        out[tp] = offset
    return out


def run(args: argparse.Namespace) -> int:
    offsets = read_offsets(args)
    with open_client(args, timeout_s=args.timeout) as client:
        results = client.delete_records(offsets, timeout_ms=int(args.timeout * 1000))
    rows = [(tp.topic, tp.partition, low if not code else None, error_name(code))
            for tp, (code, low) in sorted(results.items())]
    report = Report(args.output)
    report.line("Records delete operation completed:")
    report.table(["topic", "partition", "low watermark", "error"], rows,
                 numeric=["partition", "low watermark"])
    report.document = [{"topic": t, "partition": p, "low_watermark": low, "error": e}
                       for t, p, low, e in rows]
    report.emit()
    failed = [(tp, code) for tp, (code, _) in sorted(results.items()) if code]
    if failed:
        tp, code = failed[0]
        raise CommandError(f"cannot delete the records of {len(failed)} partition(s) "
                           f"({tp} below offset {offsets[tp]}: {error_name(code)})")
    return 0


DELETE_RECORDS = Tool(add_arguments, run)
