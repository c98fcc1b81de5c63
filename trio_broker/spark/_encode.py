"""Arrow columns to Kafka record batches without a Python step per record: the write path of
the sink and ``trio-broker import`` (``_decode`` is its inverse).

Why it is built this way: a Python loop building each record (``protocol.records.build_batch``)
costs microseconds per record, which caps a Spark task far below what Spark hands it. Here every
per-record step is a numpy or Arrow C++ kernel over a whole Arrow batch:

1. Partitions: the ``partition`` column where set; else Java's default partitioner on the key,
   ``toPositive(murmur2(key)) % partitions``, computed for all keys at once over a matrix of
   their bytes (keys longer than ``_MURMUR_MATRIX_BYTES`` go through the scalar murmur2); rows
   with neither stick to one partition until ``batch.size`` bytes went to it (KIP-794).
2. Rows are ordered by partition with a stable sort, so each partition keeps the input's order.
3. Batch boundaries: each partition's rows are cut greedily into batches of up to
   ``batch.size`` bytes (estimated, as Kafka's accumulator does), one Python step per *batch*.
   The last, unfilled batch of a partition waits for the next input (``linger.ms``), unless the
   input ends.
4. Records (layout: ``protocol.records``): the varint fields of all records are written into a
   byte matrix at once (``_pack``), and Arrow's ``binary_join_element_wise`` concatenates
   prefix | key | value length | value | headers per row in C++. The records of a batch are
   then one slice of the joined array's data buffer: a ``RecordBlock`` to seal and send.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..client.core.errors import ConfigError
from ..client.core.partitioner import murmur2
from ..client.core.produce import RecordBlock
from ..protocol.batch import BATCH_HEADER_SIZE

#: keys up to this many bytes are hashed in the vectorised murmur2; longer ones one by one
_MURMUR_MATRIX_BYTES = 64
_M = np.uint32(0x5BD1E995)
_SEED = np.uint32(0x9747B28C)


class SinkRows(NamedTuple):
    """One topic's rows as the encoder takes them: Arrow columns, partitions resolved."""

    key: pa.Array  # binary, null for a null key
    value: pa.Array  # binary, null for a tombstone
    headers: pa.Array | None  # list<struct<key: string, value: binary>>, or None
    partition: np.ndarray  # int32
    timestamp_ms: np.ndarray  # int64

    @property
    def num_rows(self) -> int:
        return len(self.partition)

    def take(self, rows: np.ndarray) -> SinkRows:
        index = pa.array(rows, type=pa.int64())
        return SinkRows(self.key.take(index), self.value.take(index),
                        None if self.headers is None else self.headers.take(index),
                        self.partition[rows], self.timestamp_ms[rows])

    def slice(self, start: int, length: int) -> SinkRows:
        """Rows ``start .. start + length`` without copying them."""
        end = start + length
        return SinkRows(self.key.slice(start, length), self.value.slice(start, length),
                        None if self.headers is None else self.headers.slice(start, length),
                        self.partition[start:end], self.timestamp_ms[start:end])


def concat_rows(parts: Sequence[SinkRows]) -> SinkRows:
    if len(parts) == 1:
        return parts[0]
    headers = None
    if any(p.headers is not None for p in parts):
        headers = pa.concat_arrays([
            p.headers if p.headers is not None else pa.nulls(p.num_rows, HEADERS_TYPE)
            for p in parts])
    return SinkRows(pa.concat_arrays([p.key for p in parts]),
                    pa.concat_arrays([p.value for p in parts]), headers,
                    np.concatenate([p.partition for p in parts]),
                    np.concatenate([p.timestamp_ms for p in parts]))


HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()),
                                   pa.field("value", pa.binary())]))


# --- partitions ------------------------------------------------------------------------------

