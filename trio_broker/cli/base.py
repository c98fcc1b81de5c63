"""What every command is: a ``Tool`` (its arguments and its run) and the two errors it raises.

Why two error types and no printing in the commands: ``trio_broker.cli.run`` reports every error
the same way (one line on stderr) and turns the type into the exit status, so a command only
says what went wrong and whose fault it is.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NamedTuple


class UsageError(Exception):
    """Bad input on the command line (a malformed address, a partition the topic lacks): exit 2."""


class CommandError(Exception):
    """A failure at run time (no broker, a Kafka error code, a failed Spark job): exit 1."""


class Tool(NamedTuple):
    """One command: ``add_arguments(parser)`` fills its subparser, ``run(args)`` is its exit
    status (0 done; errors are raised as ``UsageError`` or ``CommandError``)."""

    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
