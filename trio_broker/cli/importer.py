"""``trio-broker import``: Parquet, JSON or CSV files into a topic with Spark (the inverse of
``export``).

The arguments and their checks live here; the job is ``trio_broker.spark.importer``, imported
only when the command runs, so ``trio-broker import --help`` works without Spark installed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..client.blocking.producer import PRODUCER_DEFAULTS
from ..client.core.errors import ConfigError, KafkaError
from .base import CommandError, Tool, UsageError
from .connect import add_client_config_arguments, describe
from .export import require_spark, security_options

FORMATS = ("parquet", "json", "csv")
COLUMN_HELP = {
    "key": "input column of record keys (default: key, if the input has it)",
    "value": "input column of record values (default: value)",
    "headers": "input column of headers, array<struct<key,value>> (default: headers, if any)",
    "timestamp": "input column of record timestamps (default: timestamp, if any)",
    "partition": "input column of target partitions (default: partition, if any; '' for "
                 "Java's partitioner on the key)",
    "topic": "input column of target topics (default: none; --topic wins over it)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``import`` options, for a parser of its own or a subcommand's."""
    parser.description = ("Import Parquet, JSON or CSV files into a topic with Spark (at least "
                          "once: a failed import that is run again writes some records twice).")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                        help="broker to write to (any Kafka-protocol broker)")
    parser.add_argument("--topic", default=None, metavar="TOPIC",
                        help="topic to import into (created if the broker auto-creates topics)")
    parser.add_argument("--in", dest="source", required=True, metavar="PATH",
                        help="input file or directory (an export's output reads as it is)")
    parser.add_argument("--format", choices=FORMATS, default="parquet",
                        help="input format (default: parquet)")
    for column, text in COLUMN_HELP.items():
        parser.add_argument(f"--{column}-column", default=None, metavar="COLUMN", help=text)
    parser.add_argument("--binary-format", choices=("text", "base64"), default=None,
                        help="how string key and value columns hold bytes (default: text, "
                             "for JSON base64, as export writes them)")
    parser.add_argument("--order-by", default=None, metavar="COLUMNS",
                        help="comma list: write each partition's records in this order "
                             "(default: offset, if the input has it; '' for input order)")
    parser.add_argument("--master", default="local[*]",
                        help="Spark master URL (default: local[*]; e.g. spark://host:7077)")
    parser.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE",
                        help="Kafka producer setting, e.g. compression.type=zstd, acks=1, "
                             "linger.ms=10, batch.size=16384 (repeatable)")
    add_client_config_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run an import from parsed ``add_arguments`` options."""
    require_spark()
    from ..spark.importer import ImportFailed, ImportJob, ImportSettings

    if "://" not in args.source and not Path(args.source).exists():  # Spark's error is long
        raise UsageError(f"--in {args.source}: no such file or directory")
    if args.topic is None and not args.topic_column:
        raise UsageError("name the topic with --topic (or a column of topics with "
                         "--topic-column)")
    columns = {column: getattr(args, f"{column}_column") for column in COLUMN_HELP
               if getattr(args, f"{column}_column") is not None}
    order_by = None if args.order_by is None else tuple(
        c.strip() for c in args.order_by.split(",") if c.strip())
    settings = ImportSettings(
        bootstrap_servers=args.bootstrap_server, source=args.source, topic=args.topic,
        format=args.format, columns=columns, binary_format=args.binary_format,
        order_by=order_by, master=args.master,
        options={**security_options(args), **_producer_options(args.producer_property)})
    try:
        job = ImportJob(settings)
    except ValueError as exc:  # SinkError: the options, checked before Spark starts
        raise UsageError(str(exc)) from None

    from rich.console import Console

    console = Console(stderr=False)
    try:
        job.run(console, sys.stdout.isatty())
    except KafkaError as exc:
        raise CommandError(describe(exc)) from None
    except (ConfigError, ImportFailed) as exc:  # ConfigError: SinkError (a column, a row)
        raise CommandError(str(exc)) from None
    return 0


def _producer_options(items: list[str]) -> dict[str, str]:
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--producer-property {item!r} is not KEY=VALUE")
        if key not in PRODUCER_DEFAULTS:
            raise UsageError(f"unknown producer property {key!r} (import takes "
                             f"{', '.join(PRODUCER_DEFAULTS)})")
        options[f"kafka.{key}"] = value
    return options


IMPORT = Tool(add_arguments, run)
