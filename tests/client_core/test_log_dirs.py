"""DescribeLogDirs in the client core: the request at each version the client sends, and the
answer read back, future replicas and the v4 disk figures included."""

from __future__ import annotations

import pytest

from trio_broker.client.core.admin import describe_log_dirs_request, parse_describe_log_dirs
from trio_broker.client.core.structs import TopicPartition
from trio_broker.client.core.versions import CLIENT_VERSIONS
from trio_broker.protocol.api_keys import ApiKey
from trio_broker.protocol.messages import (
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    make_response,
    response_type,
)

VERSIONS = range(CLIENT_VERSIONS[ApiKey.DescribeLogDirs].min,
                 CLIENT_VERSIONS[ApiKey.DescribeLogDirs].max + 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_requests_encode_at_every_client_version(version: int) -> None:
    for partitions in (None, {}, {"orders": [0, 2]}):
        frame = encode_request(ApiKey.DescribeLogDirs, version, 7, "t",
                               describe_log_dirs_request(version, partitions))
        body = decode_request_body(decode_request_header(frame[4:]), frame[4:])
        if partitions is None:
            assert body.topics is None
        else:
            assert [(t.topic, list(t.partitions)) for t in body.topics] == list(
                partitions.items())


@pytest.mark.parametrize("version", VERSIONS)
def test_answers_are_read_per_dir(version: int) -> None:
    """A response encoded as a broker writes it, decoded, then read."""
    result = response_type(ApiKey.DescribeLogDirs).DescribeLogDirsResult
    topic = result.DescribeLogDirsTopic
    part = topic.DescribeLogDirsPartition
    disk = {"total_bytes": 1000, "usable_bytes": 400} if version >= 4 else {}
    response = make_response(ApiKey.DescribeLogDirs, version, throttle_time_ms=0, results=[
        result(error_code=0, log_dir="/data/a", topics=[topic(name="orders", partitions=[
            part(partition_index=0, partition_size=120, offset_lag=0, is_future_key=False),
            part(partition_index=1, partition_size=99, offset_lag=0, is_future_key=True)])],
            **disk),
        result(error_code=56, log_dir="/data/b", topics=[], **disk)])
    request = encode_request(ApiKey.DescribeLogDirs, version, 3, "t",
                             describe_log_dirs_request(version, None))
    frame = encode_response(decode_request_header(request[4:]), response)
    correlation_id, decoded = decode_response(ApiKey.DescribeLogDirs, version, frame[4:])
    assert correlation_id == 3
    code, dirs = parse_describe_log_dirs(decoded)
    assert code == 0
    assert [(d.path, d.error, d.sizes) for d in dirs] == [
        ("/data/a", 0, {TopicPartition("orders", 0): 120}), ("/data/b", 56, {})]
    expected = (1000, 400) if version >= 4 else (-1, -1)
    assert (dirs[0].total_bytes, dirs[0].usable_bytes) == expected
