"""Offset deletions reach ``__consumer_offsets`` as Kafka's tombstones: OffsetDelete and offset
expiry, through the handlers on a mock clock (the real-client view is in
``test_internal_topics.py``)."""

from __future__ import annotations

from typing import Any

import trio

from tests.coordinator.coordinator_records import decode_offset_value, decode_offsets_key
from tests.coordinator.test_group_versions import _offset_delete
from trio_broker.broker.coordinator.internal_topics import OFFSETS_TOPIC, partition_for_key
from trio_broker.broker.storage import LogManager
from trio_broker.protocol.errors import ErrorCode as E
from trio_broker.protocol.records import decode_batches


def _records(logs: LogManager, group: str) -> list[tuple[tuple[Any, ...], int | None]]:
    """(key fields, committed offset or None for a tombstone) of ``group``'s offset records."""
    log = logs.get_log(OFFSETS_TOPIC, partition_for_key(group, 50))
    assert log is not None
    data = log.read(0, 1 << 20).records
    assert isinstance(data, bytes)
    out = []
    for _, batch in decode_batches(data):
        for record in batch:
            assert record.key is not None
            kind, fields = decode_offsets_key(record.key)
            if kind == "offset" and fields[0] == group:
                out.append((fields, None if record.value is None
                            else decode_offset_value(record.value)["offset"]))
    return out


async def test_offset_delete_and_expiry_write_tombstones(start_coordinator, mock_clock):
    now = [1_000_000_000_000]
    running = await start_coordinator(offsets_retention_minutes=1,
                                      coordinator_kwargs={"wall_clock_ms": lambda: now[0]})
    logs = running.state.logs
    client = running.client()
    await client.commit("g", {("t", 0): 3, ("t", 1): 4})
    assert await _offset_delete(client, "g", {"t": [1]}) == (E.NONE, {("t", 1): E.NONE})
    now[0] += 61_000
    assert running.coordinator.expire_offsets() == 1
    expected = [
        (("g", "t", 0), 3), (("g", "t", 1), 4), (("g", "t", 1), None), (("g", "t", 0), None)]
    for _ in range(100):  # the writer's turns (the mock clock does not move by itself here)
        if _records(logs, "g") == expected:
            break
        await trio.lowlevel.checkpoint()
    assert _records(logs, "g") == expected
