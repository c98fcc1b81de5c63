"""Kafka's offset checkpoint file: (topic, partition) -> offset, replaced atomically.

Why this format: it is Kafka's ``recovery-point-offset-checkpoint`` layout, plain text an
operator can read: a version line ``0``, the entry count, then ``<topic> <partition> <offset>``
per line. The file is replaced as a whole (temp file, fsync, rename, fsync dir), so a crash
leaves the old checkpoint or the new one; a missing file means "nothing checkpointed yet".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .files import atomic_write

TopicPartition = tuple[str, int]


class OffsetCheckpointFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[TopicPartition, int]:
        """The checkpointed offsets; raises ValueError for a malformed file."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        lines = text.split("\n")
        if len(lines) < 2 or lines[0].strip() != "0":
            raise ValueError(f"{self.path}: unknown checkpoint version")
        count = int(lines[1])
        points: dict[TopicPartition, int] = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split()
            points[(topic, int(partition))] = int(offset)
        if len(points) != count:
            raise ValueError(f"{self.path}: expected {count} entries, found {len(points)}")
        return points

    def write(self, points: Mapping[TopicPartition, int]) -> None:
        lines = ["0", str(len(points))]
        lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in points.items()]
        atomic_write(self.path, ("\n".join(lines) + "\n").encode())
