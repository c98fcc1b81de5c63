"""The class archive's writer: a short export whose driver JVM records the classes it loads.

Why a process of its own: the first export that finds no archive starts this one as it exits
(``_class_archive.ClassArchive.start_writer``) and returns at once, so no user waits for the
archive to be written. Run as ``python -m trio_broker.spark._archive_writer`` with
``_class_archive.WRITER`` set in its environment, it starts a broker of its own on 127.0.0.1 in
a temporary directory, fills a small topic and exports it as ``trio-broker export`` does (the
default Parquet export of a short job), so the archive holds the classes an export loads. The
JVM writes the archive as this process exits, and ``_class_archive`` publishes it once the JVM
exited cleanly. It leaves nothing but the archive (and its log, ``writer.log``, beside it).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import trio
from rich.console import Console

from ..client import open_producer
from ..testing.threaded import TEST_DEFAULTS, ThreadedBroker
from ._class_archive import WRITER, class_archive
from .job import ExportJob, ExportSettings

#: records of the writer's export: enough for every task of a local export to read some
RECORDS = 2_000
TOPIC = "class-archive"


async def _fill(bootstrap_servers: str) -> None:
    async with open_producer(bootstrap_servers=bootstrap_servers) as producer:
        for i in range(RECORDS):
            await producer.send_soon(TOPIC, b"v" * 100, key=b"%d" % i, headers=[("h", b"1")])


def main() -> int:
    archive = class_archive()
    if WRITER not in os.environ or archive is None or archive.path.is_file():
        return 0
    with tempfile.TemporaryDirectory(prefix="trio-broker-class-archive-") as tmp:
        broker = ThreadedBroker(**{**TEST_DEFAULTS, "log_dirs": str(Path(tmp) / "data")})
        broker.start()
        try:
            broker.create_topic(TOPIC, 2)
            trio.run(_fill, broker.bootstrap_servers)
            settings = ExportSettings(bootstrap_servers=broker.bootstrap_servers,
                                      topics=(TOPIC,), out=Path(tmp) / "out")
            ExportJob(settings).batch(Console(file=sys.stderr), interactive=False)
        finally:
            broker.stop()
    return 0  # the JVM writes the archive as this process exits


if __name__ == "__main__":
    sys.exit(main())