def _binary_parts(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, data) of a binary array with 32-bit offsets, as numpy views."""
    _, offsets_buf, data_buf = array.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[array.offset:array.offset + len(array)
                                                         + 1]
    data = (np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None
            else np.zeros(0, dtype=np.uint8))
    return offsets.astype(np.int64), data


def murmur2_partitions(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """Java's ``toPositive(murmur2(key)) % num_partitions`` for every (non-null) key."""
    n = len(keys)
    offsets, data = _binary_parts(keys.cast(pa.binary()))
    lengths = np.diff(offsets)
    if n and lengths[0] <= _MURMUR_MATRIX_BYTES and (lengths == lengths[0]).all():
        # keys of one size (the common case) lie back to back: the matrix is a reshape
        size = int(lengths[0])
        start = int(offsets[0])
        return (_murmur2_same_size(data[start:start + n * size].reshape(n, size))
                % num_partitions).astype(np.int32)
    out = np.zeros(n, dtype=np.int64)
    short = lengths <= _MURMUR_MATRIX_BYTES
    rows = np.nonzero(short)[0]
    if len(rows):
        width = int(lengths[rows].max(initial=0))
        width = (width + 3) // 4 * 4 + 4
        starts = offsets[rows]
        lens = lengths[rows]
        cols = np.arange(width)
        index = starts[:, None] + cols[None, :]
        inside = cols[None, :] < lens[:, None]
        matrix = np.where(inside, data[np.minimum(index, max(len(data) - 1, 0))]
                          if len(data) else 0, 0).astype(np.uint8)
        out[rows] = _murmur2_matrix(matrix, lens)
    for row in np.nonzero(~short)[0]:
        start, end = int(offsets[row]), int(offsets[row + 1])
        out[row] = murmur2(bytes(data[start:end])) & 0x7FFFFFFF
    return (out % num_partitions).astype(np.int32)


def _murmur2_same_size(keys: np.ndarray) -> np.ndarray:
    """``toPositive(murmur2(key))`` per row of an ``(n, size)`` byte matrix: every key has the
    same words and tail, so each step is one operation over all keys (no masks)."""
    n, size = keys.shape
    whole = size // 4
    words = np.ascontiguousarray(keys[:, :whole * 4]).view("<u4")
    h = np.full(n, _SEED ^ np.uint32(size), dtype=np.uint32)
    with np.errstate(over="ignore"):
        for j in range(whole):
            k = words[:, j] * _M
            k ^= k >> np.uint32(24)
            k *= _M
            h *= _M
            h ^= k
        tail = size & 3
        if tail:
            for i in reversed(range(tail)):  # bytes 2, 1, 0 of the tail, as Java's switch
                h ^= keys[:, whole * 4 + i].astype(np.uint32) << np.uint32(8 * i)
            h *= _M
        h ^= h >> np.uint32(13)
        h *= _M
        h ^= h >> np.uint32(15)
    return (h & np.uint32(0x7FFFFFFF)).astype(np.int64)


