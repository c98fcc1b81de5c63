"""``trio-broker transactions list|describe ID``: transactional ids as Kafka's
``kafka-transactions.sh`` shows them (ListTransactions, DescribeTransactions).

Why the Kafka protocol: the command works against any running broker, ours or Kafka, and shows
what its transaction coordinator holds: each id's producer id and epoch, state, timeout, when its
open transaction started and the partitions it holds.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from ..client.blocking import BlockingClient
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages import make_request
from .base import CommandError, Tool
from .connect import add_client_arguments, open_client


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="transactions_command", required=True, metavar="ACTION")
    listing = sub.add_parser("list", help="list transactional ids with their state")
    listing.add_argument("--state", action="append", default=[], metavar="STATE",
                         help="only ids in this state (Ongoing, Empty, CompleteCommit, ...); "
                              "repeatable")
    describe = sub.add_parser("describe", help="one transactional id's transaction")
    describe.add_argument("transactional_id", metavar="ID")
    for p in (listing, describe):
        add_client_arguments(p, what="a broker to ask")
        p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                       help="socket timeout per request (default 10)")


def run(args: argparse.Namespace) -> int:
    console = Console()
    with open_client(args, timeout_s=args.timeout) as client:
        if args.transactions_command == "list":
            list_transactions(console, client, args.state)
        else:
            describe_transaction(console, client, args.transactional_id)
    return 0


def _call(client: BlockingClient, api_key: ApiKey, **fields: Any) -> Any:
    # one node coordinates every transactional id; any broker lists its own
    return client.any_connection().request(api_key,
                                           lambda v: make_request(api_key, v, **fields))


def list_transactions(console: Console, client: BlockingClient, states: list[str]) -> None:
    r = _call(client, ApiKey.ListTransactions, state_filters=states, producer_id_filters=[],
              duration_filter=-1, transactional_id_pattern=None)
    if r.error_code:
        raise CommandError(f"ListTransactions failed: {ErrorCode(r.error_code).name}")
    if r.unknown_state_filters:
        raise CommandError(f"unknown state(s): {', '.join(r.unknown_state_filters)}")
    if not r.transaction_states:
        console.print("no transactional ids")
        return
    table = Table(title="transactional ids", title_justify="left")
    for column in ("transactional id", "producer id", "state"):
        table.add_column(column, justify="right" if column == "producer id" else "left")
    for s in sorted(r.transaction_states, key=lambda s: s.transactional_id):
        table.add_row(s.transactional_id, str(s.producer_id), s.transaction_state)
    console.print(table)


def describe_transaction(console: Console, client: BlockingClient, transactional_id: str,
                         ) -> None:
    r = _call(client, ApiKey.DescribeTransactions, transactional_ids=[transactional_id])
    [s] = r.transaction_states
    if s.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
        raise CommandError(f"transactional id {transactional_id!r} does not exist")
    if s.error_code:
        raise CommandError(f"DescribeTransactions failed: {ErrorCode(s.error_code).name}")
    start_s = s.transaction_start_time_ms / 1000
    started = ("-" if start_s < 0 else
               f"{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(start_s))} UTC "
               f"({time.time() - start_s:.1f} s ago)")
    partitions = ", ".join(f"{t.topic}: {','.join(str(p) for p in sorted(t.partitions))}"
                           for t in s.topics) or "-"
    table = Table(title=f"transactional id {transactional_id}", title_justify="left",
                  show_header=False)
    table.add_column("field")
    table.add_column("value")
    for field, value in (("state", s.transaction_state), ("producer id", str(s.producer_id)),
                         ("producer epoch", str(s.producer_epoch)),
                         ("timeout", f"{s.transaction_timeout_ms} ms"),
                         ("started", started), ("partitions", partitions)):
        table.add_row(field, value)
    console.print(table)


TRANSACTIONS = Tool(add_arguments, run)
