"""``trio-broker dump-log``: Kafka's ``kafka-dump-log``, reading segment files directly.

Why no broker: the tool is for looking at what is on disk (a torn tail after a crash, what a
segment holds), so it reads the files themselves and needs nothing running. A bad file is
reported and the others are still dumped.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..broker.storage import dump_segment
from .base import CommandError, Tool, UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Print the batches (and with --print-data-log the records) of "
                          ".log segment files, or the entries of .index/.timeindex files.")
    parser.add_argument("files", nargs="*", metavar="SEGMENT_FILE")
    parser.add_argument("--files", dest="more_files", action="append", default=[],
                        metavar="FILE", help="a file to dump (as Kafka's tool takes them)")
    parser.add_argument("--print-data-log", action="store_true",
                        help="also print every record: offset, timestamp, key, value, headers")


def run(args: argparse.Namespace) -> int:
    """Dump every file given; a bad one is reported and the rest are still dumped (exit 1)."""
    failures = []
    names = [*args.files, *(f for item in args.more_files for f in item.split(",") if f)]
    if not names:
        raise UsageError("no file to dump: give SEGMENT_FILE... or --files FILE")
    for name in names:
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
        except BrokenPipeError:  # the reader left (| head): not this file's fault
            raise
        except OSError as exc:
            failures.append(f"{name}: {exc.strerror or exc}")
    if failures:
        raise CommandError("; ".join(failures))
    return 0


DUMP_LOG = Tool(add_arguments, run)
