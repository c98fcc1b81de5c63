"""Control batches: the transaction markers a coordinator writes into partitions, sans-IO.

Why a batch of its own: a transaction ends in every partition it touched with one *control
batch* holding one *control record*, written by the broker (clients may never produce one). Its
header carries the transaction's producer id and epoch with the transactional (bit 4) and
control (bit 5) attribute bits set and no sequence; readers skip it as data, and a
``read_committed`` reader uses it to know where an aborted transaction's records stop.

The one record (Kafka's ``EndTransactionMarker``), all big-endian::

    key    version i16 (0) | type i16 (0 = ABORT, 1 = COMMIT)
    value  version i16 (0) | coordinator epoch i32

Control batches are never compressed, so reading one back is a fixed walk over the record.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from .batch import BATCH_HEADER_SIZE, CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader, finish_batch
from .compression import Buffer
from .errors import CorruptRecordError
from .records import read_varint, write_varint

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_CURRENT_VERSION = 0


class ControlRecordType(enum.IntEnum):
    """Kafka's ``ControlRecordType`` (the record key's type field)."""

    ABORT = 0
    COMMIT = 1


class EndTransactionMarker(NamedTuple):
    """What a marker says: how the transaction ended, and which coordinator epoch wrote it."""

    committed: bool
    coordinator_epoch: int


def build_marker_batch(*, producer_id: int, producer_epoch: int, committed: bool,
                       coordinator_epoch: int, timestamp_ms: int) -> bytes:
    """One control batch ending ``producer_id``'s transaction (offset 0; the log assigns it)."""
    kind = ControlRecordType.COMMIT if committed else ControlRecordType.ABORT
    key = _KEY.pack(_CURRENT_VERSION, kind)
    value = _VALUE.pack(_CURRENT_VERSION, coordinator_epoch)
    record = bytearray((0, 0, 0))  # attributes, timestamp delta 0, offset delta 0
    write_varint(record, len(key))
    record += key
    write_varint(record, len(value))
    record += value
    record.append(0)  # no headers
    body = bytearray(BATCH_HEADER_SIZE)
    write_varint(body, len(record))
    body += record
    finish_batch(body, attributes=TRANSACTIONAL_BIT | CONTROL_BIT, records_count=1,
                 base_timestamp=timestamp_ms, max_timestamp=timestamp_ms,
                 producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1)
    return bytes(body)


def read_marker(buf: Buffer, pos: int, header: BatchHeader) -> EndTransactionMarker | None:
    """The marker of the control batch at ``pos``, or None for an empty control batch (Kafka's
    cleaner leaves those). Raises CorruptRecordError for a record that is not a marker."""
    if not header.is_control:
        raise CorruptRecordError("not a control batch")
    if header.records_count == 0:
        return None
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecordError("control batch truncated")
    try:
        length, i = read_varint(buf, pos + BATCH_HEADER_SIZE)
        record_end = i + length
        i += 1  # attributes
        _, i = read_varint(buf, i)  # timestamp delta
        _, i = read_varint(buf, i)  # offset delta
        key_length, i = read_varint(buf, i)
        if key_length < _KEY.size or i + key_length > record_end:
            raise CorruptRecordError(f"control record key of {key_length} bytes")
        version, kind = _KEY.unpack_from(buf, i)
        i += key_length
        value_length, i = read_varint(buf, i)
        coordinator_epoch = -1
        if value_length >= _VALUE.size and i + value_length <= record_end:
            _, coordinator_epoch = _VALUE.unpack_from(buf, i)
    except struct.error as exc:
        raise CorruptRecordError(f"malformed control record: {exc}") from exc
    if record_end > end or version < 0:
        raise CorruptRecordError("malformed control record")
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise CorruptRecordError(f"unknown control record type {kind}")
    return EndTransactionMarker(kind == ControlRecordType.COMMIT, coordinator_epoch)


__all__ = ["ControlRecordType", "EndTransactionMarker", "build_marker_batch", "read_marker"]
