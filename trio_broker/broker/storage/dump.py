"""Human-readable dumps of segment and index files, in the style of ``kafka-dump-log``.

Why: when a partition misbehaves, the first question is what is actually on disk. The output
follows Kafka's tool closely so that people who know it can read it, and it never stops at bad
data: a corrupt batch is reported with its position and the dump says where valid data ends.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

from ...protocol.batch import BATCH_HEADER_SIZE, read_batch_header, verify_crc
from ...protocol.errors import CorruptRecordError, UnsupportedCompressionError
from ...protocol.records import decode_records

_CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def dump_segment(path: Path | str, *, print_records: bool = False) -> Iterator[str]:
    """Yield lines describing a ``.log``, ``.index`` or ``.timeindex`` file."""
    path = Path(path)
    yield f"Dumping {path}"
    if path.suffix == ".index":
        yield from _dump_index(path, struct.Struct(">ii"), "offset: {0} position: {1}")
    elif path.suffix == ".timeindex":
        yield from _dump_index(path, struct.Struct(">qi"), "timestamp: {0} offset: {1}")
    else:
        yield from _dump_log(path, print_records)


def _base_offset(path: Path) -> int:
    return int(path.stem) if path.stem.isdigit() else 0


def _dump_index(path: Path, entry: struct.Struct, template: str) -> Iterator[str]:
    base = _base_offset(path)
    data = path.read_bytes()
    usable = len(data) - len(data) % entry.size
    for first, second in entry.iter_unpack(data[:usable]):
        if entry.format == ">ii":
            yield template.format(base + first, second)
        else:
            yield template.format(first, base + second)
    if usable != len(data):
        yield f"Found {len(data) - usable} trailing bytes that do not form an index entry"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _text(value: bytes | None) -> str:
    return "null" if value is None else value.decode("utf-8", errors="replace")


def _dump_log(path: Path, print_records: bool) -> Iterator[str]:
    yield f"Log starting offset: {_base_offset(path)}"
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        position = 0
        while position < size:
            head = os.pread(fd, BATCH_HEADER_SIZE, position)
            try:
                header = read_batch_header(head)
            except CorruptRecordError as exc:
                yield f"Found {size - position} invalid bytes at position {position}: {exc}"
                return
            if position + header.size > size:
                yield (
                    f"Found {size - position} invalid bytes at position {position}: batch of "
                    f"{header.size} bytes is truncated"
                )
                return
            batch = os.pread(fd, header.size, position)
            try:
                verify_crc(batch, 0, header)
                valid = True
            except CorruptRecordError:
                valid = False
            codec = header.attributes & 0x07
            time_label = "LogAppendTime" if header.timestamp_type else "CreateTime"
            yield (
                f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
                f"count: {header.records_count} baseSequence: {header.base_sequence} "
                f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
                f"producerEpoch: {header.producer_epoch} "
                f"partitionLeaderEpoch: {header.partition_leader_epoch} "
                f"isTransactional: {_bool(header.is_transactional)} "
                f"isControl: {_bool(header.is_control)} position: {position} "
                f"{time_label}: {header.max_timestamp} size: {header.size} "
                f"magic: {header.magic} "
                f"compresscodec: {_CODEC_NAMES.get(codec, f'unknown({codec})')} "
                f"crc: {header.crc} isvalid: {_bool(valid)}"
            )
            if print_records:
                yield from _dump_records(batch, header.base_sequence, time_label)
            position += header.size
    finally:
        os.close(fd)


def _dump_records(batch: bytes, base_sequence: int, time_label: str) -> Iterator[str]:
    try:
        records = decode_records(batch, check_crc=False)
    except (CorruptRecordError, UnsupportedCompressionError) as exc:
        yield f"| records cannot be decoded: {exc}"
        return
    first_offset = records[0].offset if records else 0
    for record in records:
        sequence = -1 if base_sequence < 0 else base_sequence + (record.offset - first_offset)
        header_keys = ",".join(key for key, _ in record.headers)
        headers = ",".join(f"{key}:{_text(value)}" for key, value in record.headers)
        yield (
            f"| offset: {record.offset} {time_label}: {record.timestamp} "
            f"keySize: {-1 if record.key is None else len(record.key)} "
            f"valueSize: {-1 if record.value is None else len(record.value)} "
            f"sequence: {sequence} headerKeys: [{header_keys}] "
            f"key: {_text(record.key)} payload: {_text(record.value)} headers: [{headers}]"
        )
