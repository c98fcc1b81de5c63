"""An append-only file of CRC-checked records: the durability the coordinators' files share.

Why one class: the committed-offsets file (``commits.log``) and the group metadata file
(``groups.log``) differ only in their record format and what a replay yields; how a record
becomes durable does not differ. A record is fsynced before the request that caused it is
answered; a write that fails is cut off so unacknowledged bytes never stand in front of later
records; a torn tail is cut off on open; and the live state is rewritten (temp file, fsync,
rename, directory fsync) when the file has grown past twice its live size. Subclasses give the
magic header, the file names, the replay and the records of a live state.

A file that is missing or shorter than its header opens as an empty one, and nothing is
created on open: the directory and the file (header, no fsync) are made by the first record or
compaction, as Kafka makes its internal topics on first use. Their directory entries (the file's
and the directory's, in the log dir) are fsynced together with the first record, before that
record's request is answered; a broker with an empty log dir thus starts without touching the
disk, and one that never sees a group or a commit writes no file.

Plain synchronous code run in worker threads; every call holds one lock, since ``close()`` may
come from the event loop while a write runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import BinaryIO, Generic, TypeVar

from ..fileio import fsync_dir, fsync_fd, replace, write_all

LOGGER = logging.getLogger(__name__)

State = TypeVar("State")


class RecordFile(Generic[State]):
    """Recover, append (fsynced), compact and close one record file."""

    #: the file's first bytes: its format and version
    MAGIC: bytes
    FILE_NAME: str
    TMP_NAME: str
    #: how log lines name the file ("offsets file")
    WHAT: str

    def __init__(self, directory: Path, *, compact_bytes: int) -> None:
        self.directory = Path(directory)
        self.path = self.directory / self.FILE_NAME
        self.compact_bytes = compact_bytes
        self._lock = threading.Lock()
        self._file: BinaryIO | None = None
        self._opened = False
        self._size = 0
        self._size_after_compaction = 0
        #: bytes cut off a torn tail by the last ``open`` (for logs and tests)
        self.truncated_bytes = 0
        #: a new file whose directory entries are not yet known durable (the first append syncs)
        self._entry_unsynced = False
        #: the file was missing or short at open: the first append or compaction writes it anew
        self._create_on_write = False

    # --- what a subclass gives -------------------------------------------------------------

    def replay(self, data: bytes) -> tuple[State, int]:
        """The live state of a whole file's bytes and how many of them are valid."""
        raise NotImplementedError

    def live_records(self, state: State) -> Iterable[bytes]:
        """Encoded records that replay to ``state`` (what compaction writes)."""
        raise NotImplementedError

    def describe(self, state: State) -> str:
        """What an opened file holds, for the log line."""
        raise NotImplementedError

    def not_open(self) -> Exception:
        raise NotImplementedError

    # --- the file ----------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._opened

    @property
    def size_bytes(self) -> int:
        return self._size

    def open(self) -> State:
        """Recover the file (truncating a torn tail) and return its live state."""
        with self._lock:
            tmp = self.directory / self.TMP_NAME
            if tmp.exists():  # a compaction that did not reach its rename: the old file is whole
                tmp.unlink()
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size < len(self.MAGIC):  # missing or short means empty: made on the first write
                self._create_on_write = True
                self._opened = True
                self._size = self._size_after_compaction = len(self.MAGIC)
                state, _ = self.replay(self.MAGIC)
                LOGGER.info("%s %s: none yet, %s", self.WHAT, self.path, self.describe(state))
                return state
            else:
                data = self.path.read_bytes()
                state, valid = self.replay(data)
                self.truncated_bytes = len(data) - valid
                if self.truncated_bytes:
                    LOGGER.warning("%s %s: truncating a torn tail of %d bytes at byte %d",
                                   self.WHAT, self.path, self.truncated_bytes, valid)
                    with open(self.path, "r+b") as f:
                        f.truncate(valid)
                        fsync_fd(f.fileno())
            self._file = open(self.path, "ab")  # noqa: SIM115 - held open until close()
            self._opened = True
            self._size = self._size_after_compaction = valid
            LOGGER.info("%s %s: %d bytes, %s", self.WHAT, self.path, valid, self.describe(state))
            return state

    def append(self, records: Sequence[bytes]) -> None:
        """Write ``records`` and fsync: when this returns they survive a crash."""
        with self._lock:
            self._append(records)

    def should_compact(self) -> bool:
        return self._size > max(self.compact_bytes, 2 * self._size_after_compaction)

    def compact(self, state: State) -> None:
        """Replace the file by one holding only the live ``state``."""
        with self._lock:
            f = self._require_open()
            tmp = self.directory / self.TMP_NAME
            size = self._write_new(tmp, [self.MAGIC, *self.live_records(state)])
            replace(tmp, self.path)
            # From the rename on, appends must go to the new file even if a sync below fails:
            # the old one is unlinked, and a record appended to it would be lost.
            f.close()
            self._file = open(self.path, "ab")  # noqa: SIM115
            LOGGER.info("%s %s compacted from %d to %d bytes", self.WHAT, self.path, self._size,
                        size)
            self._size = self._size_after_compaction = size
            fsync_dir(self.directory)
            if self._entry_unsynced:
                fsync_dir(self.directory.parent)
                self._entry_unsynced = False

    def close(self, final_records: Sequence[bytes] = ()) -> None:
        """Append ``final_records`` (if any), fsync and close; idempotent."""
        with self._lock:
            try:
                if final_records and self._opened:
                    self._append(final_records)
            finally:
                if self._file is not None:
                    self._file.flush()
                    fsync_fd(self._file.fileno())
                    self._file.close()
                    self._file = None
                self._opened = False

    def _append(self, records: Sequence[bytes]) -> None:
        f = self._require_open()
        data = b"".join(records)
        try:
            # at the known end (the file is opened for append, so this is where it lands)
            write_all(f.fileno(), data, self._size)
            fsync_fd(f.fileno())
            if self._entry_unsynced:  # the file's first record: its name must survive too
                fsync_dir(self.directory)
                fsync_dir(self.directory.parent)
                self._entry_unsynced = False
        except OSError:
            # Unacknowledged bytes must not stay in front of later records: cut them off.
            self._truncate_to_known_size()
            raise
        self._size += len(data)

    def _truncate_to_known_size(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass  # the failed flush may fail again on close; the buffer is dropped anyway
        self._file = None
        with open(self.path, "r+b") as f:
            f.truncate(self._size)
            fsync_fd(f.fileno())
        self._file = open(self.path, "ab")  # noqa: SIM115

    def _require_open(self) -> BinaryIO:
        if self._file is None:
            if not self._opened:
                raise self.not_open()
            if self._create_on_write:
                self._create()
                assert self._file is not None
                return self._file
            # A failed write could not even be cut off last time: try again before appending.
            self._truncate_to_known_size()
        assert self._file is not None
        return self._file

    def _create(self) -> None:
        """Make the directory and the file with its header (no fsync: the first record's
        append or compaction makes the entries durable)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path.write_bytes(self.MAGIC)  # a failure here leaves it to the next write
        self._file = open(self.path, "ab")  # noqa: SIM115 - held open until close()
        self._create_on_write = False
        self._entry_unsynced = True

    def _write_new(self, path: Path, chunks: Iterable[bytes]) -> int:
        """Write ``chunks`` to a new file, fsync it and its directory; the bytes written."""
        data = b"".join(chunks)
        with open(path, "wb") as out:
            write_all(out.fileno(), data, 0)
            fsync_fd(out.fileno())
        fsync_dir(path.parent)
        return len(data)


__all__ = ["RecordFile"]
