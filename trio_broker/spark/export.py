"""``trio-broker export`` for embedding: ``main(argv) -> int`` runs it as the command line does.

The job itself is ``trio_broker.spark.job``; the arguments are ``trio_broker.cli.export``'s.
``add_arguments(parser)`` and ``run(args)`` make it a subcommand of another parser.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import cli
from ..cli.export import add_arguments


def run(args: argparse.Namespace) -> int:
    """Run an export from parsed ``add_arguments`` options; errors are reported on one line."""
    return cli.run("export", args)


def main(argv: Sequence[str] | None = None) -> int:
    """``trio-broker export ARGS...``: the exit status."""
    return cli.main(["export", *(sys.argv[1:] if argv is None else argv)])


__all__ = ["add_arguments", "main", "run"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
