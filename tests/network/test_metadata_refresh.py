"""A Metadata request naming no topic (a client's periodic refresh of the brokers) is answered on
the inline path from its body's bytes, without decoding it: the answer must be the one the
generic encoder gives, and every other body must still go through the handler."""

from __future__ import annotations

import struct

import pytest

from tests.wire import RawClient
from trio_broker.broker.apis.metadata import no_topics_body
from trio_broker.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey
from trio_broker.protocol.errors import ErrorCode
from trio_broker.protocol.messages import (
    decode_request_header,
    encode_data,
    encode_response,
    make_request,
    make_response,
    response_type,
)

_R = response_type(ApiKey.Metadata)
_VERSIONS = range(1, SUPPORTED_VERSIONS[ApiKey.Metadata].max + 1)


def _body(version: int, **fields: object) -> bytes:
    fields.setdefault("topics", [])
    return encode_data(make_request(ApiKey.Metadata, version, **fields), version)[2:]


def _expected(broker, frame: bytes) -> bytes:
    """The answer to a refresh, built field by field and through the generic encoder."""
    header = decode_request_header(frame)
    state = broker.state
    body = make_response(
        ApiKey.Metadata, header.api_version, throttle_time_ms=0, error_code=0, topics=[],
        brokers=[_R.MetadataResponseBroker(node_id=state.node_id, host=broker.host,
                                           port=broker.port, rack=None)],
        cluster_id=state.cluster_id, controller_id=state.node_id,
        authorized_operations=None)
    return encode_response(header, body)[4:]


async def test_a_refresh_is_answered_as_the_generic_encoder_answers_it(trio_broker):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    count = trio_broker.state.metrics.request_metrics.count
    before = count(ApiKey.Metadata)
    asked = 0
    for version in _VERSIONS:
        for auto in (True, False):
            for ops in (True, False):
                _, frame = client.encode(
                    ApiKey.Metadata, version, topics=[], allow_auto_topic_creation=auto,
                    include_topic_authorized_operations=ops,
                    include_cluster_authorized_operations=False)
                assert no_topics_body(version, frame[4 + decode_request_header(
                    frame[4:]).body_offset:])
                await client.send_raw(frame)
                answer = await client.read_frame()
                assert answer == _expected(trio_broker, frame[4:])
                asked += 1
    # counted as every request is: its timings and its answer's error codes
    assert count(ApiKey.Metadata) == before + asked
    errors = trio_broker.state.metrics.request_metrics._errors
    assert errors[(ApiKey.Metadata, ErrorCode.NONE)] >= asked
    await client.aclose()


@pytest.mark.parametrize(("version", "body"), [
    (0, _body(0)),  # v0: an empty list is every topic
    (1, struct.pack(">i", -1)),  # null: every topic
    (1, _body(1, topics=[make_request(ApiKey.Metadata, 1, topics=[]).MetadataRequestTopic(
        name="t")])),
    (9, _body(9, include_cluster_authorized_operations=True)),
    (9, _body(9)[:-1] + b"\x01\x00\x00"),  # a tagged field
    (1, _body(1) + b"\x00"),  # trailing bytes
    (14, b"\x01\x00\x00\x00"),  # a version we do not know
])
def test_other_bodies_go_through_the_handler(version: int, body: bytes):
    assert not no_topics_body(version, body)


async def test_a_request_for_every_topic_still_names_them(trio_broker):
    client = await RawClient.connect(trio_broker.host, trio_broker.port)
    await client.request(ApiKey.CreateTopics, 5, topics=[
        make_request(ApiKey.CreateTopics, 5, topics=[]).CreatableTopic(
            name="named", num_partitions=1, replication_factor=1, assignments=[],
            configs=[])], timeout_ms=5000, validate_only=False)
    for version in (0, 1):
        body = await client.request(ApiKey.Metadata, version,
                                    topics=[] if version == 0 else None)
        assert [t.name for t in body.topics] == ["named"]
    await client.aclose()
