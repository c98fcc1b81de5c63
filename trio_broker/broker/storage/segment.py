"""One segment of a partition log (Kafka's ``LogSegment``): a ``.log`` file plus its indexes.

Why this shape: a segment file is nothing but magic-v2 batches back to back, exactly as clients
sent them (with the broker's base offset written in). Fetches can therefore hand out byte ranges
of the file untouched, and recovery needs nothing but the batch headers and CRCs to find where
valid data ends. The file name is the base offset, 20 digits, so a directory listing sorts
segments in offset order.

Writes are positional (``pwrite`` at the segment's known size, never ``O_APPEND``) so that a failed
write can be rolled back by truncating to that size and the next write lands in the right place
even if the truncation could not be done.

Not thread safe on its own: ``Log`` serialises access with its lock.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

from ...protocol.batch import BATCH_HEADER_SIZE, BatchHeader, read_batch_header, verify_crc
from ...protocol.errors import CorruptRecordError
from ...protocol.records import decode_records
from .config import LogConfig
from .file_region import FileRegion
from .files import write_all
from .index import OffsetIndex, TimeIndex
from .txn_index import TXN_INDEX_SUFFIX, TransactionIndex

LOGGER = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
_HEADER_SCAN_CHUNK = 8 * 1024
_VERIFY_SCAN_CHUNK = 1024 * 1024
_MAX_RELATIVE_OFFSET = 2**31 - 1
#: ListOffsets by time decompresses one batch; a compression bomb (a few KB that inflate to
#: gigabytes) must not be inflated past this. Beyond it the batch's base offset is the answer.
MAX_INFLATED_BATCH_BYTES = 32 * 1024 * 1024
#: how many (batch base offset -> position) hints a segment keeps for tail reads
_MAX_POSITION_HINTS = 16


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, config: LogConfig) -> None:
        self.base_offset = base_offset
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self.size = os.fstat(self.fd).st_size
            # The indexes hold no descriptor (``index.py``): the log file is the segment's one.
            new = self.size == 0
            self.offset_index = OffsetIndex(
                directory / segment_file_name(base_offset, INDEX_SUFFIX),
                base_offset,
                config.segment_index_bytes,
                create=new,
            )
            self.time_index = TimeIndex(
                directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX),
                base_offset,
                config.segment_index_bytes,
                create=new,
            )
        except BaseException:
            os.close(self.fd)
            raise
        #: aborted transactions whose markers are in this segment (the file appears lazily)
        self.txn_index = TransactionIndex(
            directory / segment_file_name(base_offset, TXN_INDEX_SUFFIX), base_offset)
        self.next_offset = base_offset
        #: largest batch maxTimestamp in the segment, and the base offset of that batch
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        #: the first batch's maxTimestamp: segment.ms counts from it, as in Kafka
        self.rolling_base_timestamp: int | None = None
        self.bytes_since_last_index_entry = 0
        self.index_interval_bytes = config.index_interval_bytes
        #: bytes known to be on stable storage
        self.synced_size = 0
        # Performance: batch base offset -> file position of the newest batches and of where
        # the last reads stopped. A consumer at the tail asks for exactly such an offset, so
        # it finds its batch with one header read instead of a scan from the index entry
        # (up to index.interval.bytes of headers, ~20 for small batches). Cleared whenever
        # the file is cut back; a stale hint is also caught by checking the header found.
        self._position_hints: dict[int, int] = {}

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, next_offset={self.next_offset}, size={self.size})"

    # --- writing ------------------------------------------------------------------------

    def can_hold_offsets(self, last_offset: int) -> bool:
        return last_offset - self.base_offset <= _MAX_RELATIVE_OFFSET

    def append(
        self,
        batch: bytes | bytearray | tuple[bytes | bytearray | memoryview, ...],
        base_offset: int,
        next_offset: int,
        max_timestamp: int,
        now_ms: int,
    ) -> None:
        """Write one batch at the end; on OSError nothing of it remains and OSError propagates.

        ``batch`` may come in pieces (a rewritten header and the rest), written as one.
        """
        position = self.size
        size = sum(map(len, batch)) if isinstance(batch, tuple) else len(batch)
        try:
            write_all(self.fd, batch, position)
        except OSError:
            self._undo_append(position)
            raise
        # the indexes and the largest timestamp change in memory, and only once the batch is
        # written: a failed write leaves them as they were, nothing to save and restore
        self._index_batch(position, base_offset, max_timestamp, size)
        self.size = position + size
        self.next_offset = next_offset
        self._hint(base_offset, position)
        if self.rolling_base_timestamp is None:
            self.rolling_base_timestamp = max_timestamp if max_timestamp >= 0 else now_ms

    def _hint(self, base_offset: int, position: int) -> None:
        hints = self._position_hints
        if len(hints) >= _MAX_POSITION_HINTS:
            del hints[next(iter(hints))]
        hints[base_offset] = position

    def _undo_append(self, position: int) -> None:
        self._position_hints.clear()
        try:
            os.ftruncate(self.fd, position)
        except OSError:
            LOGGER.exception(
                "Could not truncate %s back to %d bytes after a failed write",
                self.log_path,
                position,
            )
            raise

    def _index_batch(self, position: int, base_offset: int, max_timestamp: int, size: int) -> None:
        # Kafka's rule: index the batch that follows more than index.interval.bytes of data.
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = base_offset
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    @property
    def indexes_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def largest_timestamp(self) -> int:
        """Newest record time, for retention; the file's mtime if batches carry none (Kafka)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return self._mtime_ms()

    def _mtime_ms(self) -> int:
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    def on_become_inactive(self) -> None:
        """Record the final max timestamp so reloads need not scan for it (Kafka does this too),
        and write the index entries still pending: only the active segment has any, so an
        inactive segment can be closed without writing (``replace_segments``, retention)."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.write_pending()
        self.time_index.write_pending()

    # --- scanning -----------------------------------------------------------------------

    def scan(
        self,
        start: int = 0,
        end: int | None = None,
        *,
        verify: bool = False,
        strict: bool = True,
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Yield (position, header) of batches in [start, end).

        ``strict``: a batch or header cut off by ``end`` raises CorruptRecordError (recovery);
        otherwise iteration just stops there (finding a read boundary). ``verify`` also checks
        each batch's CRC-32C.
        """
        end = self.size if end is None else end
        chunk = _VERIFY_SCAN_CHUNK if verify else _HEADER_SCAN_CHUNK
        buf = b""
        buf_start = start
        pos = start
        while pos < end:
            rel = pos - buf_start
            if rel + BATCH_HEADER_SIZE > len(buf):
                buf = os.pread(self.fd, min(chunk, end - pos), pos)
                buf_start, rel = pos, 0
                if len(buf) < BATCH_HEADER_SIZE:
                    if strict:
                        raise CorruptRecordError(
                            f"torn batch header: {end - pos} bytes at position {pos}"
                        )
                    return
            header = read_batch_header(buf, rel)
            batch_end = pos + header.size
            if batch_end > end:
                if strict:
                    raise CorruptRecordError(
                        f"torn batch at position {pos}: {header.size} bytes declared, "
                        f"{end - pos} present"
                    )
                return
            if verify:
                if rel + header.size > len(buf):
                    buf = os.pread(self.fd, min(max(chunk, header.size), end - pos), pos)
                    buf_start, rel = pos, 0
                verify_crc(buf, rel, header)
            yield pos, header
            pos = batch_end

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the batch holding ``offset`` (or the first one after it)."""
        hinted = self._position_hints.get(offset)
        if hinted is not None and hinted + BATCH_HEADER_SIZE <= self.size:
            header = read_batch_header(os.pread(self.fd, BATCH_HEADER_SIZE, hinted))
            if header.base_offset == offset:
                return hinted, header
        start = self.offset_index.lookup(offset)
        for pos, header in self.scan(start):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(self, offset: int, max_bytes: int, min_one_batch: bool,
             max_offset: int | None = None,
             region_min: int | None = None) -> tuple[bytes | FileRegion, int, int] | None:
        """Whole batches from the one holding ``offset``: (bytes, base offset of the first, the
        offset after the last); None if the segment ends before ``offset``.

        ``max_offset`` (a batch boundary: ``read_committed``'s last stable offset) ends the read
        before the batch starting there, even for the first batch. With ``region_min``, a read
        of at least that many bytes is returned as a ``FileRegion`` (to be sent with
        ``sendfile``) instead of being read into memory.
        """
        found = self.find_batch(offset)
        if found is None:
            return None
        pos, header = found
        limit = self.size
        if max_offset is not None and max_offset < self.next_offset:
            if header.base_offset >= max_offset:
                return b"", header.base_offset, header.base_offset
            bound = self.find_batch(max_offset)
            if bound is not None:
                limit = bound[0]
        window = max(max_bytes, header.size) if min_one_batch else max_bytes
        if window < header.size or limit < pos + header.size:
            return b"", header.base_offset, header.base_offset
        stop = min(limit, pos + window)
        if stop == self.size:
            # The file holds only whole batches: reading to its end needs no header walk.
            return self._bytes(pos, stop, region_min), header.base_offset, self.next_offset
        end = pos + header.size
        next_offset = header.next_offset
        # Batches start at every index position, so everything before the last indexed position
        # within ``stop`` is whole; walk headers from there to find the last whole batch.
        indexed, indexed_offset = self.offset_index.entry_at_or_before_position(stop)
        if indexed > end:
            end, next_offset = indexed, indexed_offset
        for batch_pos, batch in self.scan(end, stop, strict=False):
            end = batch_pos + batch.size
            next_offset = batch.next_offset
        self._hint(next_offset, end)  # where the reader will ask next
        return self._bytes(pos, end, region_min), header.base_offset, next_offset

    def _bytes(self, start: int, stop: int, region_min: int | None) -> bytes | FileRegion:
        if region_min is not None and stop - start >= region_min:
            return FileRegion.of(self.fd, start, stop - start)
        return os.pread(self.fd, stop - start, start)

    def find_offset_by_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """First (offset, timestamp, batch leader epoch) with a record timestamp >= ``timestamp``
        in this segment."""
        start_offset = self.time_index.lookup_before(timestamp)
        for pos, header in self.scan(self.offset_index.lookup(start_offset)):
            if header.max_timestamp < timestamp:
                continue
            return self._first_record_at_or_after(pos, header, timestamp)
        return None

    def find_offset_of_max_timestamp(self) -> tuple[int, int, int] | None:
        """(offset, timestamp, batch leader epoch) of the first record carrying this segment's
        largest timestamp (KIP-734), or None for an empty segment."""
        for pos, header in self.scan(self.offset_index.lookup(self.offset_of_max_timestamp)):
            if header.max_timestamp == self.max_timestamp:
                return self._first_record_at_or_after(pos, header, header.max_timestamp)
        return None

    def _first_record_at_or_after(self, pos: int, header: BatchHeader,
                                  timestamp: int) -> tuple[int, int, int]:
        epoch = header.partition_leader_epoch
        if header.timestamp_type == 1:  # LogAppendTime: every record has maxTimestamp
            return header.base_offset, header.max_timestamp, epoch
        # The one place storage decodes records: ListOffsets wants the exact record.
        try:
            records = decode_records(os.pread(self.fd, header.size, pos),
                                     max_uncompressed_bytes=MAX_INFLATED_BATCH_BYTES)
        except CorruptRecordError:
            return header.base_offset, header.max_timestamp, epoch
        for record in records:
            if record.timestamp >= timestamp:
                return record.offset, record.timestamp, epoch
        return header.base_offset, header.max_timestamp, epoch

    @property
    def last_modified_ms(self) -> int:
        """The segment file's modification time (ListOffsets v0 answers by it, as Kafka does)."""
        return self._mtime_ms()

    # --- loading and recovery -----------------------------------------------------------

    def load_trusted(self) -> None:
        """Open an existing segment after a clean shutdown: trust the indexes, scan the tail.

        Raises IndexCorruptError if an index cannot be trusted and CorruptRecordError if the
        tail after the last index entry does not parse; the caller then rebuilds or recovers.
        """
        self.offset_index.load(self.size)
        self.txn_index.load()
        tail = self.offset_index.last_position
        next_offset = self.base_offset
        if self.offset_index.positions:
            next_offset = self.base_offset + self.offset_index.relative_offsets[-1]
        last_pos = tail
        for pos, header in self.scan(tail):
            next_offset = header.next_offset
            last_pos = pos
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.base_offset
        self.next_offset = next_offset
        self.time_index.load(next_offset - self.base_offset)
        if self.time_index.last_timestamp > self.max_timestamp:
            self.max_timestamp = self.time_index.last_timestamp
            self.offset_of_max_timestamp = self.base_offset + self.time_index.relative_offsets[-1]
        self.bytes_since_last_index_entry = self.size - last_pos
        self.rolling_base_timestamp = self._first_batch_max_timestamp()
        self.synced_size = self.size

    def _first_batch_max_timestamp(self) -> int | None:
        if self.size < BATCH_HEADER_SIZE:
            return None
        timestamp = read_batch_header(os.pread(self.fd, BATCH_HEADER_SIZE, 0)).max_timestamp
        return timestamp if timestamp >= 0 else self._mtime_ms()

    def recover(self, *, verify: bool = True) -> tuple[int, str | None]:
        """Rebuild the indexes from the log, truncating at the first torn or corrupt batch.

        Returns (bytes truncated, reason). With ``verify`` every CRC is checked (unclean
        shutdown); without it only headers are read (an index file was bad).
        """
        file_size = os.fstat(self.fd).st_size
        self._position_hints.clear()
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()  # the loader rebuilds it from the markers
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_last_index_entry = 0
        self.rolling_base_timestamp = None
        next_offset = self.base_offset
        valid_end = 0
        reason = None
        try:
            for pos, header in self.scan(0, file_size, verify=verify):
                if header.base_offset < next_offset or header.last_offset_delta < 0:
                    raise CorruptRecordError(
                        f"batch at position {pos} has offsets {header.base_offset}.."
                        f"{header.last_offset}, expected {next_offset} or later"
                    )
                if not self.can_hold_offsets(header.last_offset):
                    raise CorruptRecordError(f"batch at position {pos} overflows the index")
                self._index_batch(pos, header.base_offset, header.max_timestamp, header.size)
                if self.rolling_base_timestamp is None:
                    self.rolling_base_timestamp = (
                        header.max_timestamp if header.max_timestamp >= 0 else self._mtime_ms()
                    )
                next_offset = header.next_offset
                valid_end = pos + header.size
        except CorruptRecordError as exc:
            reason = str(exc)
        truncated = file_size - valid_end
        if truncated:
            os.ftruncate(self.fd, valid_end)
        self.offset_index.persist_all()
        self.time_index.persist_all()
        self.size = valid_end
        self.next_offset = next_offset
        self.synced_size = 0
        return truncated, reason

    # --- lifecycle ----------------------------------------------------------------------

    def sync_fds(self) -> list[int]:
        """Descriptors to fsync, owned by the caller (see ``Log.flush``): a duplicate of the log
        file's, and the index files opened with their pending entries written."""
        fds = [os.dup(self.fd)]
        try:
            fds.append(self.offset_index.open_written())
            fds.append(self.time_index.open_written())
            txn_fd = self.txn_index.sync_fd()
            if txn_fd is not None:
                fds.append(txn_fd)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def close(self, *, write_indexes: bool = True) -> None:
        """Close the log file; first write pending index entries unless ``write_indexes`` is
        False (the segment's files are being replaced or deleted)."""
        if write_indexes:
            for index in (self.offset_index, self.time_index):
                try:
                    index.close()
                except OSError:
                    LOGGER.exception("Writing the index %s failed", index.path)
        os.close(self.fd)

    def delete(self) -> None:
        self.close(write_indexes=False)
        for path in (self.log_path, self.offset_index.path, self.time_index.path,
                     self.txn_index.path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
