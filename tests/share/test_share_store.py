"""The share-partition files (``coordinator.share.store``): a snapshot loads back with acquired
records available again, and group ids with dots and prefixes of each other stay apart."""

from __future__ import annotations

import uuid
from pathlib import Path

from trio_broker.broker.coordinator.share import RecordState, SharePartition
from trio_broker.broker.coordinator.share.partition import InFlight
from trio_broker.broker.coordinator.share.store import ShareStateStore, snapshot


def test_snapshots_load_back_and_groups_stay_apart(tmp_path: Path) -> None:
    store = ShareStateStore(tmp_path / "state")
    topic = uuid.uuid4()
    sp = SharePartition(10, 14, 5, 100)
    sp.in_flight.update({10: InFlight(RecordState.ACQUIRED, 2, "m", 99.0),
                         11: InFlight(RecordState.ACKNOWLEDGED, 1),
                         12: InFlight(RecordState.AVAILABLE, 3),
                         13: InFlight(RecordState.ARCHIVED, 5)})
    for group in ("a", "a.b", "a.b/c"):
        store.save(group, topic, 0, snapshot(sp))
    assert store.group_ids() == {"a", "a.b", "a.b/c"}
    loaded = store.load("a.b", topic, 0, delivery_count_limit=5, max_record_locks=100)
    assert loaded is not None
    assert (loaded.start_offset, loaded.end_offset) == (10, 14)
    assert {o: (r.state, r.delivery_count) for o, r in loaded.in_flight.items()} == {
        10: (RecordState.AVAILABLE, 2), 11: (RecordState.ACKNOWLEDGED, 1),
        12: (RecordState.AVAILABLE, 3), 13: (RecordState.ARCHIVED, 5)}
    store.delete_group("a")
    assert store.group_ids() == {"a.b", "a.b/c"}
    assert store.load("a", topic, 0, delivery_count_limit=5, max_record_locks=100) is None


def test_a_groups_stored_partitions_and_their_deletion(tmp_path: Path) -> None:
    """What DescribeShareGroupOffsets (every initialized share-partition) and
    DeleteShareGroupOffsets read and remove; the delivery-complete count the lag leaves out."""
    store = ShareStateStore(tmp_path / "state")
    t1, t2 = uuid.uuid4(), uuid.uuid4()
    sp = SharePartition(3, 6, 5, 100)
    sp.in_flight.update({3: InFlight(RecordState.AVAILABLE, 1),
                         4: InFlight(RecordState.ACKNOWLEDGED, 1),
                         5: InFlight(RecordState.ARCHIVED, 5)})
    assert sp.delivery_complete_count() == 2
    for group, topic, partition in (("g.x", t1, 0), ("g.x", t1, 2), ("g.x", t2, 0), ("g", t1, 0)):
        store.save(group, topic, partition, snapshot(sp))
    assert store.partitions("g.x") == {(t1, 0), (t1, 2), (t2, 0)}
    assert store.partitions("g") == {(t1, 0)}
    store.delete("g.x", t1, 2)
    assert store.partitions("g.x") == {(t1, 0), (t2, 0)}
    assert store.partitions("g") == {(t1, 0)}
