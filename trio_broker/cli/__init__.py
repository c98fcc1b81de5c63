"""The ``trio-broker`` command line: one table of commands, each imported only when it runs.

Why ``main(argv) -> int``: the CLI is tested by calling it directly. Why a table of loaders:
``trio-broker --help`` lists every command, and ``serve`` starts without importing the client
tools or Spark; each loader imports its module statically, so mypy and the structure check see
what it returns. Every error reaches the user one way, in argparse's own form: one line
``trio-broker COMMAND: error: MESSAGE`` on stderr, exit status 2 for bad input (``UsageError``),
1 for a failure at run time (``CommandError``), 130 after Ctrl-C.

A closed stdout (``trio-broker consume T | head -1``) ends a command the way Unix tools end:
quietly, with no traceback and no error line. Python ignores SIGPIPE, so the write fails with
``BrokenPipeError``; ``run`` points stdout at ``/dev/null`` (so nothing fails again when the
interpreter flushes it on exit) and returns 0, after the command's own clean-up ran.

What it may import: anything below it, each tool what it needs: the broker (``serve``), the
test double (``serve --brokers``), the blocking client (the Kafka tools), storage (``dump-log``)
and the Spark stage (``export``, ``import``).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple

from .base import CommandError, Tool, UsageError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class Command(NamedTuple):
    help: str
    load: Callable[[], Tool]


def _serve() -> Tool:
    from .serve import SERVE

    return SERVE


def _topics() -> Tool:
    from .topics import TOPICS

    return TOPICS


def _produce() -> Tool:
    from .produce import PRODUCE

    return PRODUCE


def _consume() -> Tool:
    from .consume import CONSUME

    return CONSUME


def _dump_log() -> Tool:
    from .dump_log import DUMP_LOG

    return DUMP_LOG


def _groups() -> Tool:
    from .groups import GROUPS

    return GROUPS


def _share_groups() -> Tool:
    from .share_groups import SHARE_GROUPS

    return SHARE_GROUPS


def _transactions() -> Tool:
    from .transactions import TRANSACTIONS

    return TRANSACTIONS


def _configs() -> Tool:
    from .configs import CONFIGS

    return CONFIGS


def _acls() -> Tool:
    from .acls import ACLS

    return ACLS


def _cluster() -> Tool:
    from .cluster import CLUSTER

    return CLUSTER


def _delete_records() -> Tool:
    from .records import DELETE_RECORDS

    return DELETE_RECORDS


def _schemas() -> Tool:
    from .schemas import SCHEMAS

    return SCHEMAS


def _export() -> Tool:
    from .export import EXPORT

    return EXPORT


def _import() -> Tool:
    from .importer import IMPORT

    return IMPORT


#: command name -> its one-line help and the loader of its Tool, in the order --help lists them
COMMANDS: dict[str, Command] = {
    "serve": Command("run the broker", _serve),
    "topics": Command("create, list, describe, alter or delete topics", _topics),
    "produce": Command("produce lines from stdin to a topic", _produce),
    "consume": Command("print records of a topic", _consume),
    "dump-log": Command("print the batches and records of a segment file", _dump_log),
    "groups": Command("list, describe, reset offsets of or delete consumer groups", _groups),
    "share-groups": Command("list, describe, reset or delete share groups", _share_groups),
    "configs": Command("describe or alter topic and broker configs", _configs),
    "delete-records": Command("delete records below an offset", _delete_records),
    "acls": Command("add, remove or list ACLs", _acls),
    "cluster": Command("describe the cluster: id, brokers, controller, API versions",
                       _cluster),
    "transactions": Command("list transactional ids or describe one", _transactions),
    "schemas": Command("register, check, list or delete Schema Registry schemas", _schemas),
    "export": Command("export topics with Spark (Parquet, JSON, CSV)", _export),
    "import": Command("import Parquet, JSON or CSV files into a topic with Spark", _import),
}


def build_parser(command: str | None = None, *, only: bool = False) -> argparse.ArgumentParser:
    """The argument parser; only ``command``'s module is imported (``serve`` imports no Spark).

    ``only``: ``command``'s subparser alone, for parsing a command line that names it (each
    subparser made adds to every start: docs/benchmarks.md, "Start-up"; ``--help`` before the
    command lists them all).
    """
    from .. import __version__

    parser = argparse.ArgumentParser(prog="trio-broker",
                                     description="A Kafka-compatible broker on Trio.")
    parser.add_argument("--version", action="version", version=f"trio-broker {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, entry in COMMANDS.items():
        if only and name != command:
            continue
        p = sub.add_parser(name, help=entry.help,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        if name == command:  # the others are listed in --help, never imported
            entry.load().add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``trio-broker ARGS...``: the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    at = next((i for i, a in enumerate(args_list) if not a.startswith("-")), len(args_list))
    command = args_list[at] if at < len(args_list) else None
    # a known command after no option but its own: its subparser is the only one needed
    only = command in COMMANDS and at == 0
    # the command's modules load here, and every one of them lives as long as the process: the
    # cyclic collector would only walk them again and again (docs/benchmarks.md, start-up)
    gc.disable()
    try:
        args = build_parser(command, only=only).parse_args(args_list)
    finally:
        gc.enable()
    return run(args.command, args)


def run(command: str, args: argparse.Namespace) -> int:
    """Run ``command`` with arguments its parser produced; its errors reported on one line."""
    tool = COMMANDS[command].load()
    try:
        return tool.run(args)
    except UsageError as exc:
        return report(command, exc, EXIT_USAGE)
    except CommandError as exc:
        return report(command, exc, EXIT_FAILED)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return closed_stdout()


def closed_stdout() -> int:
    """The reader of stdout went away: end quietly, as Unix tools do (exit 0, no message)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a file (embedded, captured)
        pass
    return EXIT_OK


def report(command: str, error: object, status: int) -> int:
    """Print ``error`` as one line on stderr; returns ``status``."""
    message = " ".join(str(error).splitlines()) or type(error).__name__
    print(f"trio-broker {command}: error: {message}", file=sys.stderr, flush=True)
    return status


__all__ = ["COMMANDS", "CommandError", "Tool", "UsageError", "build_parser", "main", "run"]
