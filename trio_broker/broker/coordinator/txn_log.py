"""The transaction log: every transactional id's state, durable (Kafka's ``__transaction_state``).

Why a file of its own and not a topic: one node has one coordinator, so the log needs no
partitions and no replication factor (Kafka's default of 3 for ``__transaction_state`` is what
most often stops transactions on a one-node broker). Each write is one record holding the whole
state of one transactional id; the last record of an id wins and a record in state ``Dead``
forgets it. A state change is answered only after its record is fsynced (Kafka writes the
transaction log with ``acks=all`` before answering AddPartitionsToTxn, AddOffsetsToTxn and
EndTxn). When the file grows past ``compact_bytes`` it is rewritten with only the live states.

File ``__transaction_state/transactions.log`` in the first log dir: records of
``length u32 | crc u32 (CRC-32C of the payload) | payload (JSON of TransactionMetadata)``.
A torn tail (a crash mid-write) is cut off when the file is opened.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
from collections.abc import Iterable
from pathlib import Path

from ...protocol.crc import crc32c
from ..fileio import fsync_dir, fsync_fd, replace, write_all
from .txn_metadata import TransactionMetadata, TxnState

LOGGER = logging.getLogger(__name__)

TXN_DIR_NAME = "__transaction_state"
_FILE_NAME = "transactions.log"
_HEADER = struct.Struct(">II")
DEFAULT_COMPACT_BYTES = 16 * 1024 * 1024


def encode(meta: TransactionMetadata) -> bytes:
    payload = json.dumps(meta.to_json(), separators=(",", ":")).encode()
    return _HEADER.pack(len(payload), crc32c(payload)) + payload


def replay(data: bytes) -> tuple[dict[str, TransactionMetadata], int]:
    """The states the records in ``data`` leave, and the length of its whole records."""
    states: dict[str, TransactionMetadata] = {}
    pos = 0
    while pos + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, pos)
        end = pos + _HEADER.size + length
        payload = data[pos + _HEADER.size:end]
        if end > len(data) or crc32c(payload) != crc:
            break
        try:
            meta = TransactionMetadata.from_json(json.loads(payload))
        except (ValueError, KeyError, TypeError) as exc:
            LOGGER.error("unreadable transaction record at byte %d: %s", pos, exc)
            break
        if meta.state is TxnState.DEAD:
            states.pop(meta.transactional_id, None)
        else:
            states[meta.transactional_id] = meta
        pos = end
    return states, pos


class TransactionLog:
    """Append-only, fsynced; methods block (call them from a worker thread)."""

    def __init__(self, directory: Path, *, compact_bytes: int = DEFAULT_COMPACT_BYTES) -> None:
        self.directory = directory
        self.path = directory / _FILE_NAME
        self.compact_bytes = compact_bytes
        self._fd: int | None = None
        self._size = 0
        self._entry_unsynced = False
        #: the file was missing at open: the first append or compaction makes it
        self._create_on_write = False
        self._lock = threading.Lock()

    def open(self) -> dict[str, TransactionMetadata]:
        """Read every state back (cutting a torn tail) and open the file for appends; a
        missing file reads as an empty one and is made by the first write (nothing is created
        here, as Kafka makes ``__transaction_state`` on first use)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self._create_on_write = True
            self._size = 0
            return {}
        states, good = replay(data)
        if good < len(data):
            LOGGER.warning("cutting %d bytes of torn transaction records from %s",
                           len(data) - good, self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        if good < len(data):
            os.ftruncate(self._fd, good)
            fsync_fd(self._fd)
        # A new (empty) file needs no fsync to open: a missing file reads as an empty one. Its
        # directory entry is made durable with the first record (``append``).
        self._entry_unsynced = not data
        self._size = good
        return states

    def append(self, metas: Iterable[TransactionMetadata]) -> None:
        """Write and fsync one record per state (OSError if the disk fails, and then nothing
        of them stays in the file)."""
        data = b"".join(encode(m) for m in metas)
        with self._lock:
            fd = self._require_open()
            try:
                write_all(fd, data, self._size)
                fsync_fd(fd)
                if self._entry_unsynced:
                    fsync_dir(self.directory)
                    fsync_dir(self.directory.parent)
                    self._entry_unsynced = False
            except OSError:
                # Unanswered bytes (a torn record) must not stand in front of later records:
                # replay stops at the first bad one, and would lose every record after it.
                os.ftruncate(fd, self._size)
                raise
            self._size += len(data)

    def should_compact(self) -> bool:
        return self._size > self.compact_bytes

    def compact(self, live: Iterable[TransactionMetadata]) -> None:
        """Rewrite the file with ``live`` states only (temp file, fsync, rename)."""
        data = b"".join(encode(m) for m in live)
        tmp = self.path.with_name(_FILE_NAME + ".tmp")
        with self._lock:
            self._require_open()  # a log never written: make its directory first
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                write_all(fd, data, 0)
                fsync_fd(fd)
                replace(tmp, self.path)
            except BaseException:
                os.close(fd)
                tmp.unlink(missing_ok=True)
                raise
            # From the rename on, appends go to the new file even if a sync below fails: the
            # old one is unlinked, and a record appended to it would be lost.
            if self._fd is not None:
                os.close(self._fd)
            self._fd, self._size = fd, len(data)
            fsync_dir(self.directory)
            if self._entry_unsynced:  # a directory made by this compaction
                fsync_dir(self.directory.parent)
                self._entry_unsynced = False

    def close(self) -> None:
        with self._lock:
            self._create_on_write = False
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def _require_open(self) -> int:
        if self._fd is None:
            if not self._create_on_write:
                raise OSError("the transaction log is closed")
            self.directory.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            self._create_on_write = False
            self._entry_unsynced = True
        return self._fd


__all__ = ["DEFAULT_COMPACT_BYTES", "TXN_DIR_NAME", "TransactionLog", "encode", "replay"]
