"""Fuzzing the decoding path and a live broker with hostile request frames.

Properties: only ``RemoteProtocolError`` escapes ``decode_request_header`` /
``decode_request_body``; a broker process fed the same kinds of frames over real sockets stays
up, logs no traceback (no handler crashed), answers a well-behaved client on another
connection throughout, and keeps its RSS within a fixed bound. ``bench/fuzz_long.py`` runs the
same for much longer.
"""

from __future__ import annotations

import collections
import os
import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile.fuzz import (
    API_VERSIONS,
    feed,
    hostile_frames,
    mutated,
    random_frames,
    valid_requests,
    well_behaved_client_ok,
)
from tests.hostile.harness import BrokerProcess
from trio_broker.protocol.api_keys import ApiKey, request_class
from trio_broker.protocol.errors import ErrorCode, RemoteProtocolError
from trio_broker.protocol.messages import (
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    make_request,
)

FUZZ = settings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=False,
                database=None)
#: the broker process may use at most this much memory while being fuzzed
RSS_BOUND_KB = 256 * 1024


def decode(frame: bytes) -> object:
    """Decode as the broker does: header, then body; returns the body or raises."""
    (size,) = struct.unpack_from(">i", frame)
    payload = frame[4:4 + max(size, 0)]
    header = decode_request_header(payload)
    return decode_request_body(header, payload)


def only_protocol_errors(frame: bytes) -> None:
    try:
        decode(frame)
    except RemoteProtocolError:
        pass


@pytest.mark.parametrize(("api_key", "version"), API_VERSIONS,
                         ids=[f"{k}v{v}" for k, v in API_VERSIONS])
@settings(FUZZ, max_examples=40)
@given(data=st.data())
def test_decoders_raise_only_remote_protocol_error(api_key, version, data):
    good = valid_requests((api_key, version))
    frame = data.draw(good)
    body = decode(frame)  # what the codec produced, it must read back
    assert body is not None
    only_protocol_errors(data.draw(mutated(st.just(frame))))
    only_protocol_errors(data.draw(random_frames()))


@settings(FUZZ, max_examples=600)
@given(frame=hostile_frames())
def test_decoders_on_mixed_hostile_frames(frame):
    only_protocol_errors(frame)


@pytest.fixture(scope="module")
def fuzzed_broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("fuzzed")
    with BrokerProcess(data / "logs", **{"connections.max.idle.ms": 2000,
                                         "socket.request.max.bytes": 1 << 20,
                                         "group.initial.rebalance.delay.ms": 0,
                                         "auto.create.topics.enable": "true"}) as broker:
        yield broker


OUTCOMES: collections.Counter[str] = collections.Counter()


@settings(FUZZ, max_examples=1000)
@given(frame=hostile_frames())
def test_live_broker_survives_hostile_frames(fuzzed_broker, frame):
    OUTCOMES[feed(fuzzed_broker.address, frame, timeout_s=2)] += 1
    assert fuzzed_broker.alive()
    if sum(OUTCOMES.values()) % 100 == 0:
        assert well_behaved_client_ok(fuzzed_broker.address)
        assert fuzzed_broker.rss_kb() < RSS_BOUND_KB


def test_live_broker_after_fuzzing(fuzzed_broker):
    """After the fuzzing test above: nothing crashed, memory bounded.

    Run on its own (``-k``), it runs the fuzzing first rather than checking nothing.
    """
    if not OUTCOMES:
        test_live_broker_survives_hostile_frames(fuzzed_broker=fuzzed_broker)
    assert sum(OUTCOMES.values()) >= 900, OUTCOMES
    assert OUTCOMES["answered"], OUTCOMES
    assert OUTCOMES["closed"], OUTCOMES
    assert fuzzed_broker.alive()
    assert well_behaved_client_ok(fuzzed_broker.address)
    assert fuzzed_broker.rss_kb() < RSS_BOUND_KB
    log = fuzzed_broker.log_text()
    assert "Traceback" not in log, fuzzed_broker.log_tail(80)


# --- regressions the fuzzer found -------------------------------------------------------------

def _frame(api_key: int, version: int, **fields: object) -> bytes:
    return encode_request(api_key, version, 1, "regression", make_request(api_key, version,
                                                                          **fields))


def _null_array(frame: bytes, marker: bytes) -> bytes:
    """Replace the i32 count that precedes ``marker``'s array with -1 (null)."""
    pos = frame.index(marker)
    patched = frame[:pos - 4] + struct.pack(">i", -1) + frame[pos:]
    return struct.pack(">i", len(patched) - 4) + patched[4:]


@pytest.mark.parametrize("case", ["offset-commit-partitions", "fetch-partitions",
                                  "join-metadata"])
