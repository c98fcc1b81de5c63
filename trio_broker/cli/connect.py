"""How a client command reaches a cluster: ``--bootstrap-server`` and the one blocking client.

Why one place: every client command takes the same address option and turns the client's errors
into the CLI's the same way (a malformed address is bad input, exit 2; anything the client
reports at run time is a failure, exit 1).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

from .._blocking_client import DEFAULT_BOOTSTRAP, BlockingClient, ClientError
from .base import CommandError, UsageError


def add_bootstrap_argument(parser: argparse.ArgumentParser, *, what: str = "broker(s) to "
                           "connect to") -> None:
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP,
                        metavar="HOST:PORT",
                        help=f"{what} (default {DEFAULT_BOOTSTRAP})")


@contextmanager
def client_errors() -> Iterator[None]:
    """Client failures inside the block become ``CommandError`` (exit 1)."""
    try:
        yield
    except ClientError as exc:
        raise CommandError(str(exc)) from None


@contextmanager
def open_client(args: argparse.Namespace, *, timeout_s: float) -> Iterator[BlockingClient]:
    """A client of ``args.bootstrap_server``, closed on exit; its failures are CommandErrors."""
    try:
        client = BlockingClient(args.bootstrap_server, timeout_s=timeout_s)
    except ValueError as exc:  # a malformed --bootstrap-server
        raise UsageError(str(exc)) from None
    with client_errors(), client:
        yield client
