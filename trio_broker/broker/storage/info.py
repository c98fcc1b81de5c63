"""What a partition log hands out (append and fetch results), and partition directory names.

Why apart from ``log.py``: they are the log's answers, not its state: the API layer and the
manager read them without needing (or importing) the log's internals.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .file_region import FileRegion
    from .txn_index import AbortedTxn

_PARTITION_DIR = re.compile(r"(.+)-([0-9]+)")  # fullmatch: ``$`` admits a trailing "\n"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``orders-3`` -> ("orders", 3); None for anything that is not a partition directory."""
    match = _PARTITION_DIR.fullmatch(name)
    if match is None:
        return None
    return match.group(1), int(match.group(2))


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    #: the broker time written into the batch under LogAppendTime, else -1
    log_append_time_ms: int
    log_start_offset: int
    #: bytes written (0 for a duplicate)
    size: int
    #: an idempotent retry of a batch already in the log; the offsets are the original ones
    duplicate: bool = False


class FetchDataInfo(NamedTuple):
    #: whole batches, starting with the one that contains the requested offset (a region of
    #: the segment file when the read asked for one: ``Log.read``'s ``region_min``)
    records: bytes | FileRegion
    #: base offset of the first returned batch (the requested offset when nothing is returned)
    first_offset: int
    high_watermark: int
    log_start_offset: int
    #: where read_committed readers stop: the oldest open transaction's first offset, or the HW
    last_stable_offset: int
    #: read_committed only: aborted transactions overlapping the returned batches
    aborted_transactions: list[AbortedTxn] | None = None
