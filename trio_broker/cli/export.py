"""``trio-broker export``: topics to Parquet, JSON or CSV files with Spark, exactly once.

The arguments and their checks live here; the job is ``trio_broker.spark.job``, imported only
when the command runs, so ``trio-broker export --help`` works without Spark installed and a
missing Spark is one line saying how to install it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..client.core.errors import ConfigError, KafkaError
from ..client.core.security import SECURITY_DEFAULTS
from .base import CommandError, Tool, UsageError
from .connect import add_client_config_arguments, client_config, describe

FORMATS = ("parquet", "json", "csv")
PARTITION_COLUMNS = ("topic", "partition")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``export`` options, for a parser of its own or a subcommand's."""
    parser.description = "Export topics to files with Spark, exactly once."
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                        help="broker to read from (any Kafka-protocol broker)")
    parser.add_argument("--topic", required=True, action="append", metavar="TOPIC",
                        help="topic to export; repeat for several")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--format", choices=FORMATS, default="parquet",
                        help="file format (default: parquet)")
    parser.add_argument("--partition-by", default=None, metavar="COLUMNS",
                        help="comma list of columns to lay out directories by: topic,partition")
    parser.add_argument("--starting-offsets", default="earliest", metavar="SPEC",
                        help="earliest, latest (follow only) or Spark's offset JSON "
                             '{"topic":{"0":23}} (default: earliest)')
    parser.add_argument("--ending-offsets", default="latest", metavar="SPEC",
                        help="latest or offset JSON (batch only; default: latest)")
    parser.add_argument("--master", default="local[*]",
                        help="Spark master URL (default: local[*]; e.g. spark://host:7077)")
    parser.add_argument("--follow", action="store_true",
                        help="keep exporting new records until Ctrl-C (a streaming query)")
    parser.add_argument("--checkpoint", default=None, metavar="DIR",
                        help="streaming checkpoint (default: DIR/_checkpoint)")
    parser.add_argument("--trigger-interval", default="1 second", metavar="INTERVAL",
                        help="how often --follow looks for new records (default: 1 second)")
    parser.add_argument("--writer", choices=("arrow", "spark"), default=None,
                        help="who writes batch Parquet files: arrow (default; pyarrow in the "
                             "Spark tasks, the records never enter the JVM) or spark (Spark's "
                             "Parquet writer). JSON, CSV and --follow always use Spark's")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="extra source option, e.g. maxOffsetsPerTrigger=100000")
    add_client_config_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run an export from parsed ``add_arguments`` options."""
    require_spark()
    from ..spark.job import ExportFailed, ExportJob, ExportSettings

    if args.follow and args.ending_offsets != "latest":
        raise UsageError("--ending-offsets does not apply to --follow")
    settings = ExportSettings(
        bootstrap_servers=args.bootstrap_server, topics=tuple(args.topic), out=Path(args.out),
        format=args.format, partition_by=_partition_columns(args.partition_by),
        starting_offsets=args.starting_offsets, ending_offsets=args.ending_offsets,
        master=args.master, follow=args.follow,
        checkpoint=Path(args.checkpoint) if args.checkpoint else None,
        trigger_interval=args.trigger_interval, writer=args.writer,
        options={**security_options(args), **_source_options(args.option)})
    try:
        job = ExportJob(settings)
    except ValueError as exc:  # SourceOptionError: the options, checked before Spark starts
        raise UsageError(str(exc)) from None

    from rich.console import Console

    console = Console(stderr=False)
    interactive = sys.stdout.isatty()
    try:
        if args.follow:
            job.follow(console, interactive)
        else:
            job.batch(console, interactive)
    except KafkaError as exc:
        raise CommandError(describe(exc)) from None
    except (ConfigError, ExportFailed) as exc:  # ConfigError: SourceOptionError
        raise CommandError(str(exc)) from None
    return 0


def require_spark() -> None:
    """The Spark stage's third-party packages, or a UsageError saying how to install them."""
    try:
        import numpy  # noqa: F401
        import pyarrow  # noqa: F401
        import pyspark.sql.datasource  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"this command needs Spark ({exc}): pip install "
                         "'trio-broker[spark]'") from None


def _partition_columns(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    columns = tuple(c.strip() for c in text.split(",") if c.strip())
    bad = [c for c in columns if c not in PARTITION_COLUMNS]
    if bad:
        raise UsageError(f"--partition-by takes {', '.join(PARTITION_COLUMNS)}; "
                         f"not {', '.join(bad)}")
    return columns


def security_options(args: argparse.Namespace) -> dict[str, str]:
    """``--command-config`` and ``-X`` settings as the source's ``kafka.*`` options."""
    config = client_config(args)
    unknown = sorted(set(config) - set(SECURITY_DEFAULTS))
    if unknown:
        raise UsageError(f"unknown client config {unknown[0]!r} (this command takes "
                         f"{', '.join(SECURITY_DEFAULTS)})")
    return {f"kafka.{key}": str(value) for key, value in config.items()}


def _source_options(items: list[str]) -> dict[str, str]:
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--option {item!r} is not KEY=VALUE")
        options[key.strip()] = value
    return options


EXPORT = Tool(add_arguments, run)
