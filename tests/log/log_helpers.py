"""Shared helpers for the storage tests: build validated batches and append them."""

from __future__ import annotations

from pathlib import Path

import pytest

from trio_broker.broker.storage import Log, LogAppendInfo, LogConfig
from trio_broker.broker.storage.segment import LogSegment
from trio_broker.protocol.batch import BatchHeader, validate_batch
from trio_broker.protocol.compression import Compression
from trio_broker.protocol.records import build_batch, decode_batches

TS = 1_700_000_000_000
SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=256, retention_ms=-1)


def make_batch(
    count: int = 1,
    *,
    value: bytes = b"value",
    ts: int = TS,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    compression: Compression = Compression.NONE,
) -> tuple[bytearray, BatchHeader]:
    raw = build_batch(
        [(b"key-%d" % i, value) for i in range(count)],
        base_timestamp_ms=ts,
        compression=compression,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    buf = bytearray(raw)
    return buf, validate_batch(buf, max_message_bytes=10_000_000)


def append(log: Log, count: int = 1, *, now_ms: int = TS, **kwargs: object) -> LogAppendInfo:
    buf, header = make_batch(count, **kwargs)  # type: ignore[arg-type]
    return log.append(buf, header, now_ms=now_ms)


def open_log(path: Path, config: LogConfig = SMALL, **kwargs: object) -> Log:
    """Open with the tests' clock, so loading does not expire producers seen "at" TS."""
    kwargs.setdefault("now_ms", TS)
    return Log(path, config, **kwargs)  # type: ignore[arg-type]


def read_offsets(log: Log) -> list[int]:
    """Every record offset the log serves, read from its start in reads of up to 1 MiB."""
    out: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        out += [r.offset for _, rs in decode_batches(data.records) for r in rs]
        offset = out[-1] + 1
    return out


def spy_recovery(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The base offsets of the segments a load then recovers (re-reads), in order."""
    recovered: list[int] = []
    original = LogSegment.recover

    def spy(self: LogSegment, *, verify: bool = True) -> tuple[int, str | None]:
        recovered.append(self.base_offset)
        return original(self, verify=verify)

    monkeypatch.setattr(LogSegment, "recover", spy)
    return recovered
