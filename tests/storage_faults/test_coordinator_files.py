"""The coordinators' files under a failing disk, on their own (real files, no broker): a failed
append leaves nothing behind, and a compaction that fails after its rename keeps appending to
the new file, so no record answered as durable is written to an unlinked one."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from trio_broker.broker.coordinator.offset_log import OffsetAndMetadata, OffsetLog, encode_record
from trio_broker.broker.coordinator.txn_log import TransactionLog
from trio_broker.broker.coordinator.txn_metadata import TransactionMetadata
from trio_broker.testing.disk_faults import DiskFaults


def _om(offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, "", 1_700_000_000_000 + offset, -1)


def _commit(offset: int) -> bytes:
    return encode_record("g", [(("t", 0), _om(offset))])


def _txn(epoch: int) -> TransactionMetadata:
    return TransactionMetadata("tx", 7, epoch, 60_000)


@pytest.mark.parametrize("op", ["fsync", "write"])
def test_offsets_file_failed_append_leaves_nothing(tmp_path: Path, op: str) -> None:
    log = OffsetLog(tmp_path)
    log.open()
    log.append([_commit(1)])
    with DiskFaults() as faults:
        faults.add(op, path=r"commits\.log$", error=errno.ENOSPC, partial=op == "write")
        with pytest.raises(OSError, match="No space left"):
            log.append([_commit(2) * 3])  # longer than the next record: its tail must not stay
    log.append([_commit(3)])
    log.close()
    reopened = OffsetLog(tmp_path)
    assert reopened.open() == {"g": {("t", 0): _om(3)}}
    assert reopened.truncated_bytes == 0
    reopened.close()


def test_offsets_file_compaction_failing_after_its_rename(tmp_path: Path) -> None:
    log = OffsetLog(tmp_path)
    log.open()
    log.append([_commit(1), _commit(2)])
    with DiskFaults() as faults:  # the directory's second fsync, the one after the rename
        fault = faults.add("fsync", path=f"^{tmp_path}$", nth=2)
        with pytest.raises(OSError, match="Input/output error"):
            log.compact({"g": {("t", 0): _om(2)}})
        assert fault.failed == 1
    log.append([_commit(3)])
    log.close()
    assert OffsetLog(tmp_path).open() == {"g": {("t", 0): _om(3)}}


def test_transaction_log_failed_append_and_compaction(tmp_path: Path) -> None:
    log = TransactionLog(tmp_path)
    log.open()
    log.append([_txn(1)])
    with DiskFaults() as faults:
        faults.add("write", path=r"transactions\.log$", error=errno.ENOSPC, partial=True)
        with pytest.raises(OSError, match="No space left"):
            log.append([_txn(2)] * 3)
        faults.clear()
        fault = faults.add("fsync", path=f"^{tmp_path}$")
        with pytest.raises(OSError, match="Input/output error"):
            log.compact([_txn(1)])
        assert fault.failed == 1
    log.append([_txn(4)])
    log.close()
    assert TransactionLog(tmp_path).open()["tx"].producer_epoch == 4
