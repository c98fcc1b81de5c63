"""ListOffsets and OffsetForLeaderEpoch at every version, by raw requests."""

from __future__ import annotations

import os

import pytest

from tests.data_path.raw import TS, epoch_body, list_offsets_body, the_partition
from tests.wire import RawClient
from trio_broker.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey
from trio_broker.protocol.batch import validate_batch
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.records import build_batch

LIST_VERSIONS = range(SUPPORTED_VERSIONS[ApiKey.ListOffsets].min,
                      SUPPORTED_VERSIONS[ApiKey.ListOffsets].max + 1)
EPOCH_VERSIONS = range(SUPPORTED_VERSIONS[ApiKey.OffsetForLeaderEpoch].min,
                       SUPPORTED_VERSIONS[ApiKey.OffsetForLeaderEpoch].max + 1)
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
EARLIEST_PENDING_UPLOAD = -6


def _append(log, timestamps: list[int]) -> None:
    raw = build_batch([(None, b"v")] * len(timestamps), timestamps=timestamps)
    log.append(raw, validate_batch(raw, max_message_bytes=1 << 20), now_ms=TS)


def _fill(broker, topic: str):
    """Offsets 0-2 under epoch 0 (the largest timestamp at offset 1), 3-4 under epoch 5."""
    broker.state.logs.create_topic(topic, 1, {})
    log = broker.state.logs.get_log(topic, 0)
    _append(log, [TS, TS + 50, TS + 7])
    log.become_leader(5)
    _append(log, [TS + 20, TS + 30])
    return log


async def _ask(broker, key: ApiKey, version: int, body):
    client = await RawClient.connect(broker.host, broker.port)
    try:
        return the_partition(await client.request(key, version, body=body))
    finally:
        await client.aclose()


async def _list(broker, version: int, topic: str, timestamp: int, **kwargs):
    return await _ask(broker, ApiKey.ListOffsets, version,
                      list_offsets_body(version, topic, timestamp, **kwargs))


@pytest.mark.parametrize("version", LIST_VERSIONS)
async def test_every_version_answers_what_it_may_ask(trio_broker, version):
    topic = f"l{version}"
    _fill(trio_broker, topic)
    if version == 0:  # old-style: offsets, newest first, with file times deciding
        latest = await _list(trio_broker, 0, topic, LATEST, max_num_offsets=10)
        assert (latest.error_code, latest.old_style_offsets) == (0, [5, 0])
        earliest = await _list(trio_broker, 0, topic, EARLIEST, max_num_offsets=10)
        assert earliest.old_style_offsets == [0]
        assert (await _list(trio_broker, 0, topic, MAX_TIMESTAMP)).error_code == \
            ErrorCode.UNSUPPORTED_VERSION
        return
    epoch = (lambda e: e) if version >= 4 else (lambda e: -1)  # v4+ returns leader epochs
    latest = await _list(trio_broker, version, topic, LATEST)
    assert (latest.error_code, latest.offset, latest.timestamp) == (0, 5, -1)
    assert latest.leader_epoch == epoch(5)
    earliest = await _list(trio_broker, version, topic, EARLIEST)
    assert (earliest.offset, earliest.leader_epoch) == (0, epoch(0))
    by_time = await _list(trio_broker, version, topic, TS + 21)
    assert (by_time.offset, by_time.timestamp, by_time.leader_epoch) == (1, TS + 50, epoch(0))
    none = await _list(trio_broker, version, topic, TS + 999)
    assert (none.error_code, none.offset, none.timestamp) == (0, -1, -1)
    for special, first in ((MAX_TIMESTAMP, 7), (EARLIEST_LOCAL, 8), (LATEST_TIERED, 9),
                           (EARLIEST_PENDING_UPLOAD, 11)):
        found = await _list(trio_broker, version, topic, special)
        if version < first:
            assert found.error_code == ErrorCode.UNSUPPORTED_VERSION
            continue
        assert found.error_code == 0
        if special == MAX_TIMESTAMP:  # KIP-734: the record with the largest timestamp
            assert (found.offset, found.timestamp, found.leader_epoch) == (1, TS + 50, 0)
        elif special == EARLIEST_LOCAL:  # no tiered storage: the local log is the log
            assert (found.offset, found.leader_epoch) == (0, 0)
        else:  # nothing is tiered, so nothing is pending upload either (KIP-1023)
            assert (found.offset, found.leader_epoch) == (-1, -1)
    assert (await _list(trio_broker, version, topic, -7)).error_code == \
        ErrorCode.UNSUPPORTED_VERSION


async def test_isolation_levels_duplicates_and_missing_partitions(trio_broker):
    _fill(trio_broker, "iso")
    committed = await _list(trio_broker, 2, "iso", LATEST, isolation_level=1)
    assert committed.offset == trio_broker.state.logs.get_log("iso", 0).last_stable_offset == 5
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    body = list_offsets_body(5, "iso", LATEST, repeat=2)
    [topic] = (await client.request(ApiKey.ListOffsets, 5, body=body)).topics
    assert [p.error_code for p in topic.partitions] == [ErrorCode.INVALID_REQUEST] * 2
    missing = await _list(trio_broker, 5, "iso", LATEST, partition=9)
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    await client.aclose()


async def test_v4_current_leader_epoch(trio_broker):
    _fill(trio_broker, "fence")
    assert (await _list(trio_broker, 4, "fence", LATEST, current_leader_epoch=5)).error_code == 0
    assert (await _list(trio_broker, 4, "fence", LATEST, current_leader_epoch=4)).error_code == \
        ErrorCode.FENCED_LEADER_EPOCH
    assert (await _list(trio_broker, 10, "fence", LATEST, current_leader_epoch=6)).error_code \
        == ErrorCode.UNKNOWN_LEADER_EPOCH


async def test_v0_offsets_follow_segment_file_times(trio_broker):
    log = _fill(trio_broker, "times")
    segment = log.directory / "00000000000000000000.log"
    os.utime(segment, (1_000_000, 1_000_000))
    before = await _list(trio_broker, 0, "times", 999_999_999, max_num_offsets=5)
    assert before.old_style_offsets == []
    after = await _list(trio_broker, 0, "times", 1_000_000_000, max_num_offsets=5)
    assert after.old_style_offsets == [0]


@pytest.mark.parametrize("version", EPOCH_VERSIONS)
async def test_offset_for_leader_epoch_every_version(trio_broker, version):
    topic = f"e{version}"
    _fill(trio_broker, topic)

    async def ask(leader_epoch: int, current: int = -1):
        return await _ask(trio_broker, ApiKey.OffsetForLeaderEpoch, version,
                          epoch_body(version, topic, leader_epoch, current_leader_epoch=current))

    shown = (lambda e: e) if version >= 1 else (lambda e: -1)  # v1+ returns the epoch
    ended = await ask(0)
    assert (ended.error_code, ended.end_offset, ended.leader_epoch) == (0, 3, shown(0))
    between = await ask(3)  # unknown: the largest epoch below it, and where it ended
    assert (between.end_offset, between.leader_epoch) == (3, shown(0))
    current = await ask(5)
    assert (current.end_offset, current.leader_epoch) == (5, shown(5))
    future = await ask(6)
    assert (future.error_code, future.end_offset, future.leader_epoch) == (0, -1, -1)
    if version >= 2:  # current_leader_epoch arrived in v2
        assert (await ask(0, current=4)).error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert (await ask(0, current=6)).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert (await ask(0, current=5)).error_code == 0
    missing = await _ask(trio_broker, ApiKey.OffsetForLeaderEpoch, version,
                         epoch_body(version, "no-such-topic", 0))
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
