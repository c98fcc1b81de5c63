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

from ..client_core.errors import ConfigError
from ..client_core.partitioner import murmur2
from ..client_core.produce import RecordBlock
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
        matrix = np.zeros((n, (size + 3) // 4 * 4 + 4), dtype=np.uint8)
        start = int(offsets[0])
        matrix[:, :size] = data[start:start + n * size].reshape(n, size)
        return (_murmur2_matrix(matrix, lengths) % num_partitions).astype(np.int32)
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


def _pack(fields: Sequence[np.ndarray], n: int) -> tuple[pa.Array, np.ndarray]:
    """A binary array whose row ``i`` is the varints ``fields[0][i], fields[1][i], ...``; and
    each row's length. Every byte is written straight to its place in the data buffer."""
    encoded = [_zigzag(f) for f in fields]
    sizes = [_varint_size(z) for z in encoded]
    lengths = sizes[0].copy()
    for size in sizes[1:]:
        lengths += size
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    position = offsets[:-1].copy()
    for zigzag, size in zip(encoded, sizes):
        top = int(size.max(initial=1))
        if top == 1:  # the common case: every value fits in one byte
            data[position] = zigzag.astype(np.uint8)
        else:
            for k in range(top):
                byte = ((zigzag >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
                byte |= np.where(size > k + 1, np.uint8(0x80), np.uint8(0))
                active = size > k
                if active.all():
                    data[position + k] = byte
                else:
                    data[position[active] + k] = byte[active]
        position += size
    return (pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(
        offsets.astype(np.int32)), pa.py_buffer(data)]), lengths)


def _lengths(array: pa.Array) -> np.ndarray:
    """Byte length of each value, -1 for null."""
    lengths = pc.binary_length(array)
    return np.asarray(lengths.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _headers_suffix(headers: pa.Array | None, n: int) -> tuple[pa.Array, np.ndarray]:
    """Each row's header count and headers, as the records layout has them."""
    if headers is None or headers.null_count == n or not pc.sum(
            headers.value_lengths()).as_py():
        return _pack([np.zeros(n, dtype=np.int64)], n)
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
        order = np.argsort(rows.partition, kind="stable")
        if not (order == np.arange(n)).all():
            rows = rows.take(order)
        key_len, value_len = _lengths(rows.key), _lengths(rows.value)
        suffix, suffix_len = _headers_suffix(rows.headers, n)
        ts = rows.timestamp_ms
        # estimated sizes (Kafka's accumulator estimates too): offset deltas of two bytes and
        # timestamp deltas from the first row of each partition
        partition = rows.partition
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
        waiting: list[tuple[int, int]] = []  # (index into starts, run end) of waiting batches
        now = time.monotonic()
        for run_start, run_end in zip(run_starts.tolist(), run_ends.tolist()):
            part = int(partition[run_start])
            start = run_start
            while start < run_end:
                before = int(cumulative[start - 1]) if start else 0
                end = int(np.searchsorted(cumulative, before + room, side="right"))
                end = min(max(end, start + 1), run_end)
                starts.append(start)
                # room for another row like its last: wait for more rows, up to linger.ms
                if (end == run_end and keep_tail
                        and int(cumulative[end - 1]) - before + int(estimate[end - 1]) <= room
                        and now - self._since.setdefault(part, now) < self.linger_s):
                    waiting.append((len(starts) - 1, run_end))
                    break
                start = end
            else:
                self._since.pop(part, None)
        batches = self._records(rows, np.asarray(starts, dtype=np.int64), key_len, value_len,
                                suffix, suffix_len)
        if not waiting:
            return batches
        self._waiting = rows.take(np.concatenate([np.arange(starts[i], end)
                                                  for i, end in waiting]))
        skip = {i for i, _ in waiting}
        return [b for i, b in enumerate(batches) if i not in skip]

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
        body = (1 + _varint_size(_zigzag(ts_delta)) + _varint_size(_zigzag(offset_delta))
                + _varint_size(_zigzag(key_len)) + np.maximum(key_len, 0)
                + _varint_size(_zigzag(value_len)) + np.maximum(value_len, 0) + suffix_len)
        prefix, _ = _pack([body, np.zeros(n, dtype=np.int64), ts_delta, offset_delta, key_len],
                          n)
        middle, _ = _pack([value_len], n)
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