def _murmur2_matrix(matrix: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``toPositive(murmur2(row[:length]))`` per row of a zero-padded byte matrix (uint32
    arithmetic wraps modulo 2**32 exactly as Java's int does)."""
    lengths32 = lengths.astype(np.uint32)
    h = _SEED ^ lengths32
    words = np.ascontiguousarray(matrix).view("<u4")
    whole = lengths // 4
    with np.errstate(over="ignore"):
        for j in range(int(whole.max(initial=0))):
            k = words[:, j] * _M
            k ^= k >> np.uint32(24)
            k *= _M
            h = np.where(j < whole, (h * _M) ^ k, h)
        tail = lengths & 3
        base = whole * 4
        rows = np.arange(len(matrix))
        pick = np.minimum(base[:, None] + np.arange(3)[None, :], matrix.shape[1] - 1)
        b = matrix[rows[:, None], pick].astype(np.uint32)
        h = h ^ np.where(tail == 3, b[:, 2] << np.uint32(16), np.uint32(0))
        h = h ^ np.where(tail >= 2, b[:, 1] << np.uint32(8), np.uint32(0))
        h = h ^ np.where(tail >= 1, b[:, 0], np.uint32(0))
        h = np.where(tail >= 1, h * _M, h)
        h ^= h >> np.uint32(13)
        h *= _M
        h ^= h >> np.uint32(15)
    return (h & np.uint32(0x7FFFFFFF)).astype(np.int64)


class StickyPartitioner:
    """Rows without key or partition go to one partition until ``batch_size`` bytes went
    there, then to another one picked at random (Kafka's built-in partitioner, KIP-794)."""

    def __init__(self, batch_size: int, rng: random.Random | None = None) -> None:
        self.batch_size = max(batch_size, 1)
        self.rng = rng or random.Random()
        self.current: dict[str, tuple[int, int]] = {}  # topic -> (partition, bytes sent)

    def assign(self, topic: str, sizes: np.ndarray, num_partitions: int) -> np.ndarray:
        partition, used = self.current.get(topic) or (self.rng.randrange(num_partitions), 0)
        out = np.empty(len(sizes), dtype=np.int32)
        cumulative = np.cumsum(sizes) + used
        start = 0
        while start < len(sizes):
            # the first row that takes the sticky partition to batch.size moves it on after it
            end = int(np.searchsorted(cumulative, self.batch_size, side="left")) + 1
            end = min(max(end, start + 1), len(sizes))
            out[start:end] = partition
            if cumulative[end - 1] >= self.batch_size:
                cumulative -= cumulative[end - 1]
                if num_partitions > 1:
                    partition = (partition + self.rng.randrange(1, num_partitions)
                                 ) % num_partitions
            start = end
        self.current[topic] = (partition, int(cumulative[-1]) if len(sizes) else used)
        return out


# --- varints -----------------------------------------------------------------------------------

def _zigzag(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.int64)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def _varint_size(zigzag: np.ndarray) -> np.ndarray:
    size = np.ones(len(zigzag), dtype=np.int64)
    top = int(zigzag.max()) if len(zigzag) else 0
    shift = 7
    while shift < 64 and top >= 1 << shift:  # only the thresholds some value reaches
        size += zigzag >= np.uint64(1 << shift)
        shift += 7
    return size


class _Varints(NamedTuple):
    """One varint field of every row: zigzag values and their encoded sizes."""

    zigzag: np.ndarray
    size: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray) -> _Varints:
        zigzag = _zigzag(values)
        return cls(zigzag, _varint_size(zigzag))


def _pack(fields: Sequence[np.ndarray | _Varints], n: int) -> tuple[pa.Array, np.ndarray]:
    """A binary array whose row ``i`` is the varints ``fields[0][i], fields[1][i], ...``; and
    each row's length.

    The bytes are laid out as an ``(n, widest)`` matrix, one column per byte position of each
    field, filled a column at a time; rows whose fields are all as wide as the widest (the
    common case) are the matrix itself, others are compressed by a mask of the bytes used."""
    encoded = [f if isinstance(f, _Varints) else _Varints.of(f) for f in fields]
    tops = [int(f.size.max(initial=1)) for f in encoded]
    matrix = np.empty((n, sum(tops)), dtype=np.uint8)
    lengths = np.zeros(n, dtype=np.int64)
    narrow = []  # (first column, field) of fields not always at their widest
    column = 0
    for field, top in zip(encoded, tops):
        lengths += field.size
        if top == 1:  # every value fits in one byte
            matrix[:, column] = field.zigzag
        else:
            for k in range(top):
                byte = ((field.zigzag >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
                if k + 1 < top:
                    byte |= (field.size > k + 1).astype(np.uint8) << np.uint8(7)
                matrix[:, column + k] = byte
            if (field.size != top).any():
                narrow.append((column, field))
        column += top
    if narrow:
        used = np.ones(matrix.shape, dtype=bool)
        for first, field in narrow:
            for k in range(1, int(field.size.max())):
                used[:, first + k] = field.size > k
        data = matrix[used]
    else:
        data = matrix.reshape(-1)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return (pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                   pa.py_buffer(data)]), lengths)


def _lengths(array: pa.Array) -> np.ndarray:
    """Byte length of each value, -1 for null."""
    lengths = pc.binary_length(array)
    return np.asarray(lengths.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _headers_suffix(headers: pa.Array | None, n: int) -> tuple[pa.Array, np.ndarray]:
    """Each row's header count and headers, as the records layout has them."""
    if headers is None or headers.null_count == n or not pc.sum(
            headers.value_lengths()).as_py():  # no headers: a zero count per row
        return (pa.Array.from_buffers(pa.binary(), n, [
            None, pa.py_buffer(np.arange(n + 1, dtype=np.int32)),
            pa.py_buffer(np.zeros(n, dtype=np.uint8))]), np.ones(n, dtype=np.int64))
    counts = np.asarray(headers.value_lengths().fill_null(0).to_numpy(zero_copy_only=False),
                        dtype=np.int64)
    flat = headers.flatten()
    if flat.null_count:
        raise ValueError("a header in the headers column is null")
    keys, values = flat.flatten()
    if keys.null_count:
        raise ValueError("a header key is null: Kafka headers need a key")
    keys = keys.cast(pa.binary())
    count = len(flat)
    key_prefix, _ = _pack([_lengths(keys)], count)
    value_prefix, _ = _pack([_lengths(values)], count)
    joined = pc.binary_join_element_wise(key_prefix, keys, value_prefix,
                                         values.fill_null(b""), b"")
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    per_row = pc.binary_join(pa.ListArray.from_arrays(pa.array(list_offsets), joined), b"")
    count_prefix, _ = _pack([counts], n)
    suffix = pc.binary_join_element_wise(count_prefix, per_row, b"")
    return suffix, _lengths(suffix)


# --- batches -----------------------------------------------------------------------------------

class BatchEncoder:
    """Cuts one topic's rows into record batches per partition (see the module docstring).

    ``add`` returns the batches that are full; a partition's last, unfilled batch waits for
    more rows until ``linger_ms`` after its first row arrived; ``drain`` returns every waiting
    one.
    """

    def __init__(self, *, batch_size: int, linger_ms: int, max_request_size: int) -> None:
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000
        self.max_request_size = max_request_size
        self._waiting: SinkRows | None = None
        self._since: dict[int, float] = {}  # partition -> when its waiting rows began

    def add(self, rows: SinkRows) -> list[tuple[int, RecordBlock]]:
        parts = [rows] if self._waiting is None else [self._waiting, rows]
        self._waiting = None
        return self._encode(concat_rows(parts), keep_tail=True)

    def drain(self) -> list[tuple[int, RecordBlock]]:
        waiting, self._waiting = self._waiting, None
        self._since.clear()
        return [] if waiting is None else self._encode(waiting, keep_tail=False)

    def _encode(self, rows: SinkRows, *, keep_tail: bool) -> list[tuple[int, RecordBlock]]:
        n = rows.num_rows
        if n == 0:
            return []
        # sizes first, in partition order: the cuts need them, not the records
        partition = rows.partition
        # a radix sort where partition numbers fit in 16 bits (numpy's stable sort for them)
        order = np.argsort(partition.astype(np.int16) if len(partition) and int(
            partition.max()) < 1 << 15 else partition, kind="stable")
        key_len, value_len = _lengths(rows.key)[order], _lengths(rows.value)[order]
        suffix, suffix_len = _headers_suffix(rows.headers, n)
        suffix_len = suffix_len[order]
        ts = rows.timestamp_ms[order]
        # estimated sizes (Kafka's accumulator estimates too): offset deltas of two bytes and
        # timestamp deltas from the first row of each partition
        partition = rows.partition[order]
        run_starts = np.flatnonzero(np.r_[True, partition[1:] != partition[:-1]])
        run_ends = np.r_[run_starts[1:], n]
        first_ts = np.repeat(ts[run_starts], run_ends - run_starts)
        body = (1 + _varint_size(_zigzag(ts - first_ts)) + 2
                + _varint_size(_zigzag(key_len)) + np.maximum(key_len, 0)
                + _varint_size(_zigzag(value_len)) + np.maximum(value_len, 0) + suffix_len)
        estimate = body + _varint_size(_zigzag(body))
        too_big = estimate + BATCH_HEADER_SIZE > self.max_request_size
        if too_big.any():
            size = int(estimate[np.argmax(too_big)]) + BATCH_HEADER_SIZE
            raise ConfigError(f"The message is {size} bytes when serialized which is larger "
                              f"than {self.max_request_size}, which is the value of the "
                              "max.request.size configuration.")
        cumulative = np.cumsum(estimate)
        room = max(self.batch_size - BATCH_HEADER_SIZE, 0)
        starts: list[int] = []
        waiting: list[tuple[int, int]] = []  # (first row, run end) of each waiting batch
        now = time.monotonic()
        for run_start, run_end in zip(run_starts.tolist(), run_ends.tolist()):
            part = int(partition[run_start])
            start = run_start
            while start < run_end:
                before = int(cumulative[start - 1]) if start else 0
                end = int(np.searchsorted(cumulative, before + room, side="right"))
                end = min(max(end, start + 1), run_end)
                # room for another row like its last: wait for more rows, up to linger.ms
                if (end == run_end and keep_tail
                        and int(cumulative[end - 1]) - before + int(estimate[end - 1]) <= room
                        and now - self._since.setdefault(part, now) < self.linger_s):
                    waiting.append((start, run_end))
                    break
                starts.append(start)
                start = end
            else:
                self._since.pop(part, None)
        if waiting:
            # the rows that leave first, then the waiting ones: one take, two zero-copy slices
            # (waiting rows are encoded when their batch leaves, not now and again then)
            stay = np.zeros(n, dtype=bool)
            for first, end in waiting:
                stay[first:end] = True
            leave = np.flatnonzero(~stay)
            rank = np.cumsum(~stay) - 1  # position of each leaving row among those leaving
            starts = rank[np.asarray(starts, dtype=np.int64)].tolist() if starts else []
            order = np.concatenate([order[leave], order[stay]])
            key_len, value_len = key_len[leave], value_len[leave]
            suffix_len = suffix_len[leave]
        if not (order == np.arange(n)).all():
            rows = rows.take(order)
            suffix = suffix.take(pa.array(order, type=pa.int64()))
        out = len(key_len)
        if waiting:
            self._waiting = rows.slice(out, n - out)
        if not starts:
            return []
        return self._records(rows.slice(0, out), np.asarray(starts, dtype=np.int64), key_len,
                             value_len, suffix.slice(0, out), suffix_len)

    def _records(self, rows: SinkRows, starts: np.ndarray, key_len: np.ndarray,
                 value_len: np.ndarray, suffix: pa.Array,
                 suffix_len: np.ndarray) -> list[tuple[int, RecordBlock]]:
        n = rows.num_rows
        ends = np.r_[starts[1:], n]
        counts = ends - starts
        batch_of_row = np.repeat(np.arange(len(starts)), counts)
        offset_delta = np.arange(n, dtype=np.int64) - starts[batch_of_row]
        ts = rows.timestamp_ms
        base_ts = ts[starts]
        ts_delta = ts - base_ts[batch_of_row]
        max_ts = np.maximum.reduceat(ts, starts)
        fields = [_Varints.of(ts_delta), _Varints.of(offset_delta), _Varints.of(key_len),
                  _Varints.of(value_len)]
        body = 1 + np.maximum(key_len, 0) + np.maximum(value_len, 0) + suffix_len
        for field in fields:
            body += field.size
        attributes = _Varints(np.zeros(n, dtype=np.uint64), np.ones(n, dtype=np.int64))
        prefix, _ = _pack([body, attributes, *fields[:3]], n)
        middle, _ = _pack(fields[3:], n)
        records = pc.binary_join_element_wise(prefix, rows.key.fill_null(b""), middle,
                                              rows.value.fill_null(b""), suffix, b"")
        offsets, _ = _binary_parts(records)
        data = memoryview(records.buffers()[2])
        bounds = offsets[np.r_[starts, n]].tolist()
        partitions = rows.partition[starts].tolist()
        out = []
        for i, (count, base, top) in enumerate(zip(counts.tolist(), base_ts.tolist(),
                                                   max_ts.tolist())):
            out.append((partitions[i], RecordBlock(data[bounds[i]:bounds[i + 1]], count, base,
                                                   top)))
        return out


__all__ = ["HEADERS_TYPE", "BatchEncoder", "SinkRows", "StickyPartitioner", "concat_rows",
           "murmur2_partitions"]
