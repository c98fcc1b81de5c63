"""The ``trio-broker`` command line.

Why ``main(argv) -> int``: the CLI is tested by calling it directly; every bad input becomes a
one-line message on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .config import ConfigError, describe_keys, load_config, parse_overrides

LOGGER = logging.getLogger("trio_broker")

#: subcommand name -> (module path, help); each module has add_arguments(parser), main(args) -> int
_SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "topics": ("trio_broker.cli_topics", "create, list, describe or delete topics"),
    "produce": ("trio_broker.cli_console", "produce lines from stdin to a topic"),
    "consume": ("trio_broker.cli_console", "print records of a topic"),
    "dump-log": ("trio_broker.cli_console", "print the batches and records of a segment file"),
    "groups": ("trio_broker.cli_groups", "list consumer groups or describe one"),
    "export": ("trio_broker.spark.export", "export topics with Spark (Parquet, JSON, CSV)"),
}


def _serve_epilog() -> str:
    rows = describe_keys(common_only=True)
    width = max(len(k) for k, _, _ in rows)
    lines = ["common config keys (Kafka names; see docs/configuration.md for all):"]
    lines += [f"  {k:<{width}}  {doc} (default: {d or 'unset'})" for k, d, doc in rows]
    lines.append("environment: TRIO_BROKER_<KEY>, e.g. TRIO_BROKER_LOG_DIRS=/var/lib/broker")
    return "\n".join(lines)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; only ``command``'s module is imported (``serve`` imports no Spark)."""
    parser = argparse.ArgumentParser(prog="trio-broker",
                                     description="A Kafka-compatible broker on Trio.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser("serve", help="run the broker",
                           formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog=_serve_epilog())
    serve.add_argument("config_file", nargs="?", metavar="CONFIG_FILE",
                       help="server.properties or .toml file")
    serve.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="set a config key (repeatable; wins over file and environment)")
    serve.set_defaults(func=_cmd_serve)
    for name, (module, help_text) in _SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        if name != command:
            continue  # listed in --help; its module is imported only when it runs
        loaded = _load(module)
        if loaded is None:
            p.set_defaults(func=lambda args, name=name: _unavailable(name))
            continue
        suffix = name.replace("-", "_")
        adder = getattr(loaded, f"add_{suffix}_arguments", None) or loaded.add_arguments
        adder(p)
        runner = (getattr(loaded, f"main_{suffix}", None) or getattr(loaded, "run", None)
                  or loaded.main)
        p.set_defaults(func=runner)
    return parser


def _load(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module.startswith(exc.name):
            return None  # this build does not include it
        if exc.name == "pyspark":
            return _spark_missing()
        raise
    except ImportError as exc:
        if "trio-broker[spark]" in str(exc):
            return _spark_missing()
        raise


def _spark_missing() -> Any:
    class Missing:
        @staticmethod
        def add_arguments(parser: argparse.ArgumentParser) -> None:
            parser.add_argument("args", nargs=argparse.REMAINDER)

        @staticmethod
        def main(args: Any) -> int:
            print("trio-broker: export needs Spark: pip install 'trio-broker[spark]'",
                  file=sys.stderr)
            return 2

    return Missing


def _unavailable(name: str) -> int:
    print(f"trio-broker: the {name} command is not available in this installation",
          file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(command)
    args = parser.parse_args(args_list)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except ConfigError as exc:
        print(f"trio-broker: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _cmd_serve(args: argparse.Namespace) -> int:
    import trio

    config = load_config(args.config_file, overrides=parse_overrides(args.override))
    logging.basicConfig(level=config.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from .broker import serve

    async def run() -> None:
        # Signals are caught from before the broker starts: one that arrives during start-up
        # waits in the receiver and then stops the broker gracefully like any other.
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                broker = await nursery.start(serve, config)
                for name, host, port in broker.listeners:
                    print(f"trio-broker listening on {name}://{_fmt(host)}:{port}", flush=True)
                if broker.metrics_address:
                    h, p = broker.metrics_address
                    print(f"trio-broker metrics on http://{_fmt(h)}:{p}/metrics", flush=True)
                async for signum in signals:
                    LOGGER.info("received %s, shutting down", signal.Signals(signum).name)
                    broker.stop()
                    break

    try:
        trio.run(run)
    except BaseExceptionGroup as group:
        first = _first_leaf(group)
        if isinstance(first, KeyboardInterrupt):
            return 130
        if isinstance(first, ConfigError):
            raise first from None
        if isinstance(first, OSError):
            print(f"trio-broker: cannot start: {first}", file=sys.stderr)
            return 1
        raise
    return 0


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _fmt(host: str) -> str:
    return f"[{host}]" if ":" in host else host


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