def test_null_in_a_non_nullable_field_closes_the_connection(fuzzed_broker, case):
    """Found by the fuzzer: a -1 count where the schema forbids null crashed handlers."""
    fetch = request_class(ApiKey.Fetch)
    commit = request_class(ApiKey.OffsetCommit)
    join = request_class(ApiKey.JoinGroup)
    if case == "offset-commit-partitions":
        part = commit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_metadata="")
        good = _frame(ApiKey.OffsetCommit, 2, group_id="g", generation_id_or_member_epoch=-1,
                      member_id="",
                      retention_time_ms=-1, topics=[commit.OffsetCommitRequestTopic(
                          name="t", partitions=[part])])
        bad = _null_array(good, struct.pack(">i", 0) + struct.pack(">q", 1))
    elif case == "fetch-partitions":
        part = fetch.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1,
                                               fetch_offset=0, log_start_offset=-1,
                                               partition_max_bytes=100)
        good = _frame(ApiKey.Fetch, 6, replica_id=-1, max_wait_ms=0, min_bytes=0,
                      max_bytes=100, isolation_level=0,
                      topics=[fetch.FetchTopic(topic="t", partitions=[part])])
        bad = _null_array(good, struct.pack(">i", 0) + struct.pack(">q", 0))
    else:
        good = _frame(ApiKey.JoinGroup, 0, group_id="g", session_timeout_ms=6000,
                      member_id="", protocol_type="consumer", protocols=[
                          join.JoinGroupRequestProtocol(name="range", metadata=b"MD")])
        bad = _null_array(good, b"MD")
    header = decode_request_header(bad[4:])
    with pytest.raises(RemoteProtocolError, match="serialized as null"):
        decode_request_body(header, bad[4:])
    assert feed(fuzzed_broker.address, good) == "answered"
    assert feed(fuzzed_broker.address, bad) == "closed"
    assert "Traceback" not in fuzzed_broker.log_text()


def test_absurd_partition_counts_are_refused(fuzzed_broker):
    """Found by the fuzzer: CreateTopics with 2**31-1 partitions ate all files and 14 GB."""
    ct = request_class(ApiKey.CreateTopics)
    cp = request_class(ApiKey.CreatePartitions)
    topics = [ct.CreatableTopic(name="absurd", num_partitions=2**31 - 1, replication_factor=1,
                                assignments=[], configs=[])]
    resp = _call(fuzzed_broker.address, ApiKey.CreateTopics, 4, topics=topics, timeout_ms=1000,
                 validate_only=False)
    assert resp.topics[0].error_code == ErrorCode.INVALID_PARTITIONS
    topics[0].name, topics[0].num_partitions = "modest", 2
    resp = _call(fuzzed_broker.address, ApiKey.CreateTopics, 4, topics=topics, timeout_ms=1000,
                 validate_only=False)
    assert resp.topics[0].error_code == 0
    resp = _call(fuzzed_broker.address, ApiKey.CreatePartitions, 1, timeout_ms=1000,
                 validate_only=False, topics=[cp.CreatePartitionsTopic(
                     name="modest", count=2**31 - 1, assignments=None)])
    assert resp.results[0].error_code == ErrorCode.INVALID_PARTITIONS
    meta = _call(fuzzed_broker.address, ApiKey.Metadata, 5, topics=[
        request_class(ApiKey.Metadata).MetadataRequestTopic(name="modest")],
        allow_auto_topic_creation=False)
    assert len(meta.topics[0].partitions) == 2


def test_running_out_of_file_descriptors_fails_only_that_request(tmp_path):
    """Creating more partitions than the process may open files for is an error, not a crash."""
    ct = request_class(ApiKey.CreateTopics)
    with BrokerProcess(tmp_path / "logs", max_open_files=256) as broker:
        def create(name: str, n: int) -> object:
            return _call(broker.address, ApiKey.CreateTopics, 4, timeout_ms=1000,
                         validate_only=False, topics=[ct.CreatableTopic(
                             name=name, num_partitions=n, replication_factor=1, assignments=[],
                             configs=[])]).topics[0]

        too_many = create("many", 400)  # one open file (the active segment) per partition
        assert too_many.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "Too many open files" in too_many.error_message
        assert well_behaved_client_ok(broker.address)
        assert create("few", 3).error_code == 0
        meta = _call(broker.address, ApiKey.Metadata, 5, topics=None,
                     allow_auto_topic_creation=False)
        assert sorted(t.name for t in meta.topics) == ["few"]
        assert len(os.listdir(f"/proc/{broker.pid}/fd")) < 64
        assert "Traceback" not in broker.log_text()


def _call(address: tuple[str, int], api_key: int, version: int, **fields: object) -> object:
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(_frame(api_key, version, **fields))
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
            chunk = sock.recv(1 << 20)
            assert chunk, "connection closed"
            buf += chunk
    return decode_response(api_key, version, buf[4:])[1]


def test_offset_commit_with_an_endless_retention(fuzzed_broker):
    """Found by the fuzzer: retention_time_ms near 2**63 overflowed the offsets file record."""
    ct = request_class(ApiKey.CreateTopics)
    _call(fuzzed_broker.address, ApiKey.CreateTopics, 4, timeout_ms=1000, validate_only=False,
          topics=[ct.CreatableTopic(name="retained", num_partitions=1, replication_factor=1,
                                    assignments=[], configs=[])])
    commit = request_class(ApiKey.OffsetCommit)
    part = commit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=42, committed_metadata=None)
    resp = _call(fuzzed_broker.address, ApiKey.OffsetCommit, 3, group_id="forever",
                 generation_id_or_member_epoch=-1, member_id="", retention_time_ms=2**63 - 1,
                 topics=[commit.OffsetCommitRequestTopic(name="retained", partitions=[part])])
    assert resp.topics[0].partitions[0].error_code == 0
    fetch = request_class(ApiKey.OffsetFetch)
    got = _call(fuzzed_broker.address, ApiKey.OffsetFetch, 3, group_id="forever", topics=[
        fetch.OffsetFetchRequestTopic(name="retained", partition_indexes=[0])])
    assert got.topics[0].partitions[0].committed_offset == 42
