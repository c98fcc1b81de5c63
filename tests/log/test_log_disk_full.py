"""A full disk, for real: a 1 MiB tmpfs (needs root, as in CI containers; skipped otherwise)."""

import contextlib
from pathlib import Path

import pytest

from tests.log.log_helpers import TS, make_batch
from trio_broker.broker.storage import KafkaStorageError, Log, LogConfig
from trio_broker.protocol.records import decode_batches


@pytest.fixture
def small_disk(tmpfs) -> Path:
    return tmpfs("1m")


def _append_until_full(log: Log) -> tuple[int, KafkaStorageError, int]:
    for appended in range(1000):
        buf, header = make_batch(1, value=bytes(range(256)) * 64)  # ~16 KiB
        try:
            log.append(buf, header, now_ms=TS)
        except KafkaStorageError as exc:
            return appended, exc, len(buf)
    raise AssertionError("the disk never filled up")


def test_enospc_leaves_nothing_half_written(small_disk: Path) -> None:
    ballast = small_disk / "ballast"
    ballast.write_bytes(bytes(128 * 1024))
    log = Log(small_disk / "t-0", LogConfig(index_interval_bytes=1024))
    with contextlib.ExitStack() as stack:
        stack.callback(log.close, flush=False)
        appended, error, batch_size = _append_until_full(log)
        assert "No space left" in str(error)
        assert appended > 10
        segment = small_disk / "t-0" / "00000000000000000000.log"
        assert log.log_end_offset == appended
        assert segment.stat().st_size == log.size_bytes == appended * batch_size
        data = log.read(0, 1 << 30).records
        assert [r.offset for _, rs in decode_batches(data) for r in rs] == list(range(appended))
        # Space comes back: the same log accepts appends again, with the next offset.
        ballast.unlink()
        buf, header = make_batch(1, value=b"after")
        assert log.append(buf, header, now_ms=TS).first_offset == appended
        assert log.read(appended, 100).first_offset == appended
    reopened = Log(small_disk / "t-0", LogConfig(), clean_shutdown=False)
    assert reopened.log_end_offset == appended + 1
    reopened.close(flush=False)
