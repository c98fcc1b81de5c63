"""Share-partition state on disk (the role of Kafka's ``__share_group_state``): one small file
per (group, topic id, partition), replaced atomically.

Why a snapshot per share-partition: what must survive a crash is bounded by the in-flight cap
(start offset, end offset, the state and delivery count of at most
``group.share.partition.max.record.locks`` offsets), so rewriting it whole after each
acknowledgement, before the acknowledgement is answered, is cheap and leaves nothing to replay.
Acquired records are stored as available: after a restart their locks are gone and they are
delivered again. Offsets beyond the stored end offset were never acknowledged and are acquired
again as new. So an accepted record is never delivered again, an unacknowledged one is, and
nothing is lost.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from urllib.parse import quote, unquote

from ...storage.files import atomic_write
from .partition import InFlight, RecordState, SharePartition

__all__ = ["SHARE_STATE_DIR_NAME", "ShareStateStore"]

SHARE_STATE_DIR_NAME = "__share_group_state"


class ShareStateStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, group_id: str, topic_id: uuid.UUID, partition: int) -> Path:
        return self.directory / f"{quote(group_id, safe='')}.{topic_id.hex}.{partition}.json"

    def load(self, group_id: str, topic_id: uuid.UUID, partition: int, *,
             delivery_count_limit: int, max_record_locks: int) -> SharePartition | None:
        try:
            data = json.loads(self.path(group_id, topic_id, partition).read_bytes())
        except FileNotFoundError:
            return None
        sp = SharePartition(data["start"], data["end"], delivery_count_limit, max_record_locks)
        for offset, state, count in data["states"]:
            sp.in_flight[offset] = InFlight(RecordState(state), count)
        return sp

    def save(self, group_id: str, topic_id: uuid.UUID, partition: int,
             data: bytes) -> None:
        """Write a snapshot made by ``snapshot`` (in a worker thread: it fsyncs)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path(group_id, topic_id, partition), data)

    def _files(self) -> list[tuple[str, Path]]:
        """(group id, path) of every stored share-partition; a group id may hold dots, so the
        name is cut from the right (``<group>.<topic id>.<partition>.json``)."""
        if not self.directory.is_dir():
            return []
        return [(unquote(p.name[:-len(".json")].rsplit(".", 2)[0]), p)
                for p in self.directory.glob("*.json")]

    def group_ids(self) -> set[str]:
        """The groups with stored state: they exist after a restart (without members)."""
        return {group_id for group_id, _ in self._files()}

    def delete_group(self, group_id: str) -> None:
        for found, path in self._files():
            if found == group_id:
                path.unlink(missing_ok=True)

    def partitions(self, group_id: str) -> set[tuple[uuid.UUID, int]]:
        """(topic id, partition) of every share-partition stored for the group."""
        out = set()
        for found, path in self._files():
            if found == group_id:
                topic_hex, partition = path.name[:-len(".json")].rsplit(".", 2)[1:]
                out.add((uuid.UUID(hex=topic_hex), int(partition)))
        return out

    def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        self.path(group_id, topic_id, partition).unlink(missing_ok=True)


def snapshot(sp: SharePartition) -> bytes:
    """The share-partition as stored: acquired records as available (their locks do not
    survive a restart)."""
    states = [[offset, int(RecordState.AVAILABLE if r.state is RecordState.ACQUIRED
                           else r.state), r.delivery_count]
              for offset, r in sorted(sp.in_flight.items())]
    return json.dumps({"start": sp.start_offset, "end": sp.end_offset,
                       "states": states}).encode()
