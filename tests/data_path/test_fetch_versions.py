"""Fetch at every version, by raw requests: formats, leader epochs, sessions, topic ids."""

from __future__ import annotations

import uuid

import pytest

from tests.data_path.raw import TS, fetch_body, read_legacy, the_partition
from tests.wire import RawClient
from trio_broker.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey
from trio_broker.protocol.batch import iter_batches, validate_batch
from trio_broker.protocol.compression import Compression
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.records import build_batch

VERSIONS = range(SUPPORTED_VERSIONS[ApiKey.Fetch].min, SUPPORTED_VERSIONS[ApiKey.Fetch].max + 1)
CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]


def _fill(broker, topic: str, codec: Compression = Compression.NONE, *, batches: int = 3,
          configs: dict[str, str] | None = None) -> bytes:
    """Appends ``batches`` batches of 3 records straight into the log; returns its bytes."""
    logs = broker.state.logs
    logs.create_topic(topic, 1, configs or {})
    log = logs.get_log(topic, 0)
    for b in range(batches):
        raw = build_batch([(b"k%d" % (3 * b + i), b"value-%d" % (3 * b + i)) for i in range(3)],
                          timestamps=[TS + 3 * b + i for i in range(3)], compression=codec)
        log.append(raw, validate_batch(raw, max_message_bytes=1 << 20), now_ms=TS)
    return log.read(0, 1 << 20).records


async def _fetch(broker, version: int, topic: str, offset: int = 0, **kwargs):
    client = await RawClient.connect(broker.host, broker.port)
    try:
        if version >= 13 and "topic_id" not in kwargs:
            kwargs["topic_id"] = broker.state.logs.topic_id(topic)
        body = fetch_body(version, topic if version < 13 else "", offset, **kwargs)
        return await client.request(ApiKey.Fetch, version, body=body)
    finally:
        await client.aclose()


@pytest.mark.parametrize("version", VERSIONS)
async def test_every_version_returns_the_format_it_allows(trio_broker, version):
    stored = _fill(trio_broker, f"f{version}")
    response = await _fetch(trio_broker, version, f"f{version}", offset=1)
    part = the_partition(response)
    assert part.error_code == 0
    assert part.high_watermark == 9
    if version >= 4:
        assert part.last_stable_offset == 9
    if version >= 5:
        assert part.log_start_offset == 0
    if version >= 7:
        assert (response.error_code, response.session_id) == (0, 0)  # sessionless
    if version >= 11:
        assert part.preferred_read_replica == -1
    if version >= 4:
        # v4+: the stored batches, byte for byte (the one holding offset 1 first)
        assert part.records == stored
        return
    magic = 0 if version <= 1 else 1
    read = read_legacy(part.records)
    # uncompressed: records below the fetch offset are left out, as Kafka down-converts
    assert [r[0] for r in read] == list(range(1, 9))
    assert [r[3] for r in read] == [b"value-%d" % i for i in range(1, 9)]
    assert {r[4] for r in read} == {magic}
    if magic == 1:
        assert [r[1] for r in read] == [TS + i for i in range(1, 9)]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("version", [1, 3])
async def test_old_versions_get_compressed_wrappers_with_the_codec_kept(trio_broker, version,
                                                                         codec):
    topic = f"old-{version}-{codec.name}"
    _fill(trio_broker, topic, codec)
    part = the_partition(await _fetch(trio_broker, version, topic))
    if codec == Compression.LZ4 and version <= 1:
        # kafka-python reads v0 LZ4 only with the optional xxhash module: check the wrapper
        from trio_broker.protocol.legacy import iter_entries

        wrappers = list(iter_entries(part.records))
        assert [w.compression for w in wrappers] == [codec] * 3
        return
    read = read_legacy(part.records)
    assert [r[0] for r in read] == list(range(9))
    assert [r[3] for r in read] == [b"value-%d" % i for i in range(9)]
    from trio_broker.protocol.legacy import iter_entries

    assert {w.compression for w in iter_entries(part.records)} == {codec}


async def test_old_versions_cannot_read_zstd(trio_broker):
    _fill(trio_broker, "zstd-batches", Compression.ZSTD)
    for version in (0, 3):
        part = the_partition(await _fetch(trio_broker, version, "zstd-batches"))
        assert part.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert the_partition(await _fetch(trio_broker, 4, "zstd-batches")).error_code == 0
    # a topic whose codec is zstd needs Fetch v10, as in Kafka
    _fill(trio_broker, "zstd-topic", configs={"compression.type": "zstd"})
    for version, expected in ((9, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE), (10, 0)):
        part = the_partition(await _fetch(trio_broker, version, "zstd-topic"))
        assert part.error_code == expected


async def test_old_versions_keep_the_hard_byte_limit(trio_broker):
    _fill(trio_broker, "limits")
    small = 20  # smaller than any batch or message
    for version, expected_empty in ((2, True), (3, False), (4, False)):
        part = the_partition(await _fetch(trio_broker, version, "limits",
                                          partition_max_bytes=small))
        assert part.error_code == 0
        assert (len(part.records or b"") == 0) == expected_empty, version


