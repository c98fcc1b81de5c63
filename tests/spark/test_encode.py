"""The columnar encoder: batches that decode to exactly the rows given, Java's partitioner for
keys, batch.size and linger.ms as Kafka's accumulator applies them (no Spark needed)."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from trio_broker.client.blocking import partition_for_key, seal_batch
from trio_broker.client.core.errors import ConfigError
from trio_broker.protocol.compression import Compression
from trio_broker.protocol.records import decode_records
from trio_broker.spark._encode import (
    HEADERS_TYPE,
    BatchEncoder,
    SinkRows,
    StickyPartitioner,
    murmur2_partitions,
)


def _rows(seed: int, n: int, partitions: int) -> tuple[SinkRows, list[tuple]]:
    rng = random.Random(seed)
    keys, values, headers, parts, stamps = [], [], [], [], []
    for i in range(n):
        keys.append(None if i % 7 == 3 else rng.randbytes(rng.choice((0, 3, 9, 200))))
        values.append(None if i % 11 == 5 else rng.randbytes(rng.choice((0, 1, 60, 100, 9000))))
        headers.append(None if i % 5 == 1 else [
            {"key": f"h{j}é", "value": None if j == 2 else rng.randbytes(j * 40)}
            for j in range(i % 4)])
        parts.append(rng.randrange(partitions))
        stamps.append(1_700_000_000_000 + rng.randrange(-10**6, 10**9))
    rows = SinkRows(pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
                    pa.array(headers, HEADERS_TYPE), np.array(parts, dtype=np.int32),
                    np.array(stamps, dtype=np.int64))
    expected = [(p, ts, k, v, tuple((h["key"], h["value"]) for h in hs or ()))
                for k, v, hs, p, ts in zip(keys, values, headers, parts, stamps)]
    return rows, expected


def _decoded(batches: list, codec: Compression = Compression.NONE) -> list[tuple]:
    out = []
    for partition, block in batches:
        records = decode_records(seal_batch(block, compression=codec))
        assert len(records) == block.num_records
        assert records[0].timestamp == block.base_timestamp
        assert max(r.timestamp for r in records) == block.max_timestamp
        out += [(partition, r.timestamp, r.key, r.value, r.headers) for r in records]
    return out


@pytest.mark.parametrize("codec", list(Compression))
def test_batches_decode_to_the_rows_in_partition_order(codec: Compression) -> None:
    rows, expected = _rows(seed=int(codec), n=3000, partitions=4)
    encoder = BatchEncoder(batch_size=16384, linger_ms=0, max_request_size=1 << 20)
    batches = encoder.add(rows) + encoder.drain()
    by_partition = sorted(expected, key=lambda r: r[0])  # stable: input order per partition
    assert _decoded(batches, codec) == by_partition
    sizes = [block.size for _, block in batches]
    assert max(sizes) <= 16384 + 9000 + 200  # one record may overflow a nearly full batch


def test_unfilled_batches_wait_for_more_rows_until_linger() -> None:
    rows, expected = _rows(seed=5, n=400, partitions=3)
    encoder = BatchEncoder(batch_size=1 << 20, linger_ms=60_000, max_request_size=1 << 21)
    first = encoder.add(rows.take(np.arange(200)))
    assert first == []  # nothing fills a batch of 1 MiB: every partition waits
    second = encoder.add(rows.take(np.arange(200, 400)))
    assert second == []
    drained = encoder.drain()
    assert len(drained) == 3  # one batch per partition, with the rows of both inputs
    assert _decoded(drained) == sorted(expected, key=lambda r: r[0])
    impatient = BatchEncoder(batch_size=1 << 20, linger_ms=0, max_request_size=1 << 21)
    assert len(impatient.add(rows)) == 3


def test_full_batches_leave_while_each_partitions_tail_waits_for_the_next_input() -> None:
    rows, expected = _rows(seed=9, n=2400, partitions=5)
    encoder = BatchEncoder(batch_size=30_000, linger_ms=60_000, max_request_size=1 << 21)
    batches = []
    for first in range(0, 2400, 300):  # eight inputs, as a task's Arrow batches arrive
        batches += encoder.add(rows.take(np.arange(first, first + 300)))
    left = encoder.drain()
    assert 0 < len(left) <= 5  # at most one waiting batch per partition
    assert len(batches) > 10  # filled batches left before the input ended
    # filled batches hold at least most of batch.size (a record may not have fitted)
    assert all(block.size > 30_000 - 9300 for _, block in batches)
    decoded = _decoded(batches + left)
    assert sorted(decoded, key=lambda r: r[0]) == sorted(expected, key=lambda r: r[0])
    for partition in range(5):  # each partition's records in input order, across inputs
        assert [r for r in decoded if r[0] == partition] == [
            r for r in expected if r[0] == partition]


def test_a_record_larger_than_max_request_size_is_refused() -> None:
    rows, _ = _rows(seed=1, n=50, partitions=1)
    encoder = BatchEncoder(batch_size=16384, linger_ms=0, max_request_size=5000)
    with pytest.raises(ConfigError, match=r"larger than 5000, which is the value of the "
                                          r"max\.request\.size configuration"):
        encoder.add(rows)


def test_murmur2_partitions_match_javas_partitioner() -> None:
    rng = random.Random(3)
    keys = [rng.randbytes(rng.randrange(0, 90)) for _ in range(5000)] + [b"", b"a", b"ab",
                                                                         b"abc", b"abcd"]
    for partitions in (1, 3, 7, 100):
        got = murmur2_partitions(pa.array(keys, pa.binary()), partitions)
        assert got.tolist() == [partition_for_key(k, partitions) for k in keys]
    strings = pa.array(["héllo", "kafka", "x" * 70])
    assert murmur2_partitions(strings, 6).tolist() == [
        partition_for_key(s.encode(), 6) for s in strings.to_pylist()]
    sliced = pa.array(keys, pa.binary()).slice(17, 100)
    assert murmur2_partitions(sliced, 5).tolist() == [partition_for_key(k, 5)
                                                       for k in keys[17:117]]
    for size in (0, 1, 2, 3, 4, 6, 7, 8, 13, 64):  # keys of one size: the reshape path
        same = [rng.randbytes(size) for _ in range(300)]
        array = pa.array(same, pa.binary())
        assert murmur2_partitions(array, 7).tolist() == [partition_for_key(k, 7) for k in same]
        assert murmur2_partitions(array.slice(11, 200), 7).tolist() == [
            partition_for_key(k, 7) for k in same[11:211]]


def test_sticky_partitions_move_on_after_a_batch() -> None:
    sticky = StickyPartitioner(batch_size=1000, rng=random.Random(1))
    first = sticky.assign("t", np.full(25, 100), 4)
    assert len(set(first[:10].tolist())) == 1  # 10 x 100 bytes: one batch's worth
    assert first[10] != first[9]
    second = sticky.assign("t", np.full(5, 100), 4)
    assert second[0] == first[-1]  # the sticky partition carries over to the next input
