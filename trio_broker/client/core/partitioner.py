"""The default partitioner: murmur2 of the key, sticky partitions for records without one.

Why murmur2 exactly as Java computes it: a keyed record must land in the same partition whichever
client wrote it, or per-key ordering breaks when producers are mixed. The Java client and
librdkafka's ``murmur2_random`` both use ``toPositive(murmur2(key)) % num_partitions`` with
Kafka's seed ``0x9747b28c``; ``toPositive`` masks the sign bit (it is not ``abs``).

Why sticky for null keys (KIP-480): spreading keyless records round-robin makes many small
batches; sticking to one partition until its batch is sent makes few full ones.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from .rng import CLIENT_RANDOM

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``org.apache.kafka.common.utils.Utils.murmur2``) as a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length >> 2
    if whole:
        for k in struct.unpack_from(f"<{whole}I", data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        base = length & ~3
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java client and librdkafka (murmur2_random) choose for ``key``."""
    return to_positive(murmur2(key)) % num_partitions


def any_partition(available: Sequence[int], partitions: Iterable[int]) -> int:
    """A keyless record's partition: any one with a leader, else any one of the topic's."""
    return CLIENT_RANDOM.choice(available or sorted(partitions))


class StickyPartitioner:
    """Keyless records stick to one partition per topic until that partition's batch is sent."""

    __slots__ = ("sticky",)

    def __init__(self) -> None:
        #: topic -> its sticky partition (read directly on the producer's per-record path)
        self.sticky: dict[str, int] = {}

    def partition(self, topic: str, available: list[int], num_partitions: int) -> int:
        part = self.sticky.get(topic)
        if part is None:
            part = self.next_partition(topic, available, num_partitions, None)
        return part

    def next_partition(self, topic: str, available: list[int], num_partitions: int,
                       previous: int | None) -> int:
        """Pick a new sticky partition, different from ``previous`` when there is a choice."""
        choices = available or list(range(num_partitions))
        if len(choices) > 1 and previous is not None:
            choices = [p for p in choices if p != previous]
        part = CLIENT_RANDOM.choice(choices)
        self.sticky[topic] = part
        return part