@pytest.mark.parametrize("version", [9, 12, 16, 18])
async def test_current_leader_epoch_fences_and_unknown(trio_broker, version):
    _fill(trio_broker, "epochs")
    log = trio_broker.state.logs.get_log("epochs", 0)
    log.become_leader(3)
    ok = the_partition(await _fetch(trio_broker, version, "epochs", current_leader_epoch=3))
    assert ok.error_code == 0
    response = await _fetch(trio_broker, version, "epochs", current_leader_epoch=2)
    fenced = the_partition(response)
    assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH
    if version >= 16:  # KIP-951: who leads now, and where
        assert (fenced.current_leader.leader_id, fenced.current_leader.leader_epoch) == (0, 3)
        [node] = response.node_endpoints
        assert (node.node_id, node.host, node.port) == (0, trio_broker.host, trio_broker.port)
    unknown = the_partition(await _fetch(trio_broker, version, "epochs", current_leader_epoch=4))
    assert unknown.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


async def test_last_fetched_epoch_reveals_a_diverging_log(trio_broker):
    _fill(trio_broker, "diverge", batches=2)  # offsets 0-5 under epoch 0
    log = trio_broker.state.logs.get_log("diverge", 0)
    log.become_leader(2)
    raw = build_batch([(b"k", b"v")] * 2)
    log.append(raw, validate_batch(raw, max_message_bytes=1 << 20), now_ms=TS)  # 6-7, epoch 2
    # a fetcher that read epoch 0 up to offset 7 diverged: epoch 0 ended at 6 here
    part = the_partition(await _fetch(trio_broker, 12, "diverge", offset=7, last_fetched_epoch=0))
    assert part.error_code == 0
    assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (0, 6)
    assert not part.records
    # an unknown epoch between known ones answers with the one before it
    part = the_partition(await _fetch(trio_broker, 13, "diverge", offset=7, last_fetched_epoch=1))
    assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (0, 6)
    # consistent: no diverging epoch, data as usual
    part = the_partition(await _fetch(trio_broker, 12, "diverge", offset=6, last_fetched_epoch=0))
    assert part.diverging_epoch is None  # the tagged field is not sent
    assert [h.base_offset for _, h in iter_batches(part.records)] == [6]
    # an epoch newer than any here cannot be placed: OFFSET_OUT_OF_RANGE, as in Kafka
    part = the_partition(await _fetch(trio_broker, 12, "diverge", offset=6, last_fetched_epoch=9))
    assert part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


async def test_sessions_are_answered_sessionless(trio_broker):
    _fill(trio_broker, "sessions")
    # a full fetch (epoch 0 asks for a session, -1 does not): answered, session id 0
    for session_epoch in (0, -1):
        response = await _fetch(trio_broker, 7, "sessions", session_epoch=session_epoch)
        assert (response.error_code, response.session_id) == (0, 0)
        assert the_partition(response).records
    # an incremental fetch names a session this broker never gave out
    response = await _fetch(trio_broker, 11, "sessions", session_id=123, session_epoch=4)
    assert response.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert response.responses == []


async def test_v13_fetches_by_topic_id(trio_broker):
    stored = _fill(trio_broker, "ids")
    response = await _fetch(trio_broker, 13, "ids")
    [topic] = response.responses
    assert topic.topic_id == trio_broker.state.logs.topic_id("ids")
    assert the_partition(response).records == stored
    unknown = uuid.uuid4()
    response = await _fetch(trio_broker, 18, "ids", topic_id=unknown)
    [topic] = response.responses
    assert topic.topic_id == unknown
    assert the_partition(response).error_code == ErrorCode.UNKNOWN_TOPIC_ID


async def test_read_committed_reads_to_the_last_stable_offset(trio_broker):
    _fill(trio_broker, "committed")
    part = the_partition(await _fetch(trio_broker, 11, "committed", isolation_level=1))
    log = trio_broker.state.logs.get_log("committed", 0)
    assert part.last_stable_offset == log.last_stable_offset == 9
    assert part.aborted_transactions == []


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 4])
async def test_v4_plus_serves_the_bytes_read_without_touching_records(trio_broker, monkeypatch,
                                                                      version):
    """No per-record work and no copy: the records of the response are the very bytes object
    the log's one read returned, and no decoder or converter runs."""
    from trio_broker.broker.apis import fetch as fetch_api
    from trio_broker.broker.storage import log as log_module
    from trio_broker.protocol import records as records_module

    _fill(trio_broker, "zero-copy", Compression.LZ4)
    returned = []
    original_read = log_module.Log.read

    def read(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        data = original_read(self, *args, **kwargs)
        returned.append(data.records)
        return data

    def forbidden(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("records were decoded or converted on the v4+ fetch path")

    monkeypatch.setattr(log_module.Log, "read", read)
    monkeypatch.setattr(fetch_api, "batches_to_legacy", forbidden)
    monkeypatch.setattr(records_module, "decode_batch_into", forbidden)
    logs = trio_broker.state.logs
    body = fetch_body(version, "zero-copy" if version < 13 else "", 0,
                      topic_id=logs.topic_id("zero-copy") if version >= 13 else None)
    read_result = fetch_api.read_partitions(trio_broker.state, body, version)
    [topic] = read_result.topics
    [part] = topic.partitions
    [served] = returned
    assert part.records is served
    assert len(served) > 0
