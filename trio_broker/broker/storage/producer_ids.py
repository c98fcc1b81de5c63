"""Allocation of idempotent-producer ids that stay unique across restarts.

Why blocks: an id handed out twice would let two producers share sequence state, so every id
must be covered by a durable record before it is returned. Persisting once per id would put an
fsync on every InitProducerId; reserving a block of ids with one fsynced write and handing them
out from memory costs one fsync per ``block_size`` producers. A crash merely skips the rest of the
reserved block, it never re-issues an id.

File ``producer-id-block`` (in the first log dir): JSON ``{"version": 1, "next_block_start": N}``,
the first id not yet reserved. Written atomically (temp file, fsync, rename, fsync dir).
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from .errors import KafkaStorageError
from .files import atomic_write

LOGGER = logging.getLogger(__name__)

PRODUCER_ID_FILE = "producer-id-block"
DEFAULT_BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, directory: Path | str, *, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError("block_size must be positive")
        self.path = Path(directory) / PRODUCER_ID_FILE
        self.block_size = block_size
        self._lock = threading.Lock()
        self._next_id = 0
        self._block_end = 0  # nothing reserved yet: the first allocate() reserves a block
        self._next_block_start = self._read()

    def _read(self) -> int:
        try:
            doc = json.loads(self.path.read_text())
            value = int(doc["next_block_start"])
        except FileNotFoundError:
            return 0
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # Starting again from 0 could re-issue ids that producers still use: refuse.
            raise KafkaStorageError(
                f"{self.path} is unreadable ({exc}); refusing to allocate producer ids"
            ) from exc
        if value < 0:
            raise KafkaStorageError(f"{self.path} holds a negative next_block_start {value}")
        return value

    def allocate(self) -> int:
        """A producer id never returned before, by this or any earlier run."""
        with self._lock:
            if self._next_id >= self._block_end:
                start = self._next_block_start
                end = start + self.block_size
                doc = {"version": 1, "next_block_start": end}
                try:
                    atomic_write(self.path, json.dumps(doc).encode())
                except OSError as exc:
                    raise KafkaStorageError(f"reserving producer ids failed: {exc}") from exc
                self._next_id, self._block_end, self._next_block_start = start, end, end
                LOGGER.debug("Reserved producer ids %d..%d", start, end - 1)
            producer_id = self._next_id
            self._next_id += 1
            return producer_id
