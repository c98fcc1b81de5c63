"""Storage micro-benchmarks: append, read and recovery of one partition log.

Run: ``.venv/bin/python bench/bench_log.py [--dir PATH] [--mb 256]``. Prints one line per figure.
Appends go to the page cache (no fsync) as with Kafka's default flush policy; the fsync line
shows what flush.messages=1 would cost per batch on this disk.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from trio_broker.broker.storage import Log, LogConfig
from trio_broker.protocol.batch import validate_batch
from trio_broker.protocol.records import build_batch

TS = 1_700_000_000_000


def _template(batch_bytes: int, record_bytes: int) -> bytes:
    count = max(1, batch_bytes // (record_bytes + 10))
    value = os.urandom(record_bytes)
    return build_batch([(None, value)] * count, base_timestamp_ms=TS)


def bench_append(directory: Path, total_mb: int, batch_bytes: int, record_bytes: int) -> Log:
    template = _template(batch_bytes, record_bytes)
    header = validate_batch(template, max_message_bytes=1 << 30)
    log = Log(directory, LogConfig(retention_ms=-1), now_ms=TS)
    batches = total_mb * 1024 * 1024 // len(template)
    start = time.perf_counter()
    for _ in range(batches):
        log.append(bytearray(template), header, now_ms=TS)
    elapsed = time.perf_counter() - start
    mb = batches * len(template) / 1e6
    print(
        f"append {len(template) / 1024:.1f} KiB batches ({header.records_count} records): "
        f"{mb / elapsed:,.0f} MB/s, {batches / elapsed:,.0f} batches/s, "
        f"{batches * header.records_count / elapsed:,.0f} records/s"
    )
    return log


def bench_validate(batch_bytes: int) -> None:
    template = _template(batch_bytes, 100)
    n = 20_000
    start = time.perf_counter()
    for _ in range(n):
        validate_batch(template, max_message_bytes=1 << 30)
    elapsed = time.perf_counter() - start
    print(f"validate_batch {len(template) / 1024:.1f} KiB: {elapsed / n * 1e6:.1f} us/batch")


def bench_read(log: Log, max_bytes: int) -> None:
    offset = log.log_start_offset
    total = 0
    start = time.perf_counter()
    reads = 0
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes)
        total += len(data.records)
        reads += 1
        # Next offset: the last batch's next offset, from its header only.
        pos = 0
        while pos < len(data.records):
            length = int.from_bytes(data.records[pos + 8 : pos + 12], "big")
            last_delta = int.from_bytes(data.records[pos + 23 : pos + 27], "big")
            offset = int.from_bytes(data.records[pos : pos + 8], "big") + last_delta + 1
            pos += length + 12
    elapsed = time.perf_counter() - start
    print(
        f"read max_bytes={max_bytes // 1024} KiB: {total / 1e6 / elapsed:,.0f} MB/s, "
        f"{reads / elapsed:,.0f} reads/s"
    )


def bench_fsync(directory: Path) -> None:
    template = _template(16 * 1024, 100)
    header = validate_batch(template, max_message_bytes=1 << 30)
    log = Log(directory / "fsync-0", LogConfig(), now_ms=TS)
    n = 200
    start = time.perf_counter()
    for _ in range(n):
        log.append(bytearray(template), header, now_ms=TS)
        log.flush()
    elapsed = time.perf_counter() - start
    print(f"append + flush (flush.messages=1), 16 KiB: {n / elapsed:,.0f} batches/s")
    log.close()


def bench_recovery(directory: Path, segment_mb: int) -> None:
    template = _template(16 * 1024, 100)
    header = validate_batch(template, max_message_bytes=1 << 30)
    path = directory / "recover-0"
    log = Log(path, LogConfig(retention_ms=-1), now_ms=TS)
    for _ in range(segment_mb * 1024 * 1024 // len(template)):
        log.append(bytearray(template), header, now_ms=TS)
    size = log.size_bytes
    log.close()
    start = time.perf_counter()
    Log(path, LogConfig(retention_ms=-1), clean_shutdown=True, now_ms=TS).close(flush=False)
    clean = time.perf_counter() - start
    (path / f"{0:020d}.snapshot").unlink(missing_ok=True)
    for snapshot in path.glob("*.snapshot"):
        snapshot.unlink()
    start = time.perf_counter()
    Log(path, LogConfig(retention_ms=-1), clean_shutdown=False, now_ms=TS).close(flush=False)
    unclean = time.perf_counter() - start
    print(
        f"open {size / 1e6:.0f} MB segment: clean {clean * 1000:.1f} ms, "
        f"unclean (CRC scan + index rebuild + producer state) {unclean * 1000:.0f} ms "
        f"({size / 1e6 / unclean:,.0f} MB/s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: tmp)")
    parser.add_argument("--mb", type=int, default=256, help="MB to append per run")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    root = Path(tempfile.mkdtemp(prefix="bench-log-", dir=args.dir))
    try:
        bench_validate(16 * 1024)
        log = bench_append(root / "append-0", args.mb, 16 * 1024, 100)
        bench_read(log, 1024 * 1024)
        bench_read(log, 64 * 1024)
        log.close()
        small = bench_append(root / "small-0", max(1, args.mb // 8), 1024, 100)
        small.close()
        bench_fsync(root)
        bench_recovery(root, 100)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
