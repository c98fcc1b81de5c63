"""How the list and describe commands print: ``--output table|plain|json``.

Why three forms: ``table`` is for people (boxes, titles), ``plain`` for ``awk`` and ``cut``
(Kafka's tools' upper-case headers, columns aligned with spaces, ``-`` for an empty cell, one
row per line; a list command prints what the Kafka tool's ``--list`` prints, bare names one
per line, so a script written for one works with the other), ``json`` for programs (one
document with every field). None of them ever wraps or cuts a value when stdout is not a
terminal: a pipe gets every id whole however long it is.

A command fills a ``Report`` (headlines, tables and one JSON document) and ``Report.emit``
prints the form asked for. A closed stdout (``| head -1``) ends the command quietly through
``BrokenPipeError``, which ``trio_broker.cli.run`` turns into exit status 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple, TextIO

FORMATS = ("table", "plain", "json")
EMPTY = "-"

Cell = str | int | float | None


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", "-o", choices=FORMATS, default="table",
                        help="table (default), plain (aligned columns for scripts) or json")


class Table(NamedTuple):
    title: str | None
    columns: Sequence[str]
    rows: Sequence[Sequence[Cell]]
    #: columns right-aligned in the table form (numbers)
    numeric: frozenset[str] = frozenset()


class Report:
    """What one command prints, in the three forms."""

    def __init__(self, form: str = "table") -> None:
        self.form = form
        self._parts: list[str | Table] = []
        self.document: Any = None
        #: the plain form's lines when they are not the tables' (a list command's bare names)
        self.plain_lines: list[str] | None = None

    def line(self, text: str) -> None:
        """A headline for people (table form only: plain and json carry it in their data)."""
        self._parts.append(text)

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Cell]], *,
              title: str | None = None, numeric: Sequence[str] = ()) -> None:
        self._parts.append(Table(title, list(columns), [list(r) for r in rows],
                                 frozenset(numeric)))

    def emit(self, out: TextIO | None = None) -> None:
        out = sys.stdout if out is None else out
        if self.form == "json":
            json.dump(self.document, out, indent=2, sort_keys=False, default=str)
            out.write("\n")
        elif self.form == "plain" and self.plain_lines is not None:
            out.writelines(f"{line}\n" for line in self.plain_lines)
        elif self.form == "plain":
            tables = [p for p in self._parts if isinstance(p, Table)]
            out.write("\n\n".join(plain_table(t) for t in tables))
            if tables:
                out.write("\n")
        else:
            print_rich(self._parts, out)
        out.flush()


def text(value: Cell) -> str:
    if value is None or value == "":
        return EMPTY
    return str(value)


def plain_header(column: str) -> str:
    """Kafka's tools' header style: ``log end offset`` -> ``LOG-END-OFFSET``."""
    return column.upper().replace(" ", "-")


def plain_table(table: Table) -> str:
    """Columns aligned with two spaces, no trailing blanks, no cut values."""
    header = [plain_header(c) for c in table.columns]
    rows = [header] + [[text(c).replace("\n", " ") for c in row] for row in table.rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
                     .rstrip() for row in rows)


def print_rich(parts: Sequence[str | Table], out: TextIO) -> None:
    """Box tables; on a terminal they fit its width, elsewhere they take what they need."""
    from rich import box
    from rich.console import Console
    from rich.table import Table as RichTable

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError  # rich would exit 1; a closed pipe is no failure

    console = _Console(file=out, highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console = _Console(file=out, highlight=False, soft_wrap=True, width=1 << 20)
    for part in parts:
        if isinstance(part, str):
            console.print(part, markup=False)
            continue
        table = RichTable(title=part.title, title_justify="left", box=box.HEAVY_HEAD)
        for column in part.columns:
            table.add_column(column, justify="right" if column in part.numeric else "left",
                             overflow="fold")
        for row in part.rows:
            table.add_row(*(text(c) for c in row))
        console.print(table)


def dump_json_line(document: Any, out: TextIO) -> None:
    """One compact JSON document per line (``consume --output json``)."""
    out.write(json.dumps(document, separators=(",", ":"), ensure_ascii=False))
    out.write("\n")


__all__ = ["EMPTY", "FORMATS", "Report", "Table", "add_output_argument", "dump_json_line",
           "plain_header", "plain_table", "text"]
